// engine.jobs.training_session: what the shared loop keeps in the run folder for a resume, on
// LoRA finetuning (and one distillation) of the tiny GPT-2 fixture, 6 steps, an evaluation every 3:
//  - a run from step 0 deletes an earlier run's checkpoint before it writes anything: killed
//    before its first checkpoint (here: its observer throws once its run file is made), its
//    resume starts afresh instead of continuing the earlier run (regression: it continued it);
//  - a resume of a run that ended (completed, or stopped early) writes nothing and says so;
//    given more steps a completed run continues; an end cut short (the run file never said
//    completed) is redone without training (regression: an early-stopped run trained on);
//  - a cancel inside an evaluation (the starting one included) leaves a checkpoint from which the
//    resumed run performs it: the joined run files hold the uninterrupted run's val_loss rows, and
//    an unmeasured starting loss is NaN, never 0 (regression: the rows were missing, the loss 0).
#include <torch/types.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <sstream>

#include "engine/jobs/distill_job.h"
#include "engine/jobs/finetune_job.h"
#include "engine/runs/run_chain.h"
#include "engine/runs/run_reader.h"
#include "tests/engine/jobs/jobs_test_support.h"
#include "tests/support/hh_test.h"
#include "tests/support/temp_dir.h"
#include "tests/support/test_device.h"

namespace test_training_session {

namespace {

namespace fs = std::filesystem;
namespace j = hh::jobs;
const std::string kModel = std::string(HH_FIXTURES_DIR) + "/tiny-random-gpt2";

j::FinetuneConfig loraConfig(const hh::test::TempDir& dir, const std::string& run) {
  j::FinetuneConfig c;
  c.device = hh::test::testDevice();
  c.dtype = hh::test::testDtype();
  c.modelDir = kModel;
  c.mode = "lora";
  c.runDir = dir.file(run);
  c.steps = 6;
  c.batchSize = 4;
  c.evalEvery = 3;
  c.evalBatches = 2;
  c.data.corpus = fs::exists(dir.file("corpus")) ? dir.file("corpus") : hh::test::writeWordCorpus(dir);
  c.data.sequenceLength = 32;
  c.data.maxTrainSequences = 48;
  return c;
}

// Cancels once the job reports step `cancelAt` (polled inside evaluations too); throws from
// started() or from the run's closing line when asked, as a kill at that instant would stop it.
struct Observer : j::JobObserver {
  int64_t cancelAt = -1, lastStep = -1;
  bool throwOnStart = false, throwOnEnd = false;
  void started(const std::string&, int64_t) override {
    if (throwOnStart) throw std::runtime_error("killed after the run file was made");
  }
  void progress(int64_t step, int64_t, const std::string&) override { lastStep = step; }
  bool cancelled() override { return cancelAt >= 0 && lastStep >= cancelAt; }
  void log(const std::string& line) override {
    if (throwOnEnd && line.rfind("completed:", 0) == 0) throw std::runtime_error("killed before the end was recorded");
  }
};

// Asks to pause once the job reports step `pauseAt`, for `seconds`, then asks no more; records
// paused() calls and how long the job took.
struct PausingObserver : j::JobObserver {
  int64_t pauseAt = 2, lastStep = -1;
  double seconds = 0.6;
  std::optional<std::chrono::steady_clock::time_point> asked;
  std::vector<std::pair<bool, int64_t>> events;
  void progress(int64_t step, int64_t, const std::string&) override { lastStep = step; }
  bool pauseRequested() override {
    if (lastStep < pauseAt) return false;
    if (!asked) asked = std::chrono::steady_clock::now();
    return std::chrono::steady_clock::now() - *asked < std::chrono::duration<double>(seconds);
  }
  void paused(bool paused, int64_t step) override { events.emplace_back(paused, step); }
};

struct CancelWhilePaused : PausingObserver {
  bool cancelled() override { return !events.empty(); }
};

// Every file of a folder (recursively) with its bytes: what "writes nothing" compares.
std::map<std::string, std::string> folderBytes(const std::string& dir) {
  std::map<std::string, std::string> out;
  for (const auto& entry : fs::recursive_directory_iterator(dir))
    if (entry.is_regular_file()) {
      std::ifstream in(entry.path(), std::ios::binary);
      std::ostringstream bytes;
      bytes << in.rdbuf();
      out[entry.path().string()] = bytes.str();
    }
  return out;
}

// Whether `job` throws (the observer's stand-in for a kill).
bool throws(const std::function<void()>& job) {
  try {
    job();
  } catch (const std::runtime_error&) {
    return true;
  }
  return false;
}

hh::runs::ScalarSeries chained(const std::string& runDir, const std::string& name) {
  return hh::runs::chainedScalars(hh::runs::runChain(runDir), name);
}

void compareSeries(const hh::runs::ScalarSeries& got, const hh::runs::ScalarSeries& want, const std::string& what) {
  QVERIFY2(got.steps == want.steps, (what + ": the steps differ from the uninterrupted run's").c_str());
  for (size_t i = 0; i < got.values.size(); ++i)
    QVERIFY2(std::abs(got.values[i] - want.values[i]) < 1e-6,
             (what + " at step " + std::to_string(got.steps[i])).c_str());
}

}  // namespace

class TestTrainingSession : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void initTestCase() {
    HH_SKIP_UNLESS_TEST_DEVICE();
    setenv("HH_NUM_THREADS", "1", 0);
  }

