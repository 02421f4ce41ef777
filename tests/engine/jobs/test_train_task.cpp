// engine.jobs.train_task: `train` on the synthetic tasks (engine/data/synthetic_tasks.h), a tiny
// GPT-2 of 2 layers and 2 heads: a short associative-recall run records the task's scalars
// (val_loss, accuracy on the validation split), the entropy table and snapshots of the model's own
// weights, and its folder reloads to the job's own test accuracy; cancel and resume; and the
// learning guards of docs/experiments.md: softmax solves recall and 1+ELU does not, Hedgehog in
// layer 0 solves it under a softmax layer 1, all-Hedgehog with one head of dim 64 leaves the
// plateau, Hedgehog copies ahead of 1+ELU. (The plain LM runs: engine.jobs.train.)

#include <torch/types.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>

#include "engine/data/synthetic_tasks.h"
#include "engine/jobs/task_evaluation.h"
#include "engine/jobs/train_job.h"
#include "engine/models/model_io.h"
#include "engine/runs/run_reader.h"
#include "tests/engine/jobs/jobs_test_support.h"
#include "tests/support/hh_test.h"
#include "tests/support/temp_dir.h"
#include "tests/support/test_device.h"

namespace test_train_task {

namespace {

namespace j = hh::jobs;
using hh::test::StepObserver;

// A recall learning guard's run: the small setting with every repeat scored, 10,000 training
// rows, lr 1e-3, `steps` steps; `adjust` changes what the guard is about. Returns the result.
j::TrainResult trainRecall(const hh::test::TempDir& dir, const std::string& featureMap, int64_t steps,
                           const std::function<void(j::TrainConfig&)>& adjust = {}) {
  auto c = hh::test::recallConfig(dir, featureMap);
  c.task.supervision = "every_recall";
  c.task.trainSamples = 10000;
  c.lr = 1e-3;
  c.steps = steps;
  c.evalEvery = steps;
  if (adjust) adjust(c);
  j::JobObserver quiet;
  return j::runTrain(c, quiet);
}

}  // namespace

class TestTrainTask : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void initTestCase() {
    HH_SKIP_UNLESS_TEST_DEVICE();  // HH_TEST_DEVICE: the jobs below run there
    setenv("HH_NUM_THREADS", "1", 0);
  }

