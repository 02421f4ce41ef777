// engine.jobs.finetune: stage 2 on the tiny GPT-2 fixture converted to Hedgehog by the test.
// Full LM finetuning lowers the held-out loss and saves a folder that reloads (plan included) to
// the job's own final loss; LoRA from a teacher folder + adapters file lowers the loss too and
// saves a plain folder (no LoRA tensors) that reloads to the same loss (the drop is small: the
// body and the random tied embedding stay frozen); classification on a
// tiny TSV of two easily separable classes reaches >= 0.9 held-out accuracy (a head is added to
// the LM folder); NaN stops with failed status; cancel marks the run cancelled; config JSON. With
// the teacher_kl loss the held-out KL to the teacher (val_kl) is recorded beside val_loss and
// falls with the training loss; heldOutTeacherKl is the mean over positions whatever the batches.

#include <torch/types.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "engine/io/safetensors.h"
#include "engine/jobs/finetune_job.h"
#include "engine/jobs/job_support.h"
#include "engine/jobs/training_support.h"
#include "engine/models/model_io.h"
#include "engine/runs/run_reader.h"
#include "tests/support/test_device.h"
#include "tests/support/temp_dir.h"
#include "tests/engine/jobs/jobs_test_support.h"
#include "tests/support/hh_test.h"

namespace test_finetune_job {

namespace {

namespace j = hh::jobs;
namespace m = hh::models;
const std::string kModel = std::string(HH_FIXTURES_DIR) + "/tiny-random-gpt2";

// Two classes with disjoint vocabularies, 160 rows.
std::string writeTsv(const hh::test::TempDir& dir) {
  const auto path = dir.file("topics.tsv");
  std::ofstream out(path);
  out << "label\ttext\n";
  const char* sport[] = {"goal", "match", "team", "score", "player", "ball", "coach", "win"};
  const char* food[] = {"bake", "oven", "flour", "sugar", "recipe", "soup", "salt", "cook"};
  for (int i = 0; i < 160; ++i) {
    const bool isSport = i % 2 == 0;
    out << (isSport ? "sport" : "food") << "\t";
    for (int w = 0; w < 5; ++w) out << (isSport ? sport : food)[(i * 5 + w * 3 + i / 7) % 8] << " ";
    out << "\n";
  }
  return path;
}

// The fixture with every layer converted to Hedgehog, saved as a folder (and its adapters file).
std::string convertedFolder(const hh::test::TempDir& dir, std::string* adaptersFile = nullptr) {
  auto model = m::loadModel(kModel);
  hh::attn::LinearAttentionConfig linear;
  linear.featureMap.kind = hh::attn::FeatureMapKind::Hedgehog;
  model->setAttentionPlan(m::AttentionPlan::uniform(model->layerCount(), linear));
  m::saveModel(*model, dir.file("converted"), kModel);
  if (adaptersFile) {
    *adaptersFile = dir.file("adapters.safetensors");
    m::saveAdapters(*model, *adaptersFile);
  }
  return dir.file("converted");
}

j::FinetuneConfig lmConfig(const hh::test::TempDir& dir) {
  j::FinetuneConfig c;
  c.device = hh::test::testDevice();
  c.dtype = hh::test::testDtype();
  c.runDir = dir.file("run");
  c.outputDir = dir.file("finetuned");
  c.lr = 3e-3;
  c.warmupSteps = 2;
  c.steps = 16;
  c.batchSize = 8;
  c.evalEvery = 8;
  c.evalBatches = 0;
  c.data.corpus = hh::test::writeSentenceCorpus(dir, 8, 40);
  c.data.sequenceLength = 32;
  c.data.validationFraction = 0.25;
  return c;
}

double reloadedLoss(const j::FinetuneConfig& c, const std::string& folder) {
  auto model = m::loadModel(folder);
  const auto data = j::loadLmData(c.data, *hh::tok::loadTokenizer(folder));
  j::JobObserver quiet;
  return j::heldOutLmLoss(*model, data.validation, c.batchSize, c.evalBatches, quiet);
}

using hh::test::StepObserver;

// stories260K (a real model: converted, it is far from its teacher) + untrained Hedgehog
// adapters, every weight finetuned towards the teacher's next-token distribution in `dtype`: the
// KL of the first step is large and falls. (The tiny random GPT-2's attention is nearly uniform:
// its converted model starts 5e-8 from the teacher, too close to test this.)
void teacherKlApproaches(const std::string& dtype) {
  hh::test::TempDir dir("finetune_teacher_kl_" + dtype);
  const std::string stories = std::string(HH_FIXTURES_DIR) + "/stories260K";
  auto c = lmConfig(dir);
  {
    auto model = m::loadModel(stories);
    hh::attn::LinearAttentionConfig linear;
    linear.featureMap.kind = hh::attn::FeatureMapKind::HedgehogSoftmax;
    model->setAttentionPlan(m::AttentionPlan::uniform(model->layerCount(), linear));
    c.adapters = dir.file("stories_adapters.safetensors");
    m::saveAdapters(*model, c.adapters);
  }
  c.modelDir = stories;
  c.lr = 1e-3;
  c.loss = "teacher_kl";
  c.dtype = dtype;
  StepObserver observer;
  const auto r = j::runFinetune(c, observer);
  QVERIFY2(r.status == j::JobStatus::Completed, r.message.c_str());
  const auto losses = hh::runs::RunReader::open(r.runFile).scalars("loss").values;
  qInfo("teacher KL (%s, %s): step 1 %.4g -> step %zu %.4g", dtype.c_str(), r.device.c_str(), losses.front(),
        losses.size(), losses.back());
  QVERIFY(losses.front() > 0.1);
  QVERIFY(losses.back() < 0.7 * losses.front());
  // The held-out counterpart of that loss (val_kl, beside the next-token val_loss) falls too.
  const auto heldOut = hh::runs::RunReader::open(r.runFile).scalars("val_kl");
  QCOMPARE(heldOut.steps.front(), int64_t(0));
  qInfo("held-out teacher KL: step 0 %.4g -> step %lld %.4g", heldOut.values.front(), (long long)heldOut.steps.back(),
        heldOut.values.back());
  QVERIFY(heldOut.values.front() > 0.1);
  QVERIFY(heldOut.values.back() < 0.7 * heldOut.values.front());
}

}  // namespace

class TestFinetuneJob : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void initTestCase() {
    HH_SKIP_UNLESS_TEST_DEVICE();  // HH_TEST_DEVICE: the jobs below run there
    setenv("HH_NUM_THREADS", "1", 0);
  }

