// app.cli.rank_processes: data-parallel jobs through the CLI as a user runs them
// (`hedgehog distill ... --nproc N`, c10d/Gloo on loopback, one process per rank):
//   - 2 ranks train the same feature maps as 1 process on the same global batch: every adapter
//     tensor and every step's loss within 1e-5 (3 ranks on a batch of 4 too: uneven shares);
//   - finetuning (LoRA, LM task) the same, on the saved model's tensors;
//   - SIGUSR1 to one rank (or the launcher) pauses every rank at one step (each log says where),
//     for longer than the collectives' timeout, SIGUSR2 resumes them, SIGTERM while paused
//     cancels there;
//   - SIGTERM to the launcher cancels every rank at the same step: exit 130, run file cancelled,
//     no rank left running; a rank killed with SIGKILL fails the run (non-zero exit, one error
//     line naming the rank, rank 0's run file closed as failed);
//   - a run resumed on 2 ranks equals one uninterrupted run; ranks that see different
//     checkpoints refuse to start;
//   - bad worlds (batch or training rows fewer than the ranks, RANK out of range, --nproc under a launcher,
//     a MASTER_ADDR that does not resolve) are one-line errors;
//   - a NaN loss on every rank ends the run with rank 0's message, rank 1's log saying it failed with
//     every rank; the launcher leaves rank 0 to save after such a failure or a cancel, kills the others
//     2 s after rank 0 failed, 30 s after a rank > 0 failed on its own (rankKillDelay);
//   - ranks interrupted and then left by their launcher (killed) finish the cancel: rank 0 closes
//     its run file as cancelled (the parent-death signal is no second interrupt); nor is the
//     launcher's own parent-death signal after a cancel (countsAsForwarded).
#include <torch/types.h>

#include <signal.h>

#include <algorithm>

#include <cstdlib>
#include <functional>
#include <memory>
#include <regex>

#include "app/cli/child_logs.h"
#include "app/cli/child_signals.h"
#include "engine/io/safetensors.h"
#include "engine/models/tensor_file.h"
#include "engine/runs/run_reader.h"
#include "tests/engine/jobs/jobs_test_support.h"
#include "tests/support/child_process.h"

