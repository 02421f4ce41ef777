// engine.jobs.crash_safety: kill -9 of the real CLI (HH_CLI_BINARY) at seeded random points.
//  - distillSurvivesKills / finetuneSurvivesKills: on the tiny GPT-2 fixture (12 steps, an evaluation
//    and checkpoint every 3), 4 cycles of: start, SIGKILL (after a random delay over the whole run,
//    just after an evaluation line still ahead = around the checkpoint write, or in the tail after
//    the last one = around the final save), check the folder, `--resume` and kill again, check, then
//    `--resume` to the end. After every kill: each run file opens, its loss steps are contiguous,
//    once each and finite, every step up to the checkpoint's step is in a run file; the checkpoint,
//    its JSON copy, the adapters file and the model folder are complete or absent. The final resume
//    exits 0, its run file is completed and holds exactly the steps after the checkpoint it started
//    from (or, killed after its end was recorded, it says there is nothing to resume), the checkpoint reaches the steps
//    asked for, and the result equals an uninterrupted run's.
//  - killedExportKeepsAModel: `hedgehog export` killed at random points: a fresh output folder is
//    absent or loads; re-exports over a complete one always leave one that loads.
//  - interruptedSaveRecovers: the state a kill between saveModel's two renames leaves (no folder,
//    a complete `.old`, a `.partial`) loads, and the next save succeeds (regression).
//  - killedRunFileCreation: a child creating run files over and over is killed at random (2 to
//    400 ms): the run file is absent or opens, never a truncated HDF5 file (regression: it used to
//    be built in place, so a kill during the creation left one).
// Seed: HH_CRASH_SEED (default 20261122); every kill's plan is printed with qInfo. HH_CLI: the CLI
// to run instead of the build's (scripts/kill_soak.sh runs a private copy).
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <random>

#include "engine/io/safetensors.h"
#include "engine/models/model_io.h"
#include "engine/models/tensor_file.h"
#include "engine/runs/run_reader.h"
#include "engine/runs/run_writer.h"
#include "tests/engine/jobs/crash_test_support.h"
#include "tests/engine/jobs/jobs_test_support.h"
#include "tests/engine/runs/run_test_support.h"
#include "tests/support/hh_test.h"

namespace test_crash_safety {

namespace {

namespace fs = std::filesystem;
namespace c = hh::test::crash;
const std::string kModel = std::string(HH_FIXTURES_DIR) + "/tiny-random-gpt2";
constexpr int64_t kSteps = 12, kEvalEvery = 3;

uint64_t seed() {
  const char* s = std::getenv("HH_CRASH_SEED");
  return s ? std::strtoull(s, nullptr, 10) : 20261122ull;
}

// HH_CLI (scripts/kill_soak.sh sets it to a private copy) or the build's CLI: a soak must not
// pick up a binary that a concurrent build relinks under it.
std::string cli() {
  const char* s = std::getenv("HH_CLI");
  return s && *s ? s : HH_CLI_BINARY;
}
bool haveCli() {
  return fs::exists(cli());
}

// HH_CRASH_CYCLES / HH_CRASH_EXPORT_KILLS scale the suite up for scripts/kill_soak.sh.
int envCount(const char* name, int fallback) {
  const char* s = std::getenv(name);
  return s ? std::max(1, std::atoi(s)) : fallback;
}

// What scripts/kill_soak.sh totals: one "TALLY" line per slot.
struct Tally {
  int runs = 0, kills = 0, readable = 0, resumed = 0, failures = 0;
  std::string first;  // the first failure, for the test's message
  void fail(const std::string& what) {
    ++failures;
    qInfo("FAILURE: %s", what.c_str());
    if (first.empty()) first = what;
  }
  void print(const std::string& job) const {
    qInfo("TALLY %s runs=%d kills=%d readable=%d resumed=%d failures=%d", job.c_str(), runs, kills, readable, resumed,
          failures);
  }
};

// max |a - b| over every tensor two safetensors files share (and that they hold the same names).
double maxDifference(const std::string& a, const std::string& b) {
  const auto fa = hh::io::SafetensorsFile::open(a), fb = hh::io::SafetensorsFile::open(b);
  if (fa.names() != fb.names()) return INFINITY;
  double worst = 0;
  for (const auto& name : fa.names())
    worst = std::max(worst,
                     (hh::models::readTensor(fa, name) - hh::models::readTensor(fb, name)).abs().max().item<double>());
  return worst;
}

// The line a job prints at an evaluation step, just before it flushes the run file and writes
// the checkpoint (at the last step, the final save follows).
std::string evaluationLine(int64_t step) {
  return "step " + std::to_string(step) + ": loss";
}

// The fastest uninterrupted run: its length and the time from its last evaluation line to its exit.
struct BaseTimeline {
  int totalMs = std::numeric_limits<int>::max(), tailMs = std::numeric_limits<int>::max();
};

// Where to kill an attempt that starts from the checkpoint at step `from` (0: a fresh run).
// mode 0: anywhere in a run's length, start-up included; mode 1: around the checkpoint write
// after one of the evaluations still ahead; mode 2: anywhere in the tail after the last
// evaluation (its checkpoint, the final save). A resumed run prints only the steps after `from`,
// and has only its start-up left once `from` is the last step: then it is killed anywhere.
c::KillPlan planKill(std::mt19937_64& rng, int mode, int64_t from, const BaseTimeline& base) {
  c::KillPlan plan;
  const int64_t evaluationsLeft = (kSteps - from) / kEvalEvery;
  if (mode == 0 || evaluationsLeft <= 0) {
    plan.delayMs = int(rng() % uint64_t(base.totalMs + 1));
  } else if (mode == 1) {
    plan.line = evaluationLine(from + kEvalEvery * int64_t(1 + rng() % uint64_t(evaluationsLeft)));
    plan.jitterMs = int(rng() % 12);
  } else {
    plan.line = evaluationLine(kSteps);
    plan.jitterMs = int(rng() % uint64_t(base.tailMs + 1));
  }
  return plan;
}

class TestCrashSafety : public QObject {
  Q_OBJECT

