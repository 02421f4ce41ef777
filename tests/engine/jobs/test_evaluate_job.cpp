// engine.jobs.evaluate: the evaluation job on the tiny GPT-2 fixture with a corpus written by the
// test (no npm data needed): the original perplexity equals exp(mean next-token NLL) computed by
// hand on the same held-out rows; the converted model (identity-initialised hedgehog) differs;
// the table has one row per feature map with finite KL >= 0 and [L, H] tables in the run file;
// adapters from a short distillation give a lower KL than untrained hedgehog; classification
// accuracy equals a hand count; cancel stops within a second and marks the run cancelled.

#include <torch/types.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <fstream>

#include "engine/config/attention_types.h"
#include "engine/data/classification_data.h"
#include "engine/jobs/evaluate_job.h"
#include "engine/jobs/job_support.h"
#include "engine/models/model_io.h"
#include "engine/jobs/attention_probe.h"
#include "engine/runs/run_reader.h"
#include "engine/tokenizers/tokenizer.h"
#include "tests/support/test_device.h"
#include "tests/support/temp_dir.h"
#include "tests/engine/jobs/jobs_test_support.h"
#include "tests/support/hh_test.h"

namespace test_evaluate_job {

namespace {

namespace j = hh::jobs;
const std::string kModel = std::string(HH_FIXTURES_DIR) + "/tiny-random-gpt2";

// Plain sentences, enough for a few dozen 32-token rows (as in the distill suite).
j::EvaluateConfig smallConfig(const hh::test::TempDir& dir) {
  j::EvaluateConfig c;
  c.device = hh::test::testDevice();
  c.dtype = hh::test::testDtype();
  c.modelDir = kModel;
  c.runDir = dir.file("eval");
  c.maxSequences = 8;
  c.tableSequences = 4;
  c.batchSize = 4;
  c.data.corpus = hh::test::writeWordCorpus(dir);
  c.data.sequenceLength = 32;
  c.data.validationFraction = 0.25;
  return c;
}

struct CancelObserver : j::JobObserver {
  int64_t cancelAfter = -1, progressCalls = 0;
  std::chrono::steady_clock::time_point cancelledAt;
  bool asked = false;
  void progress(int64_t, int64_t, const std::string&) override { ++progressCalls; }
  bool cancelled() override {
    if (cancelAfter >= 0 && progressCalls >= cancelAfter) {
      if (!asked) cancelledAt = std::chrono::steady_clock::now(), asked = true;
      return true;
    }
    return false;
  }
};

}  // namespace

class TestEvaluateJob : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void initTestCase() {
    HH_SKIP_UNLESS_TEST_DEVICE();  // HH_TEST_DEVICE: the jobs below run there
    setenv("HH_NUM_THREADS", "1", 0);
  }

