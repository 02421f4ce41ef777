// engine.runs.swmr: the run file across processes (fork; the child never returns into the test).
//  - liveReadFromSecondProcess: a child writes and flushes in batches, in lockstep with this
//    process, which refreshes its reader after every batch and must see exactly what was flushed,
//    values included, with the writer reported active, then the completed status.
//  - killedWriterKeepsFlushedRows: 20 times, a child writes as fast as it can (scalars and tables
//    every step; snapshots, curves, weights and a log line every 10th step; flushes by hand every
//    7th step or on the automatic cadence, each reported through a pipe) and is killed with
//    SIGKILL after a random delay of 0 to 100 ms. The file must
//    open, hold at least every step up to the last reported flush, hold only correct rows, report
//    the run as running with no active writer (interrupted), and read back completely.
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "engine/runs/run_reader.h"
#include "engine/runs/run_writer.h"
#include "tests/engine/runs/run_test_support.h"
#include "tests/support/hh_test.h"

namespace test_run_swmr {

using namespace hh::runs;
using namespace hh::runs::testing;

namespace {

// A pipe of int64 messages (writes of 8 bytes are atomic on a pipe).
struct Pipe {
  int fds[2] = {-1, -1};
  Pipe() {
    if (::pipe(fds) != 0) throw std::runtime_error("pipe failed");
  }
  ~Pipe() {
    closeRead();
    closeWrite();
  }
  void closeRead() {
    if (fds[0] >= 0) ::close(fds[0]);
    fds[0] = -1;
  }
  void closeWrite() {
    if (fds[1] >= 0) ::close(fds[1]);
    fds[1] = -1;
  }
  void send(int64_t v) const {
    if (::write(fds[1], &v, sizeof v) != sizeof v) _exit(90);
  }
  // Waits up to `ms` for one message; false on timeout or end of stream.
  bool receive(int64_t& v, int ms) const {
    pollfd p{fds[0], POLLIN, 0};
    if (::poll(&p, 1, ms) <= 0) return false;
    return ::read(fds[0], &v, sizeof v) == sizeof v;
  }
};

// Runs `body` in a child process; the child exits with its result (0 = fine), never returning.
template <typename Body>
pid_t spawn(Body body) {
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    int rc = 1;
    try {
      rc = body();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "child: %s\n", e.what());
      rc = 2;
    }
    _exit(rc);
  }
  return pid;
}

int waitExit(pid_t pid) {
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
}

// One step of the kill test's writer.
void writeStep(RunWriter& w, int64_t s) {
  w.appendScalars(s, {{"loss", lossAt(s)}, {"lr", lrAt(s)}});
  w.appendTable(s, "kl", tableAt(s, 0));
  w.appendTable(s, "entropy_linear", tableAt(s, 2));
  if (s % 10 == 0) {
    w.appendSnapshot(s, mapsAt(s, 2, kTokens, 0), mapsAt(s, 2, kTokens, 1));
    w.appendCurves(s, curvesAt(s));
    w.appendWeights(s, {{"fm.weight", weightAt(s, 48)}, {"fm.bias", weightAt(s, 12)}});
    w.log("step " + std::to_string(s), s);
  }
}

