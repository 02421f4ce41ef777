// engine.io.durable_file: writeFileAtomically replaces a file whole; writers of one file in several
// threads and several processes at once never collide on the temporary file (each rename succeeds
// and the file is always one writer's text, whole); a failed write says which file and leaves no
// temporary file behind, and so does an AtomicFile destroyed before its commit.
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "engine/io/durable_file.h"
#include "tests/support/child_process.h"
#include "tests/support/hh_test.h"
#include "tests/support/temp_dir.h"

namespace test_durable_file {

namespace {

namespace fs = std::filesystem;
using hh::test::crash::readAll;

// Files in `dir` other than `keep`.
std::vector<std::string> othersIn(const std::string& dir, const std::string& keep) {
  std::vector<std::string> out;
  for (const auto& entry : fs::directory_iterator(dir))
    if (entry.path().filename() != keep) out.push_back(entry.path().filename().string());
  return out;
}

// The text writer `w` writes: one letter of its own, 4096 times, so that a torn or mixed file shows.
std::string textOf(int w) {
  return std::string(4096, static_cast<char>('a' + w));
}

// `writes` writes of textOf(w) to `path`; returns how many of them threw.
int writeMany(const std::string& path, int w, int writes) {
  int failed = 0;
  for (int i = 0; i < writes; ++i) {
    try {
      hh::io::writeFileAtomically(path, textOf(w));
    } catch (const std::exception&) {
      ++failed;
    }
  }
  return failed;
}

bool isOneWritersText(const std::string& text, int writers) {
  for (int w = 0; w < writers; ++w)
    if (text == textOf(w)) return true;
  return false;
}

class TestDurableFile : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void replacesTheFileWhole() {
    hh::test::TempDir dir("durable_replace");
    const auto path = dir.file("state.json");
    hh::io::writeFileAtomically(path, "first\n");
    QCOMPARE(readAll(path), std::string("first\n"));
    hh::io::writeFileAtomically(path, "second, longer\n");
    QCOMPARE(readAll(path), std::string("second, longer\n"));
    hh::io::writeFileAtomically(path, "");
    QCOMPARE(readAll(path), std::string());
    QVERIFY(othersIn(dir.path(), "state.json").empty());
  }

  void concurrentThreadsNeverCollide() {
    hh::test::TempDir dir("durable_threads");
    const auto path = dir.file("summary.json");
    constexpr int kWriters = 4, kWrites = 50;
    std::vector<int> failed(kWriters, 0);
    std::vector<std::thread> threads;
    for (int w = 0; w < kWriters; ++w)
      threads.emplace_back([&, w] { failed[size_t(w)] = writeMany(path, w, kWrites); });
    for (auto& t : threads) t.join();
    for (int w = 0; w < kWriters; ++w) QCOMPARE(failed[size_t(w)], 0);
    QVERIFY(isOneWritersText(readAll(path), kWriters));
    QVERIFY(othersIn(dir.path(), "summary.json").empty());
  }

  // What two `hedgehog experiment --jobs 2` children did with the experiment's summary: with one
  // shared temporary name, one child's rename found the other's file gone and the child failed.
  void concurrentProcessesNeverCollide() {
    hh::test::TempDir dir("durable_processes");
    const auto path = dir.file("summary.json");
    constexpr int kWriters = 3, kWrites = 40;
    std::vector<pid_t> children;
    for (int w = 0; w < kWriters; ++w) {
      const pid_t pid = fork();
      QVERIFY(pid >= 0);
      if (pid == 0) _exit(writeMany(path, w, kWrites) == 0 ? 0 : 1);
      children.push_back(pid);
    }
    for (const pid_t pid : children) {
      int status = 0;
      QCOMPARE(waitpid(pid, &status, 0), pid);
      QVERIFY2(WIFEXITED(status) && WEXITSTATUS(status) == 0, "a writer's rename or write failed");
    }
    QVERIFY(isOneWritersText(readAll(path), kWriters));
    QVERIFY(othersIn(dir.path(), "summary.json").empty());
  }

  void failureNamesTheFile() {
    hh::test::TempDir dir("durable_fail");
    const auto missing = dir.file("no_such_folder/state.json");
    HH_VERIFY_THROWS_WITH(hh::io::writeFileAtomically(missing, "x"), "no_such_folder/state.json");
    // A target that is a folder: the write succeeds, the rename fails, and the temporary file goes.
    fs::create_directories(dir.file("taken"));
    fs::create_directories(dir.file("taken/inside"));
    HH_VERIFY_THROWS_WITH(hh::io::writeFileAtomically(dir.file("taken"), "x"), "cannot rename");
    QVERIFY(othersIn(dir.path(), "taken").empty());
  }

  // An AtomicFile given up before commit() (an exception half-way through a model's tensors)
  // leaves the old file as it was and no temporary file.
  void uncommittedFileChangesNothing() {
    hh::test::TempDir dir("durable_uncommitted");
    const auto path = dir.file("model.safetensors");
    hh::io::writeFileAtomically(path, "old");
    {
      hh::io::AtomicFile file(path);
      file.write("new, but only half", 9);
      QCOMPARE(othersIn(dir.path(), "model.safetensors").size(), size_t{1});  // the temporary file
    }
    QCOMPARE(readAll(path), std::string("old"));
    QVERIFY(othersIn(dir.path(), "model.safetensors").empty());
    hh::io::AtomicFile file(path);
    file.write("new", 3);
    file.commit();
    QCOMPARE(readAll(path), std::string("new"));
    QVERIFY(othersIn(dir.path(), "model.safetensors").empty());
  }
};

}  // namespace

HH_TEST_SUITE(TestDurableFile, "engine.io.durable_file", &TestDurableFile::replacesTheFileWhole,
              &TestDurableFile::concurrentThreadsNeverCollide, &TestDurableFile::concurrentProcessesNeverCollide,
              &TestDurableFile::failureNamesTheFile, &TestDurableFile::uncommittedFileChangesNothing)

}  // namespace test_durable_file

#if HH_HAVE_QTEST
#include "test_durable_file.moc"
#endif