  void perplexityAndTable() {
    hh::test::TempDir dir("evaluate_ok");
    const auto c = smallConfig(dir);
    j::JobObserver observer;
    const auto r = j::runEvaluate(c, observer);
    QVERIFY2(r.status == j::JobStatus::Completed, r.message.c_str());
    QCOMPARE(r.sequences, int64_t(8));
    QCOMPARE(r.predictions, int64_t(8 * 31));
    QVERIFY(std::isfinite(r.perplexityOriginal) && std::isfinite(r.perplexityConverted));

    // The original perplexity by hand: exp(mean over rows and positions of -log p(x_{t+1} | x_<=t)).
    hh::models::LoadOptions load;
    load.dtype = j::jobDtype(c.dtype);  // as the job loads it
    auto model = hh::models::loadModel(kModel, load);
    const auto tokenizer = hh::tok::loadTokenizer(kModel);
    const auto ids = j::loadLmData(c.data, *tokenizer).validation.narrow(0, 0, 8);  // [8, 32]
    at::NoGradGuard noGrad;
    const auto logits = model->forward(ids).logits.to(torch::kDouble);              // [8, 32, V]
    const auto logp = torch::log_softmax(logits.narrow(1, 0, 31), -1);
    const double nll = -logp.gather(-1, ids.narrow(1, 1, 31).unsqueeze(-1)).mean().item<double>();
    qInfo("perplexity original %.6f (by hand %.6f), converted (untrained hedgehog) %.6f", r.perplexityOriginal,
          std::exp(nll), r.perplexityConverted);
    QVERIFY(std::abs(r.nllOriginal - nll) < 1e-5 * nll);
    QVERIFY(std::abs(r.perplexityOriginal - std::exp(nll)) < 1e-5 * std::exp(nll));
    // The converted model (identity-initialised hedgehog in every layer) by hand too: it matches the
    // job and differs from the original. The fixture's random attention is nearly uniform, so the
    // difference is small (~1e-5 relative) but far above the fp32 agreement above (~3e-8).
    auto convertedModel = hh::models::loadModel(kModel, load);
    convertedModel->setAttentionPlan(hh::models::AttentionPlan::uniform(5, hh::attn::LinearAttentionConfig{}));
    const auto convertedLogp = torch::log_softmax(convertedModel->forward(ids).logits.to(torch::kDouble).narrow(1, 0, 31), -1);
    const double convertedNll = -convertedLogp.gather(-1, ids.narrow(1, 1, 31).unsqueeze(-1)).mean().item<double>();
    QVERIFY(std::abs(r.nllConverted - convertedNll) < 1e-5 * convertedNll);
    QVERIFY(std::abs(r.perplexityConverted - r.perplexityOriginal) > 1e-6 * r.perplexityOriginal);

    // One row per feature map kind, in order; KL finite and >= 0 where the map's weights are a
    // distribution (identity features can give negative weights, hence NaN KL: reported as is).
    const auto& kinds = hh::attn::untrainedComparisonKinds();
    QCOMPARE(r.featureMaps.size(), kinds.size());
    const int L = 5, H = 4;
    for (size_t i = 0; i < kinds.size(); ++i) {
      const auto& row = r.featureMaps[i];
      QCOMPARE(row.name, hh::attn::toString(kinds[i]));
      QCOMPARE(row.klTable.values.size(), size_t(L * H));
      QCOMPARE(row.klTable.name, "kl_" + row.name);
      qInfo("%-17s KL %10.3g  entropy %7.4f  monotonicity %7.4f", row.name.c_str(), row.kl, row.entropy, row.monotonicity);
      if (kinds[i] == hh::attn::FeatureMapKind::Identity) continue;
      QVERIFY2(std::isfinite(row.kl) && row.kl >= 0, row.name.c_str());
      QVERIFY2(std::isfinite(row.entropy) && row.entropy >= 0, row.name.c_str());
      QVERIFY2(row.monotonicity >= -1 && row.monotonicity <= 1, row.name.c_str());
      for (const double v : row.klTable.values) QVERIFY2(std::isfinite(v) && v >= -1e-9, row.name.c_str());
    }
    QVERIFY(std::isfinite(r.softmaxEntropy) && r.softmaxEntropy > 0);
    // Untrained feature maps disagree with softmax: not all KLs are the same.
    QVERIFY(std::abs(r.featureMaps[0].kl - r.featureMaps[3].kl) > 1e-6);  // hedgehog vs elu

    // The run file holds the scalars and one [L, H] table per map, equal to the result.
    auto run = hh::runs::RunReader::open(r.runFile);
    QVERIFY(run.status() == hh::runs::RunStatus::Completed);
    QCOMPARE(run.header().kind, std::string("evaluate"));
    QCOMPARE(run.scalars("perplexity_original").values.at(0), r.perplexityOriginal);
    QCOMPARE(run.scalars("kl_mean_hedgehog").values.at(0), r.featureMaps[0].kl);
    for (const auto& row : r.featureMaps) {
      QCOMPARE(run.tableRows("kl_" + row.name), int64_t(1));
      QCOMPARE(run.tableRows("monotonicity_" + row.name), int64_t(1));
    }
    const auto table = run.table("kl_t2r");
    QCOMPARE(table.at(0, 2, 1), r.featureMaps[2].klTable.values[2 * H + 1]);
    QCOMPARE(run.tableRows("entropy_softmax"), int64_t(1));
  }

