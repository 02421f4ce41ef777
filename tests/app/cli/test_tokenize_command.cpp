// app.cli.tokenize: `hedgehog tokenize --out` as a user runs it, in a child process. The ids file
// is written whole or not at all: on a full disk (RLIMIT_FSIZE) the command fails in one line
// naming the file, and an ids file already there is left as it was (a plain stream left half a
// file behind). On a good run the file has one line per input, PATH<TAB>N<TAB>ids.
#include <sys/resource.h>

#include <filesystem>
#include <string>
#include <vector>

#include "engine/io/durable_file.h"
#include "tests/support/child_process.h"
#include "tests/support/hh_test.h"
#include "tests/support/temp_dir.h"

namespace test_tokenize_command {

namespace {

using hh::test::crash::readAll;

// `hedgehog tokenize` on the TinyStories sample with the stories260K tokenizer; the exit status.
// With `fileSizeLimit` > 0 the child may write files of at most that many bytes.
int tokenize(const hh::test::TempDir& dir, const std::string& out, rlim_t fileSizeLimit = 0) {
  const std::string data = HH_FIXTURES_DIR;
  const std::vector<std::string> argv{
      HH_CLI_BINARY, "tokenize", data + "/tinystories/valid-sample.txt", "--tokenizer", data + "/stories260K",
      "--out",       out};
  rlimit saved{};
  ::getrlimit(RLIMIT_FSIZE, &saved);
  if (fileSizeLimit > 0) {
    const rlimit limited{fileSizeLimit, saved.rlim_max};
    ::setrlimit(RLIMIT_FSIZE, &limited);  // inherited by the child; restored before anything else is written here
  }
  const pid_t pid = hh::test::crash::spawnLogged(argv, dir.file("stdout"), dir.file("stderr"));
  ::setrlimit(RLIMIT_FSIZE, &saved);
  return hh::test::crash::waitFor(pid, 120);
}

}  // namespace

class TestTokenizeCommand : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void idsFileIsWholeOrUntouched() {
    if (std::string(HH_CLI_BINARY).empty()) QSKIP("the hedgehog CLI is not built (CLI11 missing)");
    hh::test::TempDir dir("tokenize_out");
    const auto out = dir.file("ids.txt");
    QCOMPARE(tokenize(dir, out), 0);
    const auto ids = readAll(out);
    QVERIFY2(ids.size() > 4096 && ids.find("valid-sample.txt\t") != std::string::npos && ids.back() == '\n',
             ids.substr(0, 200).c_str());

    hh::io::writeFileAtomically(out, "the previous ids\n");
    std::remove(dir.file("stderr").c_str());
    QCOMPARE(tokenize(dir, out, 2048), 1);
    const auto err = readAll(dir.file("stderr"));
    QVERIFY2(
        err.rfind("hedgehog: error: " + out + ": cannot write the ids", 0) == 0 && err.find('\n') == err.size() - 1,
        err.c_str());
    QCOMPARE(readAll(out), std::string("the previous ids\n"));
    QCOMPARE(int(std::distance(std::filesystem::directory_iterator(dir.path()), std::filesystem::directory_iterator())),
             3);  // ids.txt, stdout, stderr: no temporary file left
  }
};

HH_TEST_SUITE(TestTokenizeCommand, "app.cli.tokenize", &TestTokenizeCommand::idsFileIsWholeOrUntouched)

}  // namespace test_tokenize_command

#if HH_HAVE_QTEST
#include "test_tokenize_command.moc"
#endif