 private:
  // The command of one job in `runDir` (distill: plain; finetune: LoRA LM on the same corpus).
  static std::vector<std::string> jobArgs(const std::string& kind, const std::string& runDir, const std::string& corpus,
                                          const std::string& config) {
    std::vector<std::string> args{cli(),
                                  kind,
                                  kModel,
                                  "--run-dir",
                                  runDir,
                                  "--corpus",
                                  corpus,
                                  "--config",
                                  config,
                                  "--steps",
                                  std::to_string(kSteps),
                                  "--eval-every",
                                  std::to_string(kEvalEvery),
                                  "--batch-size",
                                  "4",
                                  "--seq-len",
                                  "32",
                                  "--max-train",
                                  "48"};
    if (kind == "finetune") args.insert(args.end(), {"--mode", "lora"});
    return args;
  }
  static std::string resultFile(const std::string& kind, const std::string& runDir) {
    return kind == "distill" ? runDir + "/adapters.safetensors" : runDir + "/model/model.safetensors";
  }

  void killCycles(const std::string& kind, int cycles) {
    if (!haveCli()) QSKIP("the hedgehog CLI is not built");
    hh::test::TempDir dir("crash_" + kind);
    const auto corpus = hh::test::writeWordCorpus(dir);
    const auto config = dir.file("config.json");
    std::ofstream(config) << nlohmann::json{{"patience", 0}, {"eval_batches", 2}}.dump();

    // The uninterrupted run: its timeline places the kills, its result is what resumes must give.
    // Run twice and timed by the faster: the first pays for cold caches, and delays drawn from it
    // overshot the later runs (a run of about 0.6 s finished before most of its kills).
    const auto baseDir = dir.file("base");
    BaseTimeline base;
    for (const auto& run : {baseDir, dir.file("base_warm")}) {
      const auto timing = c::runTimed(jobArgs(kind, run, corpus, config), run + ".log", evaluationLine(kSteps), 300);
      QCOMPARE(timing.exitCode, 0);
      QVERIFY2(timing.lineMs >= 0, ("no \"" + evaluationLine(kSteps) + "\" in " + run + ".log").c_str());
      base.totalMs = std::min(base.totalMs, timing.totalMs);
      base.tailMs = std::min(base.tailMs, timing.totalMs - timing.lineMs);
    }
    std::mt19937_64 rng(seed() + std::hash<std::string>()(kind));
    Tally tally;
    tally.runs = 2;
    for (int cycle = 0; cycle < cycles; ++cycle) {
      const auto runDir = dir.file("run" + std::to_string(cycle));
      const auto log = runDir + ".log";
      const std::string model = kind == "finetune" ? runDir + "/model" : "";
      const std::string adapters = kind == "distill" ? runDir + "/adapters.safetensors" : "";
      int64_t from = 0;  // the step of the checkpoint the next run starts from
      for (int attempt = 0; attempt < 2; ++attempt) {
        auto args = jobArgs(kind, runDir, corpus, config);
        if (attempt > 0) args.push_back("--resume");
        const auto plan = planKill(rng, (cycle * 2 + attempt) % 3, from, base);
        const bool killed = c::runAndKill(args, log, plan);
        ++tally.runs;
        tally.kills += killed;
        const std::string where = plan.line.empty() ? "delay" : "after \"" + plan.line + "\" +";
        qInfo("%s cycle %d attempt %d (from step %lld): %s %d ms -> %s", kind.c_str(), cycle, attempt, (long long)from,
              where.c_str(), plan.line.empty() ? plan.delayMs : plan.jitterMs, killed ? "killed" : "finished first");
        const auto state = c::inspectRunFolder(runDir, model, adapters);
        if (!state.problem.empty())
          tally.fail(runDir + " after attempt " + std::to_string(attempt) + ": " + state.problem);
        else
          tally.readable += int(state.runFiles.size()) + (state.checkpointStep >= 0);
        from = std::max<int64_t>(state.checkpointStep, 0);
      }
      auto args = jobArgs(kind, runDir, corpus, config);
      args.push_back("--resume");
      ++tally.runs;
      const auto finalLog = runDir + "-final.log";
      const int rc = c::waitFor(c::spawnLogged(args, finalLog), 300);
      if (rc != 0) {
        tally.fail(runDir + ": the final --resume exited with " + std::to_string(rc) + ":\n" + c::readAll(log) +
                   c::readAll(finalLog));
        continue;
      }
      try {
        // The continuation holds exactly the steps after the checkpoint it started from, once each;
        // a run whose end was recorded before the kill has nothing to resume (its file is reported).
        const auto output = c::readAll(finalLog);
        const bool ended = output.find("nothing to resume") != std::string::npos;
        auto reader = hh::runs::RunReader::open(c::lastRunFile(output));
        const auto steps = reader.scalars("loss").steps;
        std::string problem;
        if (reader.status() != hh::runs::RunStatus::Completed) problem = "the final run file is not completed";
        if (ended && from != kSteps) problem = "nothing to resume from step " + std::to_string(from);
        if (!ended && int64_t(steps.size()) != kSteps - from)
          problem = "the final run file holds " + std::to_string(steps.size()) + " steps, expected " +
                    std::to_string(kSteps - from);
        for (size_t i = 0; problem.empty() && !ended && i < steps.size(); ++i)
          if (steps[i] != from + 1 + int64_t(i))
            problem = "the final run file's steps are not " + std::to_string(from + 1) + "..";
        const auto after = c::inspectRunFolder(runDir, model, adapters);
        if (problem.empty()) problem = after.problem;
        if (problem.empty() && after.checkpointStep != kSteps)
          problem = "the last checkpoint is at step " + std::to_string(after.checkpointStep);
        const double diff = maxDifference(resultFile(kind, runDir), resultFile(kind, baseDir));
        if (problem.empty() && !(diff <= 1e-5))
          problem = "the result differs from the uninterrupted run by " + std::to_string(diff);
        if (!problem.empty())
          tally.fail(runDir + " after the final resume (from step " + std::to_string(from) + "): " + problem);
        else
          ++tally.resumed;
      } catch (const std::exception& e) {
        tally.fail(runDir + " after the final resume: " + e.what());
      }
    }
    tally.print(kind);
    QVERIFY2(tally.failures == 0, tally.first.c_str());
    QVERIFY(tally.kills >= cycles);  // the plans reach the process, not only its exit
  }