  void wholeCorpusHeldOutAndExpTRows() {
    // An evaluation corpus held out whole (validation_fraction 1: no training split), and table
    // rows with exp_t's parameter.
    hh::test::TempDir dir("evaluate_heldout");
    auto c = smallConfig(dir);
    c.data.validationFraction = 1.0;
    c.featureMaps = {"exp_t", "exp_t=2"};
    j::JobObserver observer;
    const auto r = j::runEvaluate(c, observer);
    QVERIFY2(r.status == j::JobStatus::Completed, r.message.c_str());
    QCOMPARE(r.featureMaps.size(), size_t(2));
    QCOMPARE(r.featureMaps[1].name, std::string("exp_t=2"));
    QVERIFY(std::isfinite(r.featureMaps[1].kl) && std::abs(r.featureMaps[1].kl - r.featureMaps[0].kl) > 1e-9);
    QCOMPARE(hh::runs::RunReader::open(r.runFile).tableRows("kl_exp_t=2"), int64_t(1));
  }

  void softmaxEntropyIsTheTeachersWhateverTheOrder() {
    // A converted folder whose attention weights moved away from the teacher's (as full
    // finetuning moves them): the reported softmax entropy is the teacher's whether "trained"
    // comes first, last or alone.
    hh::test::TempDir dir("evaluate_softmax_entropy");
    auto model = hh::models::loadModel(kModel);
    hh::attn::LinearAttentionConfig linear;
    model->setAttentionPlan(hh::models::AttentionPlan::uniform(5, linear));
    {
      at::NoGradGuard noGrad;
      torch::manual_seed(5);
      for (auto& item : model->named_parameters(true))
        if (item.key().find("c_attn.weight") != std::string::npos) item.value().mul_(8.0);  // sharper softmax
    }
    hh::models::saveModel(*model, dir.file("moved"), kModel);
    auto c = smallConfig(dir);
    c.converted = dir.file("moved");
    std::vector<double> entropies;
    for (const auto& maps : std::vector<std::vector<std::string>>{{"trained", "elu"}, {"elu", "trained"}, {"trained"}, {"elu"}}) {
      c.featureMaps = maps;
      c.runDir = dir.file("eval_" + std::to_string(entropies.size()));
      j::JobObserver observer;
      const auto r = j::runEvaluate(c, observer);
      QVERIFY2(r.status == j::JobStatus::Completed, r.message.c_str());
      entropies.push_back(r.softmaxEntropy);
    }
    qInfo("softmax entropy %.6f (trained first), %.6f, %.6f, %.6f", entropies[0], entropies[1], entropies[2], entropies[3]);
    for (const double e : entropies) QVERIFY(std::abs(e - entropies[3]) < 1e-12);
    // The moved model's own softmax is far from the teacher's: taking it instead would show.
    const auto ids = j::loadLmData(c.data, *hh::tok::loadTokenizer(kModel), false).validation.narrow(0, 0, 4);
    const auto own = j::probeAttention(*hh::models::loadModel(dir.file("moved")), ids, {}, j::ProbeRequest{}).heads;
    double mean = 0;
    for (const double v : own.entropySoftmax.values) mean += v / double(own.entropySoftmax.values.size());
    qInfo("the moved model's own softmax entropy: %.4f", mean);
    QVERIFY(std::abs(mean - entropies[3]) > 0.05);
  }