  // A short associative-recall run with a softmax layer 0 and a Hedgehog layer 1: the run file has
  // the task's scalars (val_loss and accuracy on the validation split), the entropy table, snapshots
  // of the model's own weights; the folder has task.json and reloads to the job's own test accuracy.
  void taskRunRecordsAccuracyEntropyAndSnapshots() {
    hh::test::TempDir dir("train_task_run");
    auto c = hh::test::recallConfig(dir, "hedgehog");
    c.layers = {1};
    c.steps = 20;
    c.evalEvery = 10;
    c.task.trainSamples = 200;
    c.task.testSamples = 40;
    StepObserver observer;
    const auto r = j::runTrain(c, observer);
    QVERIFY2(r.status == j::JobStatus::Completed, r.message.c_str());
    QVERIFY(r.testAccuracy >= 0.0 && r.testAccuracy <= 1.0);
    QVERIFY(std::isfinite(r.attentionEntropy));
    auto run = hh::runs::RunReader::open(r.runFile);
    QCOMPARE(run.scalarRows("accuracy"), int64_t(3));           // steps 0, 10, 20
    QCOMPARE(run.scalarRows("attention_entropy"), int64_t(3));  // the end probe is not repeated at step 20
    QCOMPARE(run.scalarRows("val_loss"), int64_t(3));
    const auto test = run.scalars("test_accuracy");
    QCOMPARE(test.steps, (std::vector<int64_t>{20}));
    QCOMPARE(test.values.front(), r.testAccuracy);
    HH_VERIFY_THROWS(std::invalid_argument, run.scalarRows("perplexity"));
    // Entropy [L, H] per evaluation, finite in (0, log T]; attention_entropy is its mean.
    const auto entropy = run.table("entropy");
    QCOMPARE(entropy.size(), size_t(3));
    QCOMPARE(entropy.layers, 2);
    QCOMPARE(entropy.heads, 2);
    for (double v : entropy.values)
      QVERIFY2(std::isfinite(v) && v > 0 && v <= std::log(32.0) + 1e-9, std::to_string(v).c_str());
    double mean = 0;
    for (int l = 0; l < 2; ++l)
      for (int h = 0; h < 2; ++h) mean += entropy.at(2, l, h) / 4;
    QVERIFY(std::abs(mean - run.scalars("attention_entropy").values.back()) < 1e-9);
    QVERIFY(std::abs(mean - r.attentionEntropy) < 1e-9);
    // Snapshots: (0,0), (1,0), (1,1) on the first test sequence, S = T = 32 (no pooling).
    const auto& layout = run.header().layout;
    QCOMPARE(layout.snapshots.pairs.size(), size_t(3));
    QVERIFY((layout.snapshots.pairs[0] == hh::runs::LayerHead{0, 0}) &&
            (layout.snapshots.pairs[2] == hh::runs::LayerHead{1, 1}));
    const auto task = hh::data::buildSyntheticTask(c.task);
    QCOMPARE(layout.snapshots.tokens.size(), size_t(32));
    for (int t = 0; t < 32; ++t)
      QCOMPARE(layout.snapshots.tokens[t], task.tokenNames[task.test.ids[0][t].item<int64_t>()]);
    QCOMPARE(run.snapshotCount(), int64_t(3));
    const auto snap = run.snapshot(-1);
    QCOMPARE(snap.size, 32);
    const int S = 32;
    for (int p = 0; p < 3; ++p)
      for (int i = 0; i < S; ++i) {
        double softmaxSum = 0, linearSum = 0;
        for (int k = 0; k <= i; ++k) {
          const size_t at = (static_cast<size_t>(p) * S + i) * S + k;
          softmaxSum += snap.softmax[at];
          if (p > 0)
            linearSum += snap.linear[at];
          else
            QVERIFY(std::isnan(snap.linear[at]));  // layer 0 is softmax: no linear map
        }
        QVERIFY(std::abs(softmaxSum - 1) < 1e-4);
        if (p > 0) QVERIFY2(std::abs(linearSum - 1) < 1e-4, std::to_string(linearSum).c_str());
        // The future of a causal map is stored as NaN (no pair there), not as weight 0.
        for (int k = i + 1; k < S; ++k) {
          const size_t at = (static_cast<size_t>(p) * S + i) * S + k;
          QVERIFY(std::isnan(snap.softmax[at]) && std::isnan(snap.linear[at]));
        }
      }
    // The folder: no tokenizer, task.json with the token names, and the job's own test accuracy.
    QVERIFY(!std::filesystem::exists(r.modelDir + "/vocab.json"));
    const auto taskFile = nlohmann::json::parse(std::ifstream(r.modelDir + "/task.json"));
    QCOMPARE(taskFile.at("token_names").get<std::vector<std::string>>(), task.tokenNames);
    QCOMPARE(taskFile.at("task").at("kind").get<std::string>(), std::string("associative_recall"));
    auto model = hh::models::loadModel(r.modelDir);
    QCOMPARE(model->config().vocabSize, int64_t(16));
    j::JobObserver quiet;
    QCOMPARE(j::scoreTask(*model, task.test, c.batchSize, 0, quiet).accuracy, r.testAccuracy);
    // The curves watch the validation split (its first eval_batches batches), not the test split.
    const auto watched = j::scoreTask(*model, task.validation, c.batchSize, c.evalBatches, quiet);
    QVERIFY(std::abs(run.scalars("val_loss").values.back() - watched.loss) < 1e-9);
    QVERIFY(std::abs(run.scalars("accuracy").values.back() - watched.accuracy) < 1e-12);
    QVERIFY(std::abs(j::scoreTask(*model, task.test, c.batchSize, c.evalBatches, quiet).loss - watched.loss) > 1e-6);
  }