// Every visible row of `r` is the one writeStep wrote; returns "" or what is wrong.
std::string checkRows(const RunReader& r) {
  const ScalarSeries loss = r.scalars("loss"), lr = r.scalars("lr");
  for (size_t i = 0; i < loss.steps.size(); ++i)
    if (loss.steps[i] != int64_t(i) || loss.values[i] != lossAt(int64_t(i)))
      return "loss row " + std::to_string(i) + " is wrong";
  for (size_t i = 0; i < lr.steps.size(); ++i)
    if (lr.steps[i] != int64_t(i) || lr.values[i] != lrAt(int64_t(i)))
      return "lr row " + std::to_string(i) + " is wrong";
  const TableSeries kl = r.table("kl"), ent = r.table("entropy_linear");
  for (size_t i = 0; i < kl.size(); ++i)
    if (kl.steps[i] != int64_t(i) ||
        std::vector<double>(kl.values.begin() + i * 6, kl.values.begin() + (i + 1) * 6) != tableAt(int64_t(i), 0))
      return "kl row " + std::to_string(i) + " is wrong";
  for (size_t i = 0; i < ent.size(); ++i)
    if (ent.values[i * 6 + 5] != tableAt(int64_t(i), 2)[5]) return "entropy row " + std::to_string(i) + " is wrong";
  for (int64_t i = 0; i < r.snapshotCount(); ++i) {
    const Snapshot s = r.snapshot(i);
    if (s.step != 10 * i || s.softmax != mapsAt(s.step, 2, kTokens, 0) || s.linear != mapsAt(s.step, 2, kTokens, 1))
      return "snapshot " + std::to_string(i) + " is wrong";
  }
  for (int64_t i = 0; i < r.curveCount(); ++i)
    if (r.curves(i).curves[1].mean != curvesAt(10 * i)[1].mean) return "curve " + std::to_string(i) + " is wrong";
  for (int64_t i = 0; i < r.weightCount("fm.weight"); ++i)
    if (r.weights("fm.weight", i).values != weightAt(10 * i, 48)) return "weights " + std::to_string(i) + " are wrong";
  const auto lines = r.logLines();
  for (size_t i = 0; i < lines.size(); ++i)
    if (lines[i].text != "step " + std::to_string(10 * i)) return "log line " + std::to_string(i) + " is wrong";
  return {};
}

}  // namespace

class TestRunSwmr : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void liveReadFromSecondProcess();
  void killedWriterKeepsFlushedRows();
};

void TestRunSwmr::liveReadFromSecondProcess() {
  ScratchDir tmp;
  const std::string path = tmp.file("live.h5");
  Pipe toParent, toChild;
  const int batches = 8, perBatch = 6;
  const pid_t pid = spawn([&] {
    toParent.closeRead();
    toChild.closeWrite();
    RunWriter w = RunWriter::create(path, sampleHeader("live"), {{0, 0.0}, false});  // flush by hand
    toParent.send(0);
    int64_t step = 0, go = 0;
    for (int b = 0; b < batches; ++b) {
      if (!toChild.receive(go, 10000)) return 3;
      for (int i = 0; i < perBatch; ++i, ++step) writeStep(w, step);
      w.flush();
      toParent.send(step);
    }
    if (!toChild.receive(go, 10000)) return 3;
    w.setStatus(RunStatus::Completed, "all batches");
    w.close();
    toParent.send(-1);
    return 0;
  });
  toParent.closeWrite();
  toChild.closeRead();

  int64_t flushed = -1;
  QVERIFY2(toParent.receive(flushed, 10000), "the writer did not start");
  RunReader r = RunReader::open(path);
  QVERIFY(r.live());
  QVERIFY(r.writerActive());
  QCOMPARE(r.header().runId, std::string("live"));
  QCOMPARE(r.scalarRows("loss"), int64_t(0));
  std::vector<int64_t> seen;
  for (int b = 0; b < batches; ++b) {
    toChild.send(1);
    QVERIFY2(toParent.receive(flushed, 10000), "the writer stopped");
    QVERIFY(r.refresh());
    seen.push_back(r.scalarRows("loss"));
    QCOMPARE(r.scalarRows("loss"), flushed);  // every flushed row, nothing half-written
    QCOMPARE(r.tableRows("kl"), flushed);
    QCOMPARE(r.snapshotCount(), (flushed + 9) / 10);
    QCOMPARE(r.status(), RunStatus::Running);
    QVERIFY(r.writerActive());
    const std::string problem = checkRows(r);
    QVERIFY2(problem.empty(), problem.c_str());
    const ScalarSeries fresh = r.scalars("loss", flushed - perBatch);  // incremental read of the new rows
    QCOMPARE(fresh.steps.size(), size_t(perBatch));
  }
  toChild.send(1);
  QVERIFY(toParent.receive(flushed, 10000));
  QCOMPARE(waitExit(pid), 0);
  r.refresh();
  QCOMPARE(r.status(), RunStatus::Completed);
  QCOMPARE(r.statusMessage(), std::string("all batches"));
  QVERIFY(!r.writerActive());
  QVERIFY(!r.interrupted());
  QCOMPARE(r.scalarRows("loss"), int64_t(batches * perBatch));
  for (size_t i = 1; i < seen.size(); ++i) QVERIFY(seen[i] > seen[i - 1]);
}