  void trainedAdaptersBeatUntrainedHedgehog() {
    hh::test::TempDir dir("evaluate_trained");
    const auto corpus = hh::test::writeWordCorpus(dir);
    j::DistillConfig d;
    d.modelDir = kModel;
    d.runDir = dir.file("distill");
    d.steps = 30;
    d.batchSize = 4;
    d.evalEvery = 10;
    d.evalBatches = 2;
    d.snapshotEvery = 100;
    d.lr = 0.05;
    d.patience = 0;
    d.data.corpus = corpus;
    d.data.sequenceLength = 32;
    d.data.validationFraction = 0.25;
    j::JobObserver quiet;
    const auto distilled = j::runDistill(d, quiet);
    QVERIFY2(distilled.status == j::JobStatus::Completed, distilled.message.c_str());

    auto c = smallConfig(dir);
    c.converted = distilled.adaptersFile;
    c.featureMaps = {"hedgehog", "trained"};
    const auto r = j::runEvaluate(c, quiet);
    QVERIFY2(r.status == j::JobStatus::Completed, r.message.c_str());
    QCOMPARE(r.featureMaps.size(), size_t(2));
    QCOMPARE(r.featureMaps[1].name, std::string("trained"));
    qInfo("mean KL: untrained hedgehog %.4g, trained %.4g (distill reported %.4g -> %.4g); perplexity %.4f -> %.4f",
          r.featureMaps[0].kl, r.featureMaps[1].kl, distilled.initialKl, distilled.finalKl, r.perplexityOriginal,
          r.perplexityConverted);
    QVERIFY(r.featureMaps[1].kl < r.featureMaps[0].kl);
    // Same held-out rows as distillation's own final probe (its first batch_size validation rows).
    // In bf16 evaluate rounds the trained maps to bf16 (distillation kept fp32 master weights).
    const double klTolerance = hh::test::testTolerance(1e-6, 3e-2);
    QVERIFY(std::abs(r.featureMaps[1].kl - distilled.finalKl) < klTolerance * distilled.finalKl);
    QVERIFY(std::abs(r.featureMaps[0].kl - distilled.initialKl) < klTolerance * distilled.initialKl);
    QVERIFY(std::isfinite(r.perplexityConverted));
    // The default list with a converted model ends with "trained".
    QCOMPARE(j::evaluateFeatureMapNames(c).back(), std::string("trained"));
    c.featureMaps.clear();
    QCOMPARE(j::evaluateFeatureMapNames(c).size(), hh::attn::untrainedComparisonKinds().size() + 1);
  }