  // Cancel mid-run marks the run cancelled and keeps a checkpoint; resume continues from it.
  void taskRunCancelsAndResumes() {
    hh::test::TempDir dir("train_task_resume");
    auto c = hh::test::recallConfig(dir, "elu");
    c.steps = 10;
    c.evalEvery = 5;
    c.task.trainSamples = 200;
    c.task.testSamples = 40;
    StepObserver observer;
    observer.cancelAt = 3;
    const auto cancelled = j::runTrain(c, observer);
    QVERIFY(cancelled.status == j::JobStatus::Cancelled);
    QCOMPARE(cancelled.steps, int64_t(3));
    QVERIFY(hh::runs::RunReader::open(cancelled.runFile).status() == hh::runs::RunStatus::Cancelled);
    QVERIFY(std::filesystem::exists(cancelled.modelDir + "/task.json"));
    c.resume = true;
    StepObserver plain;
    const auto r = j::runTrain(c, plain);
    QVERIFY2(r.status == j::JobStatus::Completed, r.message.c_str());
    QCOMPARE(r.steps, int64_t(10));
    auto run = hh::runs::RunReader::open(r.runFile);
    const auto steps = run.scalars("loss").steps;
    QCOMPARE(steps.front(), int64_t(4));
    QCOMPARE(steps.back(), int64_t(10));
    QCOMPARE(run.scalarRows("test_accuracy"), int64_t(1));
  }

  // The reduced associative-recall experiment (docs/experiments.md): a guard on learning, not only
  // on code. With every repeated key scored, softmax forms an induction head and solves recall
  // (it reached 0.99 by step 750 in the exploration); 1+ELU linear attention stays near 0.27.
  void softmaxLearnsRecallAndEluDoesNot() {
    if (HH_UNDER_SANITIZER) QSKIP("a learning guard: minutes under the sanitizer; its code runs in the shorter suites");
    hh::test::TempDir dir("train_task_learning");
    std::map<std::string, double> accuracy;
    for (const std::string featureMap : {"softmax", "elu"}) {
      const auto r = trainRecall(dir, featureMap, 1000);
      QVERIFY2(r.status == j::JobStatus::Completed, r.message.c_str());
      accuracy[featureMap] = r.testAccuracy;
      qInfo("%s: test accuracy %.3f, attention entropy %.3f nats (%.1f s)", featureMap.c_str(), r.testAccuracy,
            r.attentionEntropy, r.seconds);
    }
    QVERIFY2(accuracy["softmax"] > 0.9, std::to_string(accuracy["softmax"]).c_str());
    QVERIFY2(accuracy["elu"] < 0.6, std::to_string(accuracy["elu"]).c_str());
  }

  // Where Hedgehog stands on recall (docs/experiments.md, "Where Hedgehog fails"): with Hedgehog in
  // layer 0 (the induction circuit's previous-token step) and softmax in layer 1 (the lookup), the
  // model solves recall; all-Hedgehog does not at this size. The experiment's own setting, seed 0
  // (1.00 from step 1500); 7 of its 8 seeds solve it within the 3000 steps, seed 2 stays on the
  // plateau (docs/experiments.md).
  void hedgehogLearnsThePreviousTokenStep() {
    if (HH_UNDER_SANITIZER) QSKIP("a learning guard: minutes under the sanitizer; its code runs in the shorter suites");
    hh::test::TempDir dir("train_task_hedgehog_layer0");
    const auto r = trainRecall(dir, "hedgehog", 3000, [](j::TrainConfig& c) {
      c.layers = {0};
      c.minLrRatio = 0.1;  // as projects/experiments/associative_recall_layers.json
      c.gradClip = 1.0;
    });
    QVERIFY2(r.status == j::JobStatus::Completed, r.message.c_str());
    qInfo("hedgehog in layer 0, softmax in layer 1: test accuracy %.3f (%.1f s)", r.testAccuracy, r.seconds);
    QVERIFY2(r.testAccuracy > 0.9, std::to_string(r.testAccuracy).c_str());
  }