void TestRunSwmr::killedWriterKeepsFlushedRows() {
  ScratchDir tmp;
  std::mt19937 rng(20240501);
  std::uniform_int_distribution<int> delayMs(0, 100);
  const int runs = 20;
  int64_t totalRows = 0;
  for (int run = 0; run < runs; ++run) {
    const std::string path = tmp.file("killed-" + std::to_string(run) + ".h5");
    const int delay = delayMs(rng);
    Pipe toParent;
    const bool automatic = run % 2 == 1;
    const pid_t pid = spawn([&] {
      toParent.closeRead();
      // Even runs flush by hand every 7th step; odd runs use the automatic cadence (every 25
      // appends), which can flush in the middle of a step: then only the steps before it count.
      const FlushPolicy policy = automatic ? FlushPolicy{25, 0.0} : FlushPolicy{0, 0.0};
      RunWriter w = RunWriter::create(path, sampleHeader("killed"), {policy, false});
      toParent.send(0);
      for (int64_t s = 0;; ++s) {
        const int64_t before = w.flushCount();
        writeStep(w, s);
        if (automatic && w.flushCount() != before) toParent.send(s);
        if (!automatic && (s + 1) % 7 == 0) {
          w.flush();
          toParent.send(s + 1);
        }
      }
      return 0;
    });
    toParent.closeWrite();
    int64_t flushed = -1, message = 0;
    QVERIFY2(toParent.receive(flushed, 10000), "the writer did not start");
    std::this_thread::sleep_for(std::chrono::milliseconds(delay));
    ::kill(pid, SIGKILL);
    QCOMPARE(waitExit(pid), -SIGKILL);
    while (toParent.receive(message, 0)) flushed = message;

    const std::string context = "run " + std::to_string(run) + (automatic ? " (automatic flushes)" : "") +
                                ", killed after " + std::to_string(delay) + " ms, last flush at " +
                                std::to_string(flushed) + " steps";
    std::string problem;
    try {
      RunReader r = RunReader::open(path);
      const int64_t rows = r.scalarRows("loss");
      totalRows += rows;
      if (rows < flushed || r.tableRows("kl") < flushed || r.scalarRows("lr") < flushed)
        problem = "lost flushed rows: " + std::to_string(rows) + " loss rows";
      else if (r.snapshotCount() < (flushed + 9) / 10 || r.weightCount("fm.weight") < (flushed + 9) / 10)
        problem = "lost flushed snapshots or weights";
      else if (r.status() != RunStatus::Running || r.writerActive() || !r.interrupted())
        problem = "a killed run must read as running, interrupted, with no writer";
      else
        problem = checkRows(r);
    } catch (const std::exception& e) {
      problem = std::string("cannot read: ") + e.what();
    }
    QVERIFY2(problem.empty(), (context + ": " + problem).c_str());
  }
  std::printf("%d killed writers: every file opened with all flushed rows (%lld loss rows in all)\n", runs,
              static_cast<long long>(totalRows));
}

HH_TEST_SUITE(TestRunSwmr, "engine.runs.swmr", &TestRunSwmr::liveReadFromSecondProcess,
              &TestRunSwmr::killedWriterKeepsFlushedRows)

}  // namespace test_run_swmr

#if HH_HAVE_QTEST
#include "test_run_swmr.moc"
#endif