  void classificationAccuracy() {
    hh::test::TempDir dir("evaluate_cls");
    // A GPT-2 classifier: the fixture's config with a 2-label head and fresh weights.
    auto config = hh::models::loadModelConfig(kModel);
    config.head = hh::models::HeadKind::SequenceClassification;
    config.numLabels = 2;
    config.architectures = {"GPT2ForSequenceClassification"};
    torch::manual_seed(3);
    auto classifier = hh::models::createModel(config);
    const auto modelDir = dir.file("classifier");
    hh::models::saveModel(*classifier, modelDir, kModel);
    {
      std::ofstream out(dir.file("labelled.tsv"));
      out << "label\ttext\n";
      // Lengths vary (i % 7 extra words), so the held-out texts pad to different numbers of rows.
      for (int i = 0; i < 40; ++i) {
        out << (i % 2) << "\t" << (i % 2 ? "birds sang songs about rain" : "the cat sat on a mat");
        for (int w = 0; w < i % 7; ++w) out << " and more";
        out << " " << i << "\n";
      }
    }
    auto c = smallConfig(dir);
    c.modelDir = modelDir;
    c.task = "classification";
    c.data.corpus = dir.file("labelled.tsv");
    c.data.sequenceLength = 16;
    c.featureMaps = {"hedgehog"};
    c.maxSequences = 0;  // every held-out example
    j::JobObserver observer;
    const auto r = j::runEvaluate(c, observer);
    QVERIFY2(r.status == j::JobStatus::Completed, r.message.c_str());
    QVERIFY(r.accuracyOriginal >= 0 && r.accuracyOriginal <= 1 && r.accuracyConverted >= 0 && r.accuracyConverted <= 1);
    QVERIFY(std::isnan(r.perplexityOriginal));
    QVERIFY(std::isfinite(r.featureMaps[0].kl));

    // By hand on the same held-out split.
    auto model = hh::models::loadModel(modelDir);
    const auto tokenizer = hh::tok::loadTokenizer(modelDir);
    hh::data::ClassificationOptions options;
    options.sequenceLength = 16;
    options.validationFraction = c.data.validationFraction;
    options.seed = c.data.seed;
    const auto split = hh::data::buildClassificationDataset(hh::data::readClassificationFile(c.data.corpus), *tokenizer, options).validation;
    QCOMPARE(r.sequences, split.ids.size(0));
    at::NoGradGuard noGrad;
    hh::models::ForwardOptions forward;
    forward.attentionMask = split.mask;
    const double accuracy = model->forward(split.ids, forward).logits.argmax(-1).eq(split.labels).to(torch::kDouble).mean().item<double>();
    qInfo("accuracy original %.3f (by hand %.3f), converted %.3f on %lld examples", r.accuracyOriginal, accuracy,
          r.accuracyConverted, (long long)r.sequences);
    QVERIFY(std::abs(r.accuracyOriginal - accuracy) < 1e-12);
    // The per-head tables are means over real query rows whatever the batches: one text a batch
    // gives the table of one batch of them all (each batch's mean had counted as one text).
    auto single = c;
    single.dtype = "float64";         // the KL here is ~2e-5: fp32's rounding in other batch shapes shows at 5e-4
    single.data.sequenceLength = 64;  // long enough that the texts pad to different lengths
    single.batchSize = 1;
    single.tableSequences = 6;
    single.runDir = dir.file("eval_single");
    auto whole = single;
    whole.batchSize = 64;
    whole.runDir = dir.file("eval_whole");
    const auto bySingle = j::runEvaluate(single, observer), byWhole = j::runEvaluate(whole, observer);
    const auto& a = bySingle.featureMaps[0].klTable.values;
    const auto& b = byWhole.featureMaps[0].klTable.values;
    QCOMPARE(a.size(), b.size());
    double worst = 0;
    for (size_t k = 0; k < a.size(); ++k) worst = std::max(worst, std::abs(a[k] - b[k]) / std::abs(b[k]));
    options.sequenceLength = 64;
    const auto padded =
        hh::data::buildClassificationDataset(hh::data::readClassificationFile(c.data.corpus), *tokenizer, options)
            .validation;
    const auto lengths = padded.mask.narrow(0, 0, 6).sum(1);
    qInfo("per-head KL, one text a batch against one batch: worst relative difference %.3g (real rows %lld to %lld)",
          worst, (long long)lengths.min().item<int64_t>(), (long long)lengths.max().item<int64_t>());
    QVERIFY(lengths.min().item<int64_t>() < lengths.max().item<int64_t>());
    QVERIFY(worst < 1e-9);
    // A converted model whose head is not the teacher's is refused, naming both.
    auto lm = hh::models::loadModel(kModel);
    hh::attn::LinearAttentionConfig linear;
    linear.featureMap.kind = hh::attn::FeatureMapKind::Hedgehog;
    lm->setAttentionPlan(hh::models::AttentionPlan::uniform(lm->layerCount(), linear));
    hh::models::saveModel(*lm, dir.file("lm_converted"), kModel);
    auto lmConverted = c;
    lmConverted.converted = dir.file("lm_converted");
    HH_VERIFY_THROWS_WITH(j::runEvaluate(lmConverted, observer), "causal LM head");
    // A causal LM is refused for classification.
    c.modelDir = kModel;
    HH_VERIFY_THROWS_WITH(j::runEvaluate(c, observer), "sequence-classification head");
  }

  // "trained" is a mean over the converted model's linear layers among the table's: a layer it
  // keeps as softmax (NaN in the linear columns) is not averaged in.
  void trainedRowCoversItsLinearLayers() {
    hh::test::TempDir dir("evaluate_hybrid");
    auto model = hh::models::loadModel(kModel);
    hh::attn::LinearAttentionConfig linear;
    linear.featureMap.kind = hh::attn::FeatureMapKind::Hedgehog;
    model->setAttentionPlan(hh::models::AttentionPlan::hybrid(model->layerCount(), {1}, linear));
    hh::models::saveModel(*model, dir.file("hybrid"), kModel);
    auto c = smallConfig(dir);
    c.converted = dir.file("hybrid");
    c.layers = {0, 1};
    c.featureMaps = {"trained"};
    j::JobObserver quiet;
    const auto r = j::runEvaluate(c, quiet);
    QVERIFY2(r.status == j::JobStatus::Completed, r.message.c_str());
    const auto& row = r.featureMaps[0];
    const int H = row.klTable.heads;
    QVERIFY(std::isnan(row.klTable.values[0]));  // layer 0 is softmax in the converted model
    double layer1 = 0;
    for (int h = 0; h < H; ++h) layer1 += row.klTable.values[size_t(H + h)] / H;
    QVERIFY(std::isfinite(row.kl));
    QVERIFY(std::abs(row.kl - layer1) <= 1e-12 * layer1);
  }