  // All-Hedgehog leaves the recall plateau with one head of dim 64 (0.88 on held-out rows by step
  // 4000, 0.92 on the test split by 8000 in associative_recall_d64); with two of 32 it stays on it.
  void hedgehogWithHeadDim64LeavesThePlateau() {
    if (HH_UNDER_SANITIZER) QSKIP("a learning guard: minutes under the sanitizer; its code runs in the shorter suites");
    hh::test::TempDir dir("train_task_hedgehog_d64");
    const auto r = trainRecall(dir, "hedgehog", 4000, [](j::TrainConfig& c) { c.architecture.nHead = 1; });
    QVERIFY2(r.status == j::JobStatus::Completed, r.message.c_str());
    qInfo("hedgehog, 1 head of 64: test accuracy %.3f (%.1f s)", r.testAccuracy, r.seconds);
    QVERIFY2(r.testAccuracy > 0.7, std::to_string(r.testAccuracy).c_str());
  }

  // The reduced copy experiment (docs/experiments.md, "The copy task"): copy_long's model (2
  // layers, one head of dim 64) at length 64 for 1000 steps. Hedgehog was ahead of 1+ELU there at
  // every seed tried (held-out loss 0.79 against 0.96 at seed 0, 0.33 against 0.86 at seed 1).
  void hedgehogCopiesAheadOfElu() {
    if (HH_UNDER_SANITIZER) QSKIP("a learning guard: minutes under the sanitizer; its code runs in the shorter suites");
    hh::test::TempDir dir("train_task_copy");
    std::map<std::string, j::TrainResult> results;
    j::JobObserver quiet;
    for (const std::string featureMap : {"elu", "hedgehog"}) {
      auto c = hh::test::recallConfig(dir, featureMap);
      c.architecture.nHead = 1;
      c.architecture.nPositions = 64;
      c.task.kind = "copy";
      c.task.vocabSize = 12;
      c.task.sequenceLength = 64;
      c.task.trainSamples = 10000;
      c.task.testSamples = 2000;
      c.lr = 1e-3;
      c.minLrRatio = 0.1;
      c.gradClip = 1.0;
      c.steps = 1000;
      c.evalEvery = 250;
      results[featureMap] = j::runTrain(c, quiet);
      const auto& r = results[featureMap];
      QVERIFY2(r.status == j::JobStatus::Completed, r.message.c_str());
      qInfo("%s: held-out loss %.3f, test accuracy %.3f (%.1f s)", featureMap.c_str(), r.finalValidationLoss,
            r.testAccuracy, r.seconds);
    }
    QVERIFY(results["hedgehog"].finalValidationLoss < results["elu"].finalValidationLoss - 0.1);
    QVERIFY(results["hedgehog"].testAccuracy > 0.72);
  }
};

HH_TEST_SUITE(TestTrainTask, "engine.jobs.train_task", &TestTrainTask::initTestCase,
              &TestTrainTask::taskRunRecordsAccuracyEntropyAndSnapshots, &TestTrainTask::taskRunCancelsAndResumes,
              &TestTrainTask::softmaxLearnsRecallAndEluDoesNot, &TestTrainTask::hedgehogLearnsThePreviousTokenStep,
              &TestTrainTask::hedgehogWithHeadDim64LeavesThePlateau, &TestTrainTask::hedgehogCopiesAheadOfElu)

}  // namespace test_train_task

#if HH_HAVE_QTEST
#include "test_train_task.moc"
#endif