  void aFreshRunDropsTheEarlierCheckpoint() {
    hh::test::TempDir dir("session_fresh");
    auto c = loraConfig(dir, "run");
    Observer observer;
    QVERIFY(j::runFinetune(c, observer).status == j::JobStatus::Completed);
    QVERIFY(fs::exists(c.runDir + "/checkpoint.safetensors"));
    observer.throwOnStart = true;
    QVERIFY(throws([&c, job = static_cast<j::JobObserver*>(&observer)] { j::runFinetune(c, *job); }));
    QVERIFY2(!fs::exists(c.runDir + "/checkpoint.safetensors"), "the earlier run's checkpoint is still there");
    QVERIFY(!fs::exists(c.runDir + "/checkpoint.json"));
    observer.throwOnStart = false;
    c.resume = true;
    const auto r = j::runFinetune(c, observer);
    QVERIFY2(r.status == j::JobStatus::Completed, r.message.c_str());
    QCOMPARE(fs::path(r.runFile).filename().string(), std::string("run.h5"));  // afresh, not continued
    QCOMPARE(chained(c.runDir, "loss").steps.front(), int64_t(1));
  }

  // A pause waits at the next step's start, then the run goes on to the end; its run log says
  // when and for how long, and the job's wall time leaves the pause out.
  void pauseWaitsAtAStep() {
    hh::test::TempDir dir("session_pause");
    auto c = loraConfig(dir, "run");
    PausingObserver observer;
    const auto t0 = std::chrono::steady_clock::now();
    const auto r = j::runFinetune(c, observer);
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    QVERIFY2(r.status == j::JobStatus::Completed, r.message.c_str());
    QCOMPARE(r.steps, int64_t(6));
    QVERIFY((observer.events == std::vector<std::pair<bool, int64_t>>{{true, 2}, {false, 2}}));
    QVERIFY2(r.seconds <= wall - 0.5,
             ("job " + std::to_string(r.seconds) + " s, wall " + std::to_string(wall) + " s").c_str());
    std::vector<std::string> said;
    for (const auto& line : hh::runs::RunReader::open(r.runFile).logLines())
      if (line.text.find("paused") != std::string::npos || line.text.find("resumed") != std::string::npos)
        said.push_back(std::to_string(line.step) + " " + line.text.substr(0, line.text.find(" after")));
    QCOMPARE(said, (std::vector<std::string>{"2 paused at step 2", "2 resumed at step 2"}));
    // Cancelled while paused: stops at that step, and the log says so.
    auto again = loraConfig(dir, "cancelled");
    CancelWhilePaused stopping;
    stopping.seconds = 60;
    const auto s = j::runFinetune(again, stopping);
    QVERIFY(s.status == j::JobStatus::Cancelled);
    QCOMPARE(s.message, std::string("cancelled at step 2"));
    QVERIFY((stopping.events == std::vector<std::pair<bool, int64_t>>{{true, 2}, {false, 2}}));
    bool logged = false;
    for (const auto& line : hh::runs::RunReader::open(s.runFile).logLines())
      logged = logged || line.text.rfind("cancelled while paused at step 2", 0) == 0;
    QVERIFY(logged);
  }