  void fullLmFinetuneLowersLoss() {
    hh::test::TempDir dir("finetune_full");
    auto c = lmConfig(dir);
    c.modelDir = convertedFolder(dir);
    StepObserver observer;
    const auto r = j::runFinetune(c, observer);
    QVERIFY2(r.status == j::JobStatus::Completed, r.message.c_str());
    qInfo("full: val_loss %.3f -> %.3f, perplexity %.1f -> %.1f (%.1f s)", r.initialValidationLoss, r.finalValidationLoss,
          r.initialMetric, r.finalMetric, r.seconds);
    QVERIFY(r.initialValidationLoss - r.finalValidationLoss > 1.0);
    QVERIFY(std::abs(r.finalMetric - std::exp(r.finalValidationLoss)) < 1e-6 * r.finalMetric);
    auto run = hh::runs::RunReader::open(r.runFile);
    QVERIFY(run.status() == hh::runs::RunStatus::Completed);
    QCOMPARE(run.scalarRows("loss"), int64_t(16));
    QCOMPARE(run.scalarRows("perplexity"), int64_t(3));
    QCOMPARE(m::loadModel(r.modelDir)->config().plan.linearLayerCount(), int64_t(5));
    QVERIFY(std::abs(reloadedLoss(c, r.modelDir) - r.finalValidationLoss) < 1e-4);
  }

  void loraFromTeacherAndAdaptersSavesAPlainModel() {
    hh::test::TempDir dir("finetune_lora");
    auto c = lmConfig(dir);
    convertedFolder(dir, &c.adapters);
    c.modelDir = kModel;  // teacher + adapters file
    c.mode = "lora";
    c.loraRank = 4;
    c.loraAlpha = 8;
    c.lr = 1e-2;
    StepObserver observer;
    const auto r = j::runFinetune(c, observer);
    QVERIFY2(r.status == j::JobStatus::Completed, r.message.c_str());
    qInfo("lora: val_loss %.3f -> %.3f with %lld trainable parameters (%.1f s)", r.initialValidationLoss,
          r.finalValidationLoss, (long long)r.trainableParameters, r.seconds);
    // The fixture's frozen random tied embedding (std 0.02, C = 32) bounds its logits to about
    // +-0.6, so with the body frozen the loss can only move a little below ln(1000); full
    // finetuning (above) moves wte and drops far more.
    QVERIFY(r.initialValidationLoss - r.finalValidationLoss > 0.05);
    QVERIFY(r.trainableParameters < m::loadModel(kModel)->parameterCount() / 2);
    for (const auto& name : hh::io::ShardedSafetensors::open(r.modelDir + "/model.safetensors").names())
      QVERIFY2(name.find("lora") == std::string::npos, name.c_str());
    QCOMPARE(m::loadModel(r.modelDir)->config().plan.linearLayerCount(), int64_t(5));
    QVERIFY(std::abs(reloadedLoss(c, r.modelDir) - r.finalValidationLoss) < 1e-4);
  }