 private Q_SLOTS:
  void initTestCase() { setenv("HH_NUM_THREADS", "1", 0); }

  void distillSurvivesKills() { killCycles("distill", envCount("HH_CRASH_CYCLES", 4)); }
  void finetuneSurvivesKills() { killCycles("finetune", envCount("HH_CRASH_CYCLES", 4)); }

  void killedExportKeepsAModel() {
    if (!haveCli()) QSKIP("the hedgehog CLI is not built");
    hh::test::TempDir dir("crash_export");
    const auto out = dir.file("exported");
    const std::vector<std::string> args{cli(), "export", kModel, "--output", out};
    std::mt19937_64 rng(seed() + 7);
    const int rounds = envCount("HH_CRASH_EXPORT_KILLS", 8);
    Tally tally;
    const auto t0 = std::chrono::steady_clock::now();
    QCOMPARE(c::waitFor(c::spawnLogged(args, dir.file("first.log")), 120), 0);
    const int exportMs = int(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    auto loads = [&](const std::string& when) {
      try {
        hh::models::loadModel(out);  // restores `.old` when a kill fell between the two renames
        ++tally.readable;
      } catch (const std::exception& e) {
        tally.fail(when + ": " + e.what());
      }
    };
    // A fresh export killed: nothing under the name, or a complete model.
    for (int i = 0; i < std::max(2, rounds / 2); ++i) {
      fs::remove_all(out);
      const int delay = int(rng() % uint64_t(exportMs + 1));
      ++tally.runs;
      tally.kills += c::runAndKill(args, dir.file("fresh.log"), {delay, "", 0});
      if (fs::exists(out) || fs::exists(out + ".old"))
        loads("fresh export killed after " + std::to_string(delay) + " ms");
    }
    // Re-exports over a complete export: a model that loads is always there.
    fs::remove_all(out);
    QCOMPARE(c::waitFor(c::spawnLogged(args, dir.file("complete.log")), 120), 0);
    for (int i = 0; i < rounds; ++i) {
      const int delay = int(exportMs * 0.3 + double(rng() % uint64_t(exportMs + 1)));  // the save is the second half
      ++tally.runs;
      tally.kills += c::runAndKill(args, dir.file("again.log"), {delay, "", 0});
      loads("re-export killed after " + std::to_string(delay) + " ms (output: " + c::readAll(dir.file("again.log")) +
            ")");
      if (!fs::exists(fs::path(out) / "config.json"))
        tally.fail("re-export killed after " + std::to_string(delay) + " ms left no model");
    }
    qInfo("export takes %d ms", exportMs);
    tally.print("export");
    QVERIFY2(tally.failures == 0, tally.first.c_str());
  }

  void interruptedSaveRecovers() {
    hh::test::TempDir dir("crash_save");
    const auto out = dir.file("model");
    auto model = hh::models::loadModel(kModel);
    hh::models::saveModel(*model, out, kModel);
    // What a kill between "rename out -> out.old" and "rename out.partial -> out" leaves behind.
    fs::rename(out, out + ".old");
    fs::create_directories(out + ".partial");
    std::ofstream(out + ".partial/config.json") << "{";
    QVERIFY(!fs::exists(out));
    auto loaded = hh::models::loadModel(out);  // restores the previous complete folder
    QVERIFY(fs::exists(fs::path(out) / "model.safetensors"));
    QVERIFY(!fs::exists(out + ".old"));
    QCOMPARE(loaded->parameterCount(), model->parameterCount());
    // The next save replaces it cleanly (and the stale staging folder).
    fs::rename(out, out + ".old");
    hh::models::saveModel(*model, out, kModel);
    QVERIFY(fs::exists(fs::path(out) / "model.safetensors"));
    QVERIFY(!fs::exists(out + ".old"));
    QVERIFY(!fs::exists(out + ".partial"));
    hh::models::loadModel(out);
  }

  void killedRunFileCreation() {
    hh::test::TempDir dir("crash_create");
    const auto path = dir.file("run.h5");
    std::mt19937_64 rng(seed() + 11);
    int opened = 0, absent = 0;
    for (int i = 0; i < 12; ++i) {
      std::fflush(nullptr);
      const pid_t pid = ::fork();
      if (pid == 0) {
        hh::runs::RunWriterOptions options;
        options.overwrite = true;
        try {
          for (int k = 0; k < 1000; ++k)
            hh::runs::RunWriter::create(path, hh::runs::testing::sampleHeader("create", 8), options);
        } catch (const std::exception& e) {
          std::fprintf(stderr, "run file creation failed: %s\n", e.what());
          _exit(3);
        }
        _exit(0);
      }
      // 2 to 400 ms: kills during the first creation (nothing may be there yet) and during later
      // ones (the previous, complete file must still open).
      std::this_thread::sleep_for(std::chrono::microseconds(2000 + rng() % 398000));
      ::kill(pid, SIGKILL);
      int status = 0;
      ::waitpid(pid, &status, 0);
      QVERIFY2(WIFSIGNALED(status), "the child stopped before the kill: run file creation fails");
      if (!fs::exists(path)) {
        ++absent;
        continue;
      }
      try {
        hh::runs::RunReader::open(path);
        ++opened;
      } catch (const std::exception& e) {
        QFAIL(("kill " + std::to_string(i) + " left a run file that does not open: " + e.what()).c_str());
      }
    }
    qInfo("run file creation killed 12 times: %d opened, %d absent", opened, absent);
  }
};

}  // namespace

HH_TEST_SUITE(TestCrashSafety, "engine.jobs.crash_safety", &TestCrashSafety::initTestCase,
              &TestCrashSafety::distillSurvivesKills, &TestCrashSafety::finetuneSurvivesKills,
              &TestCrashSafety::killedExportKeepsAModel, &TestCrashSafety::interruptedSaveRecovers,
              &TestCrashSafety::killedRunFileCreation)

}  // namespace test_crash_safety

#if HH_HAVE_QTEST
#include "test_crash_safety.moc"
#endif