  void resumingAnEndedRunWritesNothing() {
    hh::test::TempDir dir("session_ended");
    auto c = loraConfig(dir, "run");
    Observer observer;
    const auto first = j::runFinetune(c, observer);
    QVERIFY(first.status == j::JobStatus::Completed);
    const auto before = folderBytes(c.runDir);
    c.resume = true;
    const auto r = j::runFinetune(c, observer);
    QVERIFY2(r.status == j::JobStatus::Completed, r.message.c_str());
    // The run's own end message (what an experiment's record keeps), then why nothing ran.
    QVERIFY2(r.message == first.message + "; " + c.runDir +
                              " already completed at step 6: nothing to resume (raise steps above 6 to "
                              "continue it, or start afresh without --resume)",
             r.message.c_str());
    QCOMPARE(r.steps, int64_t(6));
    QCOMPARE(r.runFile, c.runDir + "/run.h5");
    QVERIFY2(folderBytes(c.runDir) == before, "the resume of a completed run changed its folder");
    // Given more steps it continues (the schedule's end moves with them).
    c.steps = 9;
    const auto more = j::runFinetune(c, observer);
    QVERIFY2(more.status == j::JobStatus::Completed, more.message.c_str());
    QCOMPARE(hh::runs::RunReader::open(more.runFile).scalars("loss").steps.front(), int64_t(7));

    // Stopped early (no gain at the first evaluation, patience 1): nothing to resume either.
    auto early = loraConfig(dir, "early");
    early.lr = 1e-9;
    early.patience = 1;
    QCOMPARE(j::runFinetune(early, observer).steps, int64_t(3));
    const auto earlyBefore = folderBytes(early.runDir);
    early.resume = true;
    const auto again = j::runFinetune(early, observer);
    QVERIFY2(again.status == j::JobStatus::Completed, again.message.c_str());
    QVERIFY2(again.message.find("already stopped early at step 3") != std::string::npos, again.message.c_str());
    QCOMPARE(again.steps, int64_t(3));
    QVERIFY2(folderBytes(early.runDir) == earlyBefore, "the resume of an early-stopped run changed its folder");
    // Resumed with early stopping off (patience 0), it trains on to its steps.
    early.patience = 0;
    const auto onward = j::runFinetune(early, observer);
    QVERIFY2(onward.status == j::JobStatus::Completed, onward.message.c_str());
    QCOMPARE(onward.steps, int64_t(6));
    QCOMPARE(hh::runs::RunReader::open(onward.runFile).scalars("loss").steps.front(), int64_t(4));
  }