  void classificationReachesHighAccuracy() {
    hh::test::TempDir dir("finetune_cls");
    j::FinetuneConfig c;
    c.device = hh::test::testDevice();
    c.dtype = hh::test::testDtype();
    c.modelDir = convertedFolder(dir);
    c.runDir = dir.file("run");
    c.task = "classification";
    c.classification.path = writeTsv(dir);
    c.classification.sequenceLength = 16;
    c.classification.validationFraction = 0.25;
    c.lr = 3e-3;
    c.warmupSteps = 2;
    c.steps = 30;
    c.batchSize = 16;
    c.evalEvery = 10;
    c.evalBatches = 0;
    StepObserver observer;
    const auto r = j::runFinetune(c, observer);
    QVERIFY2(r.status == j::JobStatus::Completed, r.message.c_str());
    qInfo("classification: accuracy %.3f -> %.3f, val_loss %.3f -> %.3f (%.1f s)", r.initialMetric, r.finalMetric,
          r.initialValidationLoss, r.finalValidationLoss, r.seconds);
    QVERIFY(r.finalMetric >= 0.9);
    QCOMPARE(hh::runs::RunReader::open(r.runFile).scalarRows("accuracy"), int64_t(4));
    auto saved = m::loadModel(r.modelDir);
    QVERIFY(saved->config().head == m::HeadKind::SequenceClassification);
    QCOMPARE(saved->config().numLabels, int64_t(2));
  }

  void nanStopsAndCancelMarksRun() {
    hh::test::TempDir dir("finetune_nan");
    auto c = lmConfig(dir);
    c.modelDir = convertedFolder(dir);
    c.debugNanAtStep = 3;
    StepObserver observer;
    const auto r = j::runFinetune(c, observer);
    QVERIFY(r.status == j::JobStatus::Failed);
    QVERIFY2(r.message.find("NaN") != std::string::npos, r.message.c_str());
    QCOMPARE(r.steps, int64_t(3));
    QVERIFY(hh::runs::RunReader::open(r.runFile).status() == hh::runs::RunStatus::Failed);
    for (const auto& p : m::loadModel(r.modelDir)->parameters()) QVERIFY(torch::isfinite(p).all().item<bool>());

    c.debugNanAtStep = -1;
    observer.cancelAt = 2;
    const auto cancelled = j::runFinetune(c, observer);
    QVERIFY(cancelled.status == j::JobStatus::Cancelled);
    QCOMPARE(cancelled.steps, int64_t(2));
    QVERIFY(hh::runs::RunReader::open(cancelled.runFile).status() == hh::runs::RunStatus::Cancelled);
  }

  void teacherKlLossByHand() {
    // sum_v p_t (log p_t - log p_s), mean over positions, against a float64 loop.
    torch::manual_seed(11);
    const auto student = torch::randn({2, 3, 7}), teacher = 2 * torch::randn({2, 3, 7});
    const auto pt = torch::softmax(teacher.to(torch::kDouble), -1), ps = torch::softmax(student.to(torch::kDouble), -1);
    double sum = 0;
    for (int b = 0; b < 2; ++b)
      for (int t = 0; t < 3; ++t)
        for (int v = 0; v < 7; ++v) {
          const double p = pt[b][t][v].item<double>(), q = ps[b][t][v].item<double>();
          sum += p * (std::log(p) - std::log(q));
        }
    const double loss = j::teacherKlLoss(student, teacher).item<double>();
    qInfo("teacher KL %.9f, by hand %.9f", loss, sum / 6);
    QVERIFY(std::abs(loss - sum / 6) < 1e-6);
    QVERIFY(std::abs(j::teacherKlLoss(teacher, teacher).item<double>()) < 1e-7);
  }