  void cancelStopsWithinASecond() {
    hh::test::TempDir dir("evaluate_cancel");
    auto c = smallConfig(dir);
    CancelObserver observer;
    observer.cancelAfter = 3;  // inside the converted model's perplexity pass
    const auto r = j::runEvaluate(c, observer);
    const double latency = std::chrono::duration<double>(std::chrono::steady_clock::now() - observer.cancelledAt).count();
    QVERIFY(r.status == j::JobStatus::Cancelled);
    QVERIFY(observer.asked);
    qInfo("cancel -> return %.3f s (%s)", latency, r.message.c_str());
    QVERIFY(latency < 1.0);
    QCOMPARE(observer.progressCalls, int64_t(3));
    QVERIFY(r.featureMaps.empty());
    QVERIFY(hh::runs::RunReader::open(r.runFile).status() == hh::runs::RunStatus::Cancelled);
  }

  void configJsonRoundTripAndErrors() {
    j::EvaluateConfig c;
    c.device = hh::test::testDevice();
    c.dtype = hh::test::testDtype();
    c.converted = "some/folder";
    c.featureMaps = {"t2r", "trained"};
    c.task = "classification";
    c.data.sequenceLength = 77;
    const auto back = j::evaluateConfigFromJson(j::toJson(c));
    QCOMPARE(back.converted, std::string("some/folder"));
    QCOMPARE(back.featureMaps, (std::vector<std::string>{"t2r", "trained"}));
    QCOMPARE(back.task, std::string("classification"));
    QCOMPARE(back.data.sequenceLength, int64_t(77));
    QCOMPARE(j::toJson(j::EvaluateConfig{}).at("table_sequences").get<int64_t>(), int64_t(16));
    HH_VERIFY_THROWS_WITH(j::evaluateConfigFromJson({{"max_seqs", 3}}), "unknown key \"max_seqs\"");
    HH_VERIFY_THROWS_WITH(j::evaluateConfigFromJson({{"task", "regression"}}), "task must be");
    HH_VERIFY_THROWS_WITH(j::evaluateConfigFromJson({{"feature_maps", {"hedgehog", "nope"}}}), "feature_maps");
    HH_VERIFY_THROWS_WITH(j::evaluateConfigFromJson({{"feature_maps", {"trained"}}}), "needs a converted model");
    HH_VERIFY_THROWS_WITH(j::evaluateConfigFromJson({{"feature_maps", {"elu", "elu"}}}), "listed twice");
    HH_VERIFY_THROWS_WITH(j::evaluateConfigFromJson({{"batch_size", 0}}), "batch_size");
    // Bad models are configuration errors, thrown before a run file exists.
    hh::test::TempDir dir("evaluate_bad");
    auto bad = smallConfig(dir);
    bad.converted = dir.file("missing.safetensors");
    j::JobObserver observer;
    HH_VERIFY_THROWS_WITH(j::runEvaluate(bad, observer), "neither a folder nor an adapters file");
    QVERIFY(!std::filesystem::exists(bad.runDir + "/run.h5"));
  }
};

HH_TEST_SUITE(TestEvaluateJob, "engine.jobs.evaluate", &TestEvaluateJob::initTestCase,
              &TestEvaluateJob::perplexityAndTable, &TestEvaluateJob::wholeCorpusHeldOutAndExpTRows,
              &TestEvaluateJob::softmaxEntropyIsTheTeachersWhateverTheOrder,
              &TestEvaluateJob::trainedAdaptersBeatUntrainedHedgehog, &TestEvaluateJob::classificationAccuracy,
              &TestEvaluateJob::trainedRowCoversItsLinearLayers, &TestEvaluateJob::cancelStopsWithinASecond,
              &TestEvaluateJob::configJsonRoundTripAndErrors)

}  // namespace test_evaluate_job

#if HH_HAVE_QTEST
#include "test_evaluate_job.moc"
#endif