  void anEndCutShortIsRedoneWithoutTraining() {
    hh::test::TempDir dir("session_end_cut");
    auto c = loraConfig(dir, "run");
    c.lr = 1e-9;
    c.patience = 1;
    Observer observer;
    observer.throwOnEnd = true;  // the checkpoint and the model are saved, the run file never says completed
    QVERIFY(throws([&c, job = static_cast<j::JobObserver*>(&observer)] { j::runFinetune(c, *job); }));
    observer.throwOnEnd = false;
    c.resume = true;
    const auto r = j::runFinetune(c, observer);
    QVERIFY2(r.status == j::JobStatus::Completed, r.message.c_str());
    QCOMPARE(r.steps, int64_t(3));  // not 6: early stopping had ended it
    auto continuation = hh::runs::RunReader::open(r.runFile);
    QVERIFY(continuation.status() == hh::runs::RunStatus::Completed);
    QCOMPARE(continuation.scalars("loss").steps.size(), size_t(0));
    QVERIFY(fs::exists(r.modelDir + "/model.safetensors"));
    const auto last = j::runFinetune(c, observer);  // now it is recorded: nothing to resume
    QVERIFY2(last.message.find("nothing to resume") != std::string::npos, last.message.c_str());
  }

  void cancelInAnEvaluationIsRedoneOnResume() {
    hh::test::TempDir dir("session_cancel_eval");
    Observer observer;
    const auto whole = j::runFinetune(loraConfig(dir, "whole"), observer);
    QVERIFY(whole.status == j::JobStatus::Completed);
    for (const int64_t at : {0, 3}) {  // the starting evaluation, the one after step 3
      const std::string name = "cut" + std::to_string(at);
      auto c = loraConfig(dir, name);
      Observer cancelling;
      cancelling.cancelAt = at;
      const auto cut = j::runFinetune(c, cancelling);
      QVERIFY(cut.status == j::JobStatus::Cancelled);
      QCOMPARE(cut.steps, at);
      if (at == 0) QVERIFY2(std::isnan(cut.initialValidationLoss), "an unmeasured starting loss is not NaN");
      c.resume = true;
      const auto r = j::runFinetune(c, observer);
      QVERIFY2(r.status == j::JobStatus::Completed, r.message.c_str());
      compareSeries(chained(c.runDir, "val_loss"), chained(dir.file("whole"), "val_loss"), name + " val_loss");
      compareSeries(chained(c.runDir, "loss"), chained(dir.file("whole"), "loss"), name + " loss");
      QVERIFY2(std::abs(r.initialValidationLoss - whole.initialValidationLoss) < 1e-9, name.c_str());
      QVERIFY2(std::abs(r.bestValidationLoss - whole.bestValidationLoss) < 1e-9, name.c_str());
    }
    // Distillation's evaluation also writes tables and weights: the resumed one writes them.
    j::DistillConfig d;
    d.device = hh::test::testDevice();
    d.dtype = hh::test::testDtype();
    d.modelDir = kModel;
    d.runDir = dir.file("distill");
    d.steps = 4;
    d.batchSize = 4;
    d.evalEvery = 2;
    d.evalBatches = 2;
    d.snapshotEvery = 2;
    d.data.corpus = dir.file("corpus");
    d.data.sequenceLength = 32;
    d.data.maxTrainSequences = 16;
    Observer cancelling;
    cancelling.cancelAt = 2;
    QVERIFY(j::runDistill(d, cancelling).status == j::JobStatus::Cancelled);
    d.resume = true;
    const auto r = j::runDistill(d, observer);
    QVERIFY2(r.status == j::JobStatus::Completed, r.message.c_str());
    QCOMPARE(chained(d.runDir, "val_loss").steps, (std::vector<int64_t>{0, 2, 4}));
  }
};

HH_TEST_SUITE(TestTrainingSession, "engine.jobs.training_session", &TestTrainingSession::initTestCase,
              &TestTrainingSession::aFreshRunDropsTheEarlierCheckpoint, &TestTrainingSession::pauseWaitsAtAStep,
              &TestTrainingSession::resumingAnEndedRunWritesNothing,
              &TestTrainingSession::anEndCutShortIsRedoneWithoutTraining,
              &TestTrainingSession::cancelInAnEvaluationIsRedoneOnResume)

}  // namespace test_training_session

#if HH_HAVE_QTEST
#include "test_training_session.moc"
#endif