namespace test_rank_processes {

namespace {

namespace fs = std::filesystem;
namespace c = hh::test::crash;

const std::string kModel = std::string(HH_FIXTURES_DIR) + "/tiny-random-gpt2";

bool haveCli() { return std::string(HH_CLI_BINARY).size() > 0 && fs::exists(HH_CLI_BINARY); }

// max |a - b| over the tensors of two safetensors files (infinity when their names differ).
double maxDifference(const std::string& a, const std::string& b) {
  const auto fa = hh::io::SafetensorsFile::open(a), fb = hh::io::SafetensorsFile::open(b);
  if (fa.names() != fb.names()) return INFINITY;
  double worst = 0;
  for (const auto& name : fa.names())
    worst = std::max(worst, (hh::models::readTensor(fa, name).to(torch::kDouble) - hh::models::readTensor(fb, name).to(torch::kDouble)).abs().max().item<double>());
  return worst;
}

// max |a - b| over the steps of one scalar in two run files (infinity when the steps differ).
double maxScalarDifference(const std::string& a, const std::string& b, const std::string& name) {
  const auto ra = hh::runs::RunReader::open(a), rb = hh::runs::RunReader::open(b);
  const auto sa = ra.scalars(name), sb = rb.scalars(name);
  if (sa.steps != sb.steps || sa.steps.empty()) return INFINITY;
  double worst = 0;
  for (size_t i = 0; i < sa.values.size(); ++i) worst = std::max(worst, std::abs(sa.values[i] - sb.values[i]));
  return worst;
}

// The pids the launcher printed ("started N processes (ranks 0-K, pids A B ...)").
std::vector<pid_t> rankPids(const std::string& output) {
  std::smatch m;
  std::vector<pid_t> pids;
  if (!std::regex_search(output, m, std::regex("pids ([0-9 ]+)\\)"))) return pids;
  std::istringstream in(m[1].str());
  for (long p; in >> p;) pids.push_back(static_cast<pid_t>(p));
  return pids;
}

bool alive(pid_t pid) { return ::kill(pid, 0) == 0; }

// Running, and not a zombie: a rank whose launcher died is reaped by whoever adopts it, maybe never.
bool runningNotZombie(pid_t pid) {
  if (!alive(pid)) return false;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  std::getline(stat, text);
  const auto close = text.rfind(')');
  return close == std::string::npos || close + 2 >= text.size() || text[close + 2] != 'Z';
}

// Whether `signal` is still pending for `pid` (its handler has not run yet).
bool signalPending(pid_t pid, int signal) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  const unsigned long long bit = 1ull << (signal - 1);
  for (std::string line; std::getline(status, line);)
    if ((line.rfind("SigPnd:", 0) == 0 || line.rfind("ShdPnd:", 0) == 0) &&
        (std::stoull(line.substr(7), nullptr, 16) & bit))
      return true;
  return false;
}

// Waits until `runFile` holds at least one training step (or `seconds` pass).
bool waitForSteps(const std::string& runFile, double seconds) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < end) {
    try {
      if (fs::exists(runFile) && !hh::runs::RunReader::open(runFile).scalars("loss").steps.empty()) return true;
    } catch (const std::exception&) {
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

}  // namespace

class TestRankProcesses : public QObject {
  Q_OBJECT

 private:
  // distill (or finetune, LoRA on the LM task) of the tiny GPT-2 on the word corpus.
  static std::vector<std::string> jobArgs(const std::string& kind, const std::string& runDir, const std::string& corpus,
                                          int64_t steps, int64_t batch, int64_t evalEvery = 3) {
    std::vector<std::string> args{HH_CLI_BINARY, kind, kModel, "--run-dir", runDir, "--corpus", corpus,
                                  "--steps", std::to_string(steps), "--eval-every", std::to_string(evalEvery),
                                  "--batch-size", std::to_string(batch),
                                  "--seq-len", "32", "--max-train", "48"};
    if (kind == "finetune") args.insert(args.end(), {"--mode", "lora"});
    return args;
  }
  static std::vector<std::string> withProcesses(std::vector<std::string> args, int n) {
    args.insert(args.end(), {"--nproc", std::to_string(n)});
    return args;
  }
  // Runs `args` to completion (stdout+stderr in `log`); the exit status.
  static int run(const std::vector<std::string>& args, const std::string& log, double seconds = 300) {
    return c::waitFor(c::spawnLogged(args, log), seconds);
  }

  void compareWithOneProcess(const std::string& kind, int processes, int64_t batch) {
    if (!haveCli()) QSKIP("the hedgehog CLI is not built");
    hh::test::TempDir dir("ranks_" + kind + std::to_string(processes));
    const auto corpus = hh::test::writeWordCorpus(dir);
    const auto one = dir.file("one"), many = dir.file("many");
    QCOMPARE(run(jobArgs(kind, one, corpus, 6, batch), dir.file("one.log")), 0);
    const int status = run(withProcesses(jobArgs(kind, many, corpus, 6, batch), processes), dir.file("many.log"));
    QVERIFY2(status == 0, c::readAll(dir.file("many.log")).c_str());
    const auto log = c::readAll(dir.file("many.log"));
    QVERIFY2(log.find("started " + std::to_string(processes) + " processes") != std::string::npos, log.c_str());
    // The local ranks meet through a file in the run folder (nothing listens on a port), gone after.
    QVERIFY2(log.find("rendezvous file " + many + "/.rendezvous-") != std::string::npos, log.c_str());
    for (const auto& entry : fs::directory_iterator(many))
      QVERIFY2(entry.path().filename().string().rfind(".rendezvous-", 0) != 0, entry.path().c_str());
    for (int r = 1; r < processes; ++r) {
      const auto rankLog = c::readAll(many + "/rank-" + std::to_string(r) + ".log");
      QVERIFY2(rankLog.find("rank " + std::to_string(r) + ": completed") != std::string::npos, rankLog.c_str());
    }
    const std::string result = kind == "distill" ? "/adapters.safetensors" : "/model/model.safetensors";
    const double weights = maxDifference(one + result, many + result);
    const double loss = maxScalarDifference(one + "/run.h5", many + "/run.h5", "loss");
    const double validation = maxScalarDifference(one + "/run.h5", many + "/run.h5", "val_loss");
    qInfo("%s, %d processes vs 1, global batch %lld: max |weight diff| %.3g, max |loss diff| %.3g, max |val_loss diff| %.3g",
          kind.c_str(), processes, (long long)batch, weights, loss, validation);
    QVERIFY2(weights <= 1e-5, std::to_string(weights).c_str());
    QVERIFY2(loss <= 1e-5, std::to_string(loss).c_str());
    QVERIFY2(validation <= 1e-5, std::to_string(validation).c_str());
    const auto reader = hh::runs::RunReader::open(many + "/run.h5");
    QVERIFY(reader.header().device.find(std::to_string(processes) + " processes (gloo)") != std::string::npos);
    QVERIFY(reader.status() == hh::runs::RunStatus::Completed);
  }

  // Starts a long distill on 2 ranks and waits until it trains; the launcher's pid, the ranks'.
  static pid_t startLongRun(const hh::test::TempDir& dir, std::vector<pid_t>& ranks) {
    const auto corpus = hh::test::writeWordCorpus(dir);
    const auto args = withProcesses(jobArgs("distill", dir.file("run"), corpus, 100000, 4, 1000000), 2);
    const pid_t launcher = c::spawnLogged(args, dir.file("log"));
    if (launcher > 0 && waitForSteps(dir.file("run") + "/run.h5", 120)) ranks = rankPids(c::readAll(dir.file("log")));
    return launcher;
  }

 private Q_SLOTS:
  void twoProcessesEqualOne() { compareWithOneProcess("distill", 2, 4); }
  void unevenSharesEqualOne() { compareWithOneProcess("distill", 3, 4); }
  void finetuneTwoProcessesEqualOne() { compareWithOneProcess("finetune", 2, 4); }

  void terminateCancelsEveryRank() {
    if (!haveCli()) QSKIP("the hedgehog CLI is not built");
    hh::test::TempDir dir("ranks_cancel");
    std::vector<pid_t> ranks;
    const pid_t launcher = startLongRun(dir, ranks);
    QVERIFY(launcher > 0);
    QVERIFY2(ranks.size() == 2, c::readAll(dir.file("log")).c_str());
    const auto t0 = std::chrono::steady_clock::now();
    ::kill(launcher, SIGTERM);
    const int status = c::waitFor(launcher, 120);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    qInfo("SIGTERM to the launcher: exit %d after %.2f s", status, seconds);
    QVERIFY2(status == 130, c::readAll(dir.file("log")).c_str());
    for (pid_t p : ranks) QVERIFY(!alive(p));
    const auto reader = hh::runs::RunReader::open(dir.file("run") + "/run.h5");
    QVERIFY(reader.status() == hh::runs::RunStatus::Cancelled);
    QVERIFY(c::readAll(dir.file("run") + "/rank-1.log").find("cancelled") != std::string::npos);
  }

  // SIGUSR1 to one rank pauses every rank at the same step and SIGUSR2 resumes them (their logs
  // say where and how long they waited), also after a pause longer than the collectives' timeout;
  // SIGUSR1 to the launcher pauses them all, and a SIGTERM while paused cancels at that step.
  void pauseHoldsEveryRank() {
    if (!haveCli()) QSKIP("the hedgehog CLI is not built");
    hh::test::TempDir dir("ranks_pause");
    std::vector<pid_t> ranks;
    // Collectives time out after 6 s here, and the pause lasts 8 s: the waiting ranks must keep
    // exchanging, not sit in a collective.
    setenv("HH_DIST_TIMEOUT_S", "6", 1);
    const pid_t launcher = startLongRun(dir, ranks);
    unsetenv("HH_DIST_TIMEOUT_S");
    QVERIFY(launcher > 0);
    // On a failed check the launcher is killed, and its ranks cancel (their parent-death signal).
    const std::unique_ptr<void, std::function<void(void*)>> stop(reinterpret_cast<void*>(1), [launcher](void*) {
      if (::kill(launcher, 0) == 0) ::kill(launcher, SIGKILL), c::waitFor(launcher, 30);
    });
    QVERIFY2(ranks.size() == 2, c::readAll(dir.file("log")).c_str());
    const std::regex pausedAt("paused at step ([0-9]+)");
    const auto rank1Log = dir.file("run") + "/rank-1.log";
    // The last group of `line` once `file` shows it (within 60 s), else "".
    auto waitForLine = [](const std::string& file, const std::regex& line) {
      for (int i = 0; i < 600; ++i, std::this_thread::sleep_for(std::chrono::milliseconds(100))) {
        const std::string text = c::readAll(file);
        std::smatch m;
        if (std::regex_search(text, m, line)) return m[m.size() - 1].str();
      }
      return std::string();
    };
    // Rank 1 alone is asked: rank 0 waits at the same step too (the gate's agreement).
    ::kill(ranks[1], SIGUSR1);
    const std::string step = waitForLine(dir.file("log"), pausedAt);
    QVERIFY2(!step.empty(), c::readAll(dir.file("log")).c_str());
    QCOMPARE(waitForLine(rank1Log, pausedAt), step);  // every rank waits at that step
    std::this_thread::sleep_for(std::chrono::milliseconds(8000));
    ::kill(ranks[1], SIGUSR2);
    const std::regex resumed("resumed at step " + step + " after ([0-9.]+) s");
    const std::string waited = waitForLine(dir.file("log"), resumed);
    QVERIFY2(!waited.empty() && std::stod(waited) >= 7.5, c::readAll(dir.file("log")).c_str());
    QVERIFY(!waitForLine(rank1Log, resumed).empty());
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    ::kill(launcher, SIGUSR1);  // pause again, through the launcher, then cancel while paused
    const std::string second = waitForLine(dir.file("log"), std::regex("resumed[\\s\\S]*paused at step ([0-9]+)"));
    QVERIFY2(!second.empty(), c::readAll(dir.file("log")).c_str());
    ::kill(launcher, SIGTERM);
    QCOMPARE(c::waitFor(launcher, 120), 130);
    for (pid_t p : ranks) QVERIFY(!alive(p));
    const auto log = c::readAll(dir.file("log"));
    QVERIFY2(log.find("cancelled while paused at step " + second) != std::string::npos, log.c_str());
    QVERIFY2(log.find("kill -USR2 " + std::to_string(launcher) + " resumes") != std::string::npos, log.c_str());
    const auto reader = hh::runs::RunReader::open(dir.file("run") + "/run.h5");
    QVERIFY(reader.status() == hh::runs::RunStatus::Cancelled);
  }

  void killedRankFailsTheRun() {
    if (!haveCli()) QSKIP("the hedgehog CLI is not built");
    hh::test::TempDir dir("ranks_kill");
    std::vector<pid_t> ranks;
    const pid_t launcher = startLongRun(dir, ranks);
    QVERIFY(launcher > 0);
    QVERIFY2(ranks.size() == 2, c::readAll(dir.file("log")).c_str());
    ::kill(ranks[1], SIGKILL);
    const int status = c::waitFor(launcher, 120);
    const auto log = c::readAll(dir.file("log"));
    qInfo("rank 1 killed: launcher exit %d", status);
    QVERIFY2(status != 0 && status != -1, log.c_str());
    QVERIFY2(log.find("hedgehog: error: rank 1 was killed by signal 9") != std::string::npos, log.c_str());
    QVERIFY(!alive(ranks[0]));
    const auto reader = hh::runs::RunReader::open(dir.file("run") + "/run.h5");
    QVERIFY2(reader.status() == hh::runs::RunStatus::Failed, log.c_str());
  }

  // Rank 0 killed from outside (kill -9, as the OOM killer does): the launcher names it, and rank
  // 1's log keeps the reason it stopped after "failed on rank 1".
  void killedRankZeroIsNamed() {
    if (!haveCli()) QSKIP("the hedgehog CLI is not built");
    hh::test::TempDir dir("ranks_kill_zero");
    std::vector<pid_t> ranks;
    const pid_t launcher = startLongRun(dir, ranks);
    QVERIFY(launcher > 0);
    QVERIFY2(ranks.size() == 2, c::readAll(dir.file("log")).c_str());
    ::kill(ranks[0], SIGKILL);
    const int status = c::waitFor(launcher, 120);
    const auto log = c::readAll(dir.file("log"));
    QVERIFY2(status == 128 + SIGKILL, log.c_str());
    QVERIFY2(log.find("hedgehog: error: rank 0 was killed by signal 9") != std::string::npos, log.c_str());
    QVERIFY(!alive(ranks[1]));
    const auto rankLog = c::readAll(dir.file("run") + "/rank-1.log");
    QVERIFY2(rankLog.find("failed on rank 1: ") != std::string::npos, rankLog.c_str());
  }

  // A NaN loss at the same step on both ranks (the loss is the global batch's): the launcher's one
  // error line is rank 0's own message, not "rank 1 exited with status 1"; rank 1's log says the
  // failure was agreed, which is what spares rank 0 the kill clock while it saves.
  void nanOnEveryRankReportsRankZero() {
    if (!haveCli()) QSKIP("the hedgehog CLI is not built");
    hh::test::TempDir dir("ranks_nan");
    const auto corpus = hh::test::writeWordCorpus(dir);
    const std::string config = dir.file("nan.json");
    std::ofstream(config) << R"({"debug_nan_at_step": 2})";
    auto args = withProcesses(jobArgs("distill", dir.file("run"), corpus, 6, 4), 2);
    args.insert(args.end(), {"--config", config});
    const int status = run(args, dir.file("log"), 120);
    const auto log = c::readAll(dir.file("log"));
    QVERIFY2(status == 1, log.c_str());
    QVERIFY2(log.find("hedgehog: error: the loss became NaN at step 3") != std::string::npos, log.c_str());
    QVERIFY2(log.find("rank 1 exited") == std::string::npos, log.c_str());
    const auto rankLog = c::readAll(dir.file("run") + "/rank-1.log");
    QVERIFY2(rankLog.find("failed on rank 1, as on every rank: the loss became NaN at step 3") != std::string::npos,
             rankLog.c_str());
    QVERIFY(hh::runs::RunReader::open(dir.file("run") + "/run.h5").status() == hh::runs::RunStatus::Failed);
  }

  // The launcher's count of signals to pass on (child_signals.h): the workbench dying after a
  // cancel sends the launcher its parent-death SIGTERM, which must not become the second
  // interrupt that ends the ranks at once (rank 0 may be saving).
  void parentDeathAfterACancelIsNoForceStop() {
    namespace cli = hh::cli;
    const bool gone = true, seen = true;
    QVERIFY(cli::countsAsForwarded(SIGTERM, !gone, !seen, 0));  // the cancel
    QVERIFY(cli::countsAsForwarded(SIGTERM, !gone, !seen, 1));  // the force-stop
    QVERIFY(cli::countsAsForwarded(SIGINT, gone, !seen, 1));    // a Ctrl-C still counts
    QVERIFY(cli::countsAsForwarded(SIGTERM, gone, !seen, 0));   // died without a cancel: cancel
    QVERIFY(!cli::countsAsForwarded(SIGTERM, gone, !seen, 1));  // died after one: its death signal
    // A launcher whose shell had exited long before (nohup): a second kill still force-stops.
    QVERIFY(cli::countsAsForwarded(SIGTERM, gone, seen, 1));
  }

  // The launcher's rule for the ranks still running once one has ended (child_logs.h).
  void killDelayFollowsHowARankEnded() {
    namespace cli = hh::cli;
    using std::chrono::seconds;
    const int failed = 1 << 8, cancelled = 130 << 8, completed = 0;  // wait statuses
    const std::string agreed = "failed on rank 1, as on every rank: the loss became NaN at step 3; kept ...";
    QVERIFY(!cli::rankKillDelay(1, failed, agreed));                // rank 0 is saving
    QVERIFY(!cli::rankKillDelay(1, failed, "distill: " + agreed));  // convert's stage prefix
    QVERIFY(!cli::rankKillDelay(1, cancelled, "cancelled on rank 1: cancelled at step 4"));
    QVERIFY(!cli::rankKillDelay(1, completed, ""));
    QVERIFY(!cli::rankKillDelay(0, completed, ""));
    const std::string lost = "failed on rank 1: rank 1: all-reduce failed (another rank stopped or timed out): ...";
    QCOMPARE(cli::rankKillDelay(1, failed, lost), std::optional<seconds>(seconds(30)));
    QCOMPARE(cli::rankKillDelay(1, SIGKILL, ""), std::optional<seconds>(seconds(30)));
    QCOMPARE(cli::rankKillDelay(2, failed, agreed), std::optional<seconds>(seconds(30)));  // another rank's words
    // Rank 0 ended with an error: the others cannot go on (it hosts the rendezvous).
    QCOMPARE(cli::rankKillDelay(0, failed, ""), std::optional<seconds>(seconds(2)));
    QCOMPARE(cli::rankKillDelay(0, cancelled, ""), std::optional<seconds>(seconds(2)));
    QCOMPARE(cli::rankKillDelay(0, SIGKILL, ""), std::optional<seconds>(seconds(2)));
    QCOMPARE(cli::describeStatus(SIGKILL), std::string("was killed by signal 9"));
    QCOMPARE(cli::describeStatus(failed), std::string("exited with status 1"));
  }

  // The ranks got their interrupt (as the launcher passes a cancel on), then the launcher was
  // killed (the workbench's kill after a cancel did that): the parent-death signal must not count
  // as a second interrupt, which ended rank 0 at once, its run file left "running".
  void interruptedRanksOutliveTheirLauncher() {
    if (!haveCli()) QSKIP("the hedgehog CLI is not built");
    hh::test::TempDir dir("ranks_orphaned");
    std::vector<pid_t> ranks;
    const pid_t launcher = startLongRun(dir, ranks);
    QVERIFY(launcher > 0);
    QVERIFY2(ranks.size() == 2, c::readAll(dir.file("log")).c_str());
    for (pid_t p : ranks) ::kill(p, SIGINT);
    // Each handler has run before the launcher dies: two separate signals, not one merged pending.
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while ((signalPending(ranks[0], SIGINT) || signalPending(ranks[1], SIGINT)) &&
           std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    ::kill(launcher, SIGKILL);
    QCOMPARE(c::waitFor(launcher, 30), 128 + SIGKILL);
    for (pid_t p : ranks) {
      const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(60);
      while (runningNotZombie(p) && std::chrono::steady_clock::now() < end)
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      QVERIFY(!runningNotZombie(p));
    }
    const auto reader = hh::runs::RunReader::open(dir.file("run") + "/run.h5");
    QVERIFY2(reader.status() == hh::runs::RunStatus::Cancelled, hh::runs::statusName(reader.status()));
    QVERIFY2(c::readAll(dir.file("run") + "/rank-1.log").find("cancelled") != std::string::npos,
             c::readAll(dir.file("run") + "/rank-1.log").c_str());
  }

  // 3 steps on 2 ranks, then --resume to 6 on 2 ranks: the uninterrupted single-process run's
  // feature maps within 1e-5. Ranks that do not see the same checkpoint refuse to start.
  void resumeOnTwoProcessesEqualsOneRun() {
    if (!haveCli()) QSKIP("the hedgehog CLI is not built");
    hh::test::TempDir dir("ranks_resume");
    const auto corpus = hh::test::writeWordCorpus(dir);
    const auto one = dir.file("one"), many = dir.file("many");
    QCOMPARE(run(jobArgs("distill", one, corpus, 6, 4), dir.file("one.log")), 0);
    QCOMPARE(run(withProcesses(jobArgs("distill", many, corpus, 3, 4), 2), dir.file("first.log")), 0);
    auto resume = withProcesses(jobArgs("distill", many, corpus, 6, 4), 2);
    resume.push_back("--resume");
    const int status = run(resume, dir.file("resume.log"));
    QVERIFY2(status == 0, c::readAll(dir.file("resume.log")).c_str());
    const double weights = maxDifference(one + "/adapters.safetensors", many + "/adapters.safetensors");
    qInfo("3 + 3 resumed steps on 2 processes vs 6 on 1: max |weight diff| %.3g", weights);
    QVERIFY2(weights <= 1e-5, std::to_string(weights).c_str());

    // An external launch whose rank 1 has a run folder without that checkpoint.
    const auto lonely = dir.file("lonely");
    auto rank1 = jobArgs("distill", lonely, corpus, 9, 4);
    rank1.push_back("--resume");
    auto rank0 = jobArgs("distill", many, corpus, 9, 4);
    rank0.push_back("--resume");
    ::setenv("WORLD_SIZE", "2", 1);
    ::setenv("MASTER_ADDR", "127.0.0.1", 1);
    ::setenv("MASTER_PORT", std::to_string(29000 + ::getpid() % 5000).c_str(), 1);
    ::setenv("RANK", "1", 1);
    const pid_t other = c::spawnLogged(rank1, dir.file("rank1.log"));
    ::setenv("RANK", "0", 1);
    const int status0 = run(rank0, dir.file("rank0.log"), 120);
    const int status1 = c::waitFor(other, 120);
    for (const char* name : {"WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "RANK"}) ::unsetenv(name);
    const auto said = c::readAll(dir.file("rank0.log"));
    QVERIFY2(status0 == 1 && status1 == 1, (said + c::readAll(dir.file("rank1.log"))).c_str());
    QVERIFY2(said.find("the ranks disagree on the step to resume from (0 to 6; this rank has 6): run_dir must be on storage") != std::string::npos, said.c_str());
  }

  void badWorldsAreOneLineErrors() {
    if (!haveCli()) QSKIP("the hedgehog CLI is not built");
    hh::test::TempDir dir("ranks_bad");
    const auto corpus = hh::test::writeWordCorpus(dir);
    auto expectError = [&](const std::vector<std::string>& args, const std::string& needle) {
      const auto log = dir.file("bad.log");
      fs::remove(log);
      const int status = run(args, log, 120);
      const auto text = c::readAll(log);
      QVERIFY2(status == 1, text.c_str());
      QVERIFY2(text.find("hedgehog: error: ") != std::string::npos && text.find(needle) != std::string::npos, text.c_str());
    };
    expectError(withProcesses(jobArgs("distill", dir.file("a"), corpus, 2, 2), 3), "batch_size 2 is smaller than the 3 processes");
    // Fewer training rows than processes: a rank had no row, and every rank a NaN loss.
    auto oneRow = withProcesses(jobArgs("distill", dir.file("d"), corpus, 2, 4), 2);
    *std::find(oneRow.begin(), oneRow.end(), std::string("48")) = "1";
    expectError(oneRow, "1 training sequence for 2 processes");
    ::setenv("WORLD_SIZE", "2", 1);
    ::setenv("RANK", "2", 1);
    expectError(jobArgs("distill", dir.file("b"), corpus, 2, 4), "RANK=\"2\"");
    ::setenv("RANK", "0", 1);
    expectError(withProcesses(jobArgs("distill", dir.file("c"), corpus, 2, 4), 2), "WORLD_SIZE set");
    ::unsetenv("WORLD_SIZE");
    ::unsetenv("RANK");
    // Checked before any rank starts: ranks > 0 would retry it until HH_DIST_TIMEOUT_S.
    ::setenv("MASTER_ADDR", "no-such-host.invalid", 1);
    expectError(withProcesses(jobArgs("distill", dir.file("e"), corpus, 2, 4), 2),
                "MASTER_ADDR=\"no-such-host.invalid\" does not resolve");
    ::unsetenv("MASTER_ADDR");
    QVERIFY(!fs::exists(dir.file("e") + "/rank-1.log"));
  }
};

HH_TEST_SUITE(TestRankProcesses, "app.cli.rank_processes", &TestRankProcesses::twoProcessesEqualOne,
              &TestRankProcesses::unevenSharesEqualOne, &TestRankProcesses::finetuneTwoProcessesEqualOne,
              &TestRankProcesses::terminateCancelsEveryRank, &TestRankProcesses::pauseHoldsEveryRank,
              &TestRankProcesses::killedRankFailsTheRun, &TestRankProcesses::killedRankZeroIsNamed,
              &TestRankProcesses::nanOnEveryRankReportsRankZero, &TestRankProcesses::killDelayFollowsHowARankEnded,
              &TestRankProcesses::parentDeathAfterACancelIsNoForceStop,
              &TestRankProcesses::interruptedRanksOutliveTheirLauncher,
              &TestRankProcesses::resumeOnTwoProcessesEqualsOneRun, &TestRankProcesses::badWorldsAreOneLineErrors)

}  // namespace test_rank_processes

#if HH_HAVE_QTEST
#include "test_rank_processes.moc"
#endif