  // heldOutTeacherKl is the mean over every position of the held-out rows, whatever the batches:
  // 7 rows in batches of 3 (3, 3, 1) against one forward of all 7, and one batch of 3 against
  // those 3 rows; stories260K with untrained Hedgehog maps against itself as softmax.
  void heldOutTeacherKlIsTheMeanOverPositions() {
    const std::string stories = std::string(HH_FIXTURES_DIR) + "/stories260K";
    auto teacher = m::loadModel(stories), student = m::loadModel(stories);
    hh::attn::LinearAttentionConfig linear;
    linear.featureMap.kind = hh::attn::FeatureMapKind::Hedgehog;
    student->setAttentionPlan(m::AttentionPlan::uniform(student->layerCount(), linear));
    torch::manual_seed(3);
    const auto rows = torch::randint(1, 512, {7, 24}, torch::kLong);
    at::NoGradGuard noGrad;
    const auto whole = [&](const torch::Tensor& ids) {
      return j::teacherKlLoss(student->forward(ids).logits, teacher->forward(ids).logits).item<double>();
    };
    j::JobObserver quiet;
    const double all = j::heldOutTeacherKl(*student, *teacher, rows, 3, 0, quiet);
    const double first = j::heldOutTeacherKl(*student, *teacher, rows, 3, 1, quiet);
    qInfo("held-out teacher KL %.7g (whole %.7g), first batch %.7g (whole %.7g)", all, whole(rows), first,
          whole(rows.narrow(0, 0, 3)));
    QVERIFY(all > 0.1);
    QVERIFY(std::abs(all - whole(rows)) < 1e-5 * all);
    QVERIFY(std::abs(first - whole(rows.narrow(0, 0, 3))) < 1e-5 * first);
    QVERIFY(std::abs(first - all) > 1e-3 * all);  // the batch limit is honoured
  }

  void teacherKlFinetuneApproachesTheTeacher() {
    teacherKlApproaches("float32");
    // The teacher alone as the student (no adapters, every layer softmax) starts at KL 0.
    hh::test::TempDir same("finetune_teacher_kl_same");
    auto t = lmConfig(same);
    t.modelDir = kModel;
    t.loss = "teacher_kl";
    t.steps = 1;
    StepObserver observer;
    const auto first = j::runFinetune(t, observer);
    QVERIFY2(first.status == j::JobStatus::Completed, first.message.c_str());
    QVERIFY(std::abs(hh::runs::RunReader::open(first.runFile).scalars("loss").values.at(0)) < 1e-6);
    QVERIFY(std::abs(hh::runs::RunReader::open(first.runFile).scalars("val_kl").values.at(0)) < 1e-6);
    HH_VERIFY_THROWS_WITH(j::finetuneConfigFromJson({{"loss", "mse"}}), "loss must be");
    HH_VERIFY_THROWS_WITH(j::finetuneConfigFromJson({{"loss", "teacher_kl"}, {"task", "classification"}}), "is for task");
  }

  // Mixed precision: the teacher in bf16 (half its memory), the student's weights (all train) in
  // fp32 with bf16 activations; the KL falls as in fp32.
  void teacherKlFinetuneApproachesTheTeacherInBf16() { teacherKlApproaches("bfloat16"); }

  void configJsonRoundTripAndErrors() {
    j::FinetuneConfig c;
    c.device = hh::test::testDevice();
    c.dtype = hh::test::testDtype();
    c.mode = "lora";
    c.loraRank = 16;
    c.task = "classification";
    c.classification.path = "x.tsv";
    c.data.sequenceLength = 64;
    const auto json = j::toJson(c);
    const auto back = j::finetuneConfigFromJson(json);
    QCOMPARE(back.mode, std::string("lora"));
    QCOMPARE(back.loraRank, int64_t(16));
    QCOMPARE(back.classification.path, std::string("x.tsv"));
    QCOMPARE(back.data.sequenceLength, int64_t(64));
    QCOMPARE(j::toJson(back).dump(), json.dump());
    HH_VERIFY_THROWS_WITH(j::finetuneConfigFromJson({{"rank", 3}}), "unknown key \"rank\"");
    HH_VERIFY_THROWS_WITH(j::finetuneConfigFromJson({{"classification", {{"pth", "a"}}}}), "unknown key \"pth\"");
    HH_VERIFY_THROWS_WITH(j::finetuneConfigFromJson({{"mode", "qlora"}}), "mode must be");
    HH_VERIFY_THROWS_WITH(j::finetuneConfigFromJson({{"task", "qa"}}), "task must be");
    HH_VERIFY_THROWS_WITH(j::finetuneConfigFromJson({{"lora_rank", "big"}}), "\"lora_rank\" has the wrong type");
  }
};

HH_TEST_SUITE(TestFinetuneJob, "engine.jobs.finetune", &TestFinetuneJob::initTestCase, &TestFinetuneJob::fullLmFinetuneLowersLoss, &TestFinetuneJob::loraFromTeacherAndAdaptersSavesAPlainModel, &TestFinetuneJob::classificationReachesHighAccuracy, &TestFinetuneJob::nanStopsAndCancelMarksRun, &TestFinetuneJob::teacherKlLossByHand, &TestFinetuneJob::heldOutTeacherKlIsTheMeanOverPositions, &TestFinetuneJob::teacherKlFinetuneApproachesTheTeacher, &TestFinetuneJob::teacherKlFinetuneApproachesTheTeacherInBf16, &TestFinetuneJob::configJsonRoundTripAndErrors)

}  // namespace test_finetune_job

#if HH_HAVE_QTEST
#include "test_finetune_job.moc"
#endif
