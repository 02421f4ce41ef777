// engine.jobs.convert: the whole conversion on the tiny GPT-2 fixture. The job runs its four
// stages and writes a "convert" run file that names the stages' files and the export; the
// exported folder reloads to the same logits as the converted model built in memory (float32
// exactly up to summation order, float16 within half-precision rounding); adapters-only export
// re-applies to the teacher; the project JSON round-trips and refuses shared keys inside a stage;
// a cancel inside finetuning marks the job and its run file cancelled; a stage that throws fails
// the conversion there, its own "evaluate: " prefix not doubled; a finetune task other than the
// evaluation's, or a teacher without the evaluation task's head, is refused before any stage; a
// stage key the conversion sets is refused with advice that names only keys that exist.

#include <torch/types.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>

#include "engine/jobs/convert_job.h"
#include "engine/models/model_io.h"
#include "engine/runs/run_reader.h"
#include "tests/engine/jobs/jobs_test_support.h"
#include "tests/support/test_device.h"
#include "tests/support/hh_test.h"

namespace test_convert_job {

namespace {

namespace j = hh::jobs;
namespace m = hh::models;
namespace fs = std::filesystem;
const std::string kModel = std::string(HH_FIXTURES_DIR) + "/tiny-random-gpt2";

j::ConvertConfig smallConvert(const hh::test::TempDir& dir) {
  j::ConvertConfig c = hh::test::tinyConvertConfig(dir);
  c.distill.steps = 6;
  c.distill.evalEvery = 3;
  c.finetune.steps = 4;
  c.finetune.evalEvery = 2;
  c.evaluate.featureMaps = {"hedgehog", "t2r", "trained"};
  c.evaluate.tableSequences = 4;
  return c;
}

// Cancels at the first progress report of the named stage.
class CancelInStage : public j::JobObserver {
 public:
  explicit CancelInStage(std::string stage) : stage_(std::move(stage)) {}
  void progress(int64_t, int64_t, const std::string& phase) override {
    if (phase.find(stage_) != std::string::npos) cancel_ = true;
  }
  bool cancelled() override { return cancel_; }

 private:
  std::string stage_;
  bool cancel_ = false;
};

torch::Tensor logitsOf(m::TransformerModel& model, const torch::Tensor& ids) {
  at::NoGradGuard noGrad;
  return model.forward(ids).logits;
}

}  // namespace

class TestConvertJob : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void initTestCase() {
    HH_SKIP_UNLESS_TEST_DEVICE();  // HH_TEST_DEVICE: the jobs below run there
    setenv("HH_NUM_THREADS", "1", 0);
  }

  void runsEveryStageAndExports() {
    hh::test::TempDir dir("convert_ok");
    const auto config = smallConvert(dir);
    j::JobObserver quiet;
    const auto r = j::runConvert(config, quiet);
    QCOMPARE(std::string(j::toString(r.status)), std::string("completed"));
    QCOMPARE(r.distill.steps, int64_t(6));
    QCOMPARE(r.finetune.steps, int64_t(4));
    QVERIFY(std::isfinite(r.evaluate.perplexityOriginal) && std::isfinite(r.evaluate.perplexityConverted));
    QCOMPARE(r.evaluate.featureMaps.size(), size_t(3));
    // Every stage, and the convert job's own label, say where and in what they computed.
    QCOMPARE(r.device, r.distill.device);
    QCOMPARE(r.finetune.device, r.distill.device);
    QCOMPARE(r.device.find(", bfloat16") != std::string::npos, hh::test::testInBf16());
    for (const char* stage : {"distill", "finetune", "evaluate"}) QVERIFY(fs::exists(config.runDir + "/" + stage + "/run.h5"));
    QCOMPARE(r.exportPath, config.runDir + "/model");
    QVERIFY(fs::exists(r.exportPath + "/config.json") && fs::exists(r.exportPath + "/model.safetensors"));
    QVERIFY(fs::exists(r.exportPath + "/vocab.json"));  // tokenizer copied from the teacher

    auto run = hh::runs::RunReader::open(r.runFile);
    QCOMPARE(run.header().kind, std::string("convert"));
    QCOMPARE(std::string(hh::runs::statusName(run.status())), std::string("completed"));
    QCOMPARE(run.exportPath(), fs::absolute(r.exportPath).string());
    const auto klUntrained = run.scalars("kl_untrained");
    QCOMPARE(klUntrained.values.size(), size_t(1));
    QCOMPARE(klUntrained.values[0], r.distill.initialKl);
    QCOMPARE(run.scalars("perplexity_converted").values.at(0), r.evaluate.perplexityConverted);
    bool namesStages = false;
    for (const auto& line : run.logLines()) namesStages = namesStages || line.text.find("finetune/run.h5") != std::string::npos;
    QVERIFY(namesStages);
    // The exported folder is the finetuned model: same held-out perplexity as the evaluation saw.
    auto exported = m::loadModel(r.exportPath);
    auto finetuned = m::loadModel(r.finetune.modelDir);
    const auto ids = torch::randint(0, exported->config().vocabSize, {2, 24}, torch::kLong);
    QCOMPARE(logitsOf(*exported, ids).sub(logitsOf(*finetuned, ids)).abs().max().item<double>(), 0.0);
  }

  void exportedFolderReloadsToTheInMemoryModel() {
    hh::test::TempDir dir("convert_export");
    auto config = smallConvert(dir);
    config.finetune.steps = 0;  // the converted model is teacher + adapters
    config.exportOptions.dtype = "float32";
    j::JobObserver quiet;
    const auto r = j::runConvert(config, quiet);
    QCOMPARE(std::string(j::toString(r.status)), std::string("completed"));
    QCOMPARE(r.finetune.steps, int64_t(0));

    auto inMemory = m::loadModel(kModel);
    m::loadAdaptersFile(*inMemory, r.distill.adaptersFile);
    const auto ids = torch::randint(0, inMemory->config().vocabSize, {2, 40}, torch::kLong);
    const auto expected = logitsOf(*inMemory, ids);  // [2, 40, V]
    auto reloaded = m::loadModel(r.exportPath);
    QVERIFY(reloaded->config().plan.layers.at(0).linear);
    const double scale = expected.abs().max().item<double>();
    const double diff32 = logitsOf(*reloaded, ids).sub(expected).abs().max().item<double>();
    qInfo("float32 export: max |logit diff| %.3g (max |logit| %.3g)", diff32, scale);
    QVERIFY(diff32 <= 1e-6 * scale);

    j::ExportConfig half;
    half.dtype = "float16";
    const auto halfDir = j::exportConverted(kModel, r.distill.adaptersFile, dir.file("half"), half);
    auto reloadedHalf = m::loadModel(halfDir);  // weights come back as float32
    const double diff16 = logitsOf(*reloadedHalf, ids).sub(expected).abs().max().item<double>();
    qInfo("float16 export: max |logit diff| %.3g", diff16);
    QVERIFY(diff16 <= 1e-2 * scale);
    QVERIFY(diff16 > 0);  // it really was rounded

    j::ExportConfig adaptersOnly;
    adaptersOnly.adaptersOnly = true;
    const auto adapters = j::exportConverted(kModel, r.distill.adaptersFile, dir.file("adapters"), adaptersOnly);
    auto teacher = m::loadModel(kModel);
    m::loadAdaptersFile(*teacher, adapters);
    QCOMPARE(logitsOf(*teacher, ids).sub(expected).abs().max().item<double>(), 0.0);
  }

  void projectJsonRoundTripsAndRefusesSharedKeysInStages() {
    j::ConvertConfig c;
    c.device = hh::test::testDevice();
    c.dtype = hh::test::testDtype();
    c.modelDir = "teacher";
    c.featureMap = "t2r";
    c.layers = {1};
    c.distill.steps = 17;
    c.finetune.mode = "lora";
    c.exportOptions.dtype = "bfloat16";
    c.evaluate.featureMaps = {"hedgehog", "trained"};  // "trained" is valid: the conversion makes the model
    const auto json = j::toJson(c);
    QVERIFY(!json.at("distill").contains("model") && !json.at("distill").contains("feature_map"));
    const auto back = j::convertConfigFromJson(json);
    QCOMPARE(j::toJson(back).dump(), json.dump());
    QCOMPARE(j::distillStage(back).featureMap, std::string("t2r"));
    QCOMPARE(j::distillStage(back).layers, std::vector<int64_t>{1});
    QCOMPARE(j::finetuneStage(back).adapters, std::string("/distill/adapters.safetensors"));

    auto bad = json;
    bad["distill"]["feature_map"] = "elu";
    HH_VERIFY_THROWS_WITH(j::convertConfigFromJson(bad), "distill.feature_map");
    bad = json;
    bad["export"]["dtype"] = "int8";
    HH_VERIFY_THROWS_WITH(j::convertConfigFromJson(bad), "export.dtype");
    bad = json;
    bad["finetune"]["stepz"] = 3;
    HH_VERIFY_THROWS_WITH(j::convertConfigFromJson(bad), "stepz");
  }

  void evalDataIsTheEvaluateStagesOwn() {
    j::ConvertConfig c;
    c.device = hh::test::testDevice();
    c.dtype = hh::test::testDtype();
    c.data.corpus = "generated.jsonl";
    QVERIFY(j::toJson(c).at("eval_data").is_null());
    QCOMPARE(j::evaluateStage(j::convertConfigFromJson(j::toJson(c))).data.corpus, std::string("generated.jsonl"));
    j::DataConfig real;
    real.corpus = "real.jsonl";
    real.validationFraction = 1.0;
    c.evalData = real;
    const auto back = j::convertConfigFromJson(j::toJson(c));
    QCOMPARE(j::toJson(back).dump(), j::toJson(c).dump());
    QCOMPARE(j::evaluateStage(back).data.corpus, std::string("real.jsonl"));
    QCOMPARE(j::evaluateStage(back).data.validationFraction, 1.0);
    QCOMPARE(j::distillStage(back).data.corpus, std::string("generated.jsonl"));
    QCOMPARE(j::finetuneStage(back).data.corpus, std::string("generated.jsonl"));
    auto bad = j::toJson(c);
    bad["eval_data"]["corpuz"] = "x";
    HH_VERIFY_THROWS_WITH(j::convertConfigFromJson(bad), "corpuz");
  }

  void cancelInFinetuningStopsTheJob() {
    hh::test::TempDir dir("convert_cancel");
    const auto config = smallConvert(dir);
    CancelInStage observer("finetune");
    const auto r = j::runConvert(config, observer);
    QCOMPARE(std::string(j::toString(r.status)), std::string("cancelled"));
    QCOMPARE(r.failedStage, std::string("finetune"));
    QVERIFY(r.exportPath.empty());
    QVERIFY(!fs::exists(config.runDir + "/model"));
    auto run = hh::runs::RunReader::open(r.runFile);
    QCOMPARE(std::string(hh::runs::statusName(run.status())), std::string("cancelled"));
  }

  // A stage that throws (the evaluation text is missing): the conversion fails there, says which
  // stage and why in its result and its run file, and exports nothing.
  // An output folder that is, lies inside or holds the teacher's folder is refused before any
  // stage runs (the export at the end would overwrite the teacher).
  void anOutputOverTheTeacherIsRefused() {
    hh::test::TempDir dir("convert_over_teacher");
    auto config = smallConvert(dir);
    const std::string teacher = dir.file("teacher");
    fs::copy(config.modelDir, teacher, fs::copy_options::recursive);
    config.modelDir = teacher;
    j::JobObserver quiet;
    for (const std::string& output : {teacher, teacher + "/", teacher + "/converted", dir.file("")}) {
      config.outputDir = output;
      HH_VERIFY_THROWS_WITH(j::runConvert(config, quiet), "the teacher's folder");
    }
    QVERIFY(!fs::exists(config.runDir + "/run.h5"));  // refused before the run file
    QVERIFY(!fs::exists(teacher + "/converted"));
  }

  void aStageThatThrowsFailsTheConversionThere() {
    hh::test::TempDir dir("convert_fail");
    auto config = smallConvert(dir);
    config.finetune.steps = 0;
    j::DataConfig missing = config.data;
    missing.corpus = dir.file("no-such-text.txt");
    config.evalData = missing;
    j::JobObserver quiet;
    const auto r = j::runConvert(config, quiet);
    QCOMPARE(std::string(j::toString(r.status)), std::string("failed"));
    QCOMPARE(r.failedStage, std::string("evaluate"));
    QVERIFY2(r.message.rfind("evaluate: ", 0) == 0 && r.message.find("no-such-text.txt") != std::string::npos, r.message.c_str());
    QVERIFY(r.exportPath.empty());
    QVERIFY(!fs::exists(config.runDir + "/model"));
    auto run = hh::runs::RunReader::open(r.runFile);
    QCOMPARE(std::string(hh::runs::statusName(run.status())), std::string("failed"));
    QCOMPARE(run.statusMessage(), r.message);
    QCOMPARE(run.scalarRows("kl_distilled"), int64_t(1));  // the stages before it are recorded
  }

  // A finetune task other than the evaluation's (the finetuned model has the wrong head), or an
  // evaluation task the teacher has no head for, is refused before any stage runs: it failed
  // after both training stages, as "evaluate: evaluate: ...".
  void mismatchedTasksAreRefusedBeforeAnyStage() {
    hh::test::TempDir dir("convert_tasks");
    auto config = smallConvert(dir);
    config.finetune.task = "classification";
    auto json = j::toJson(config);
    HH_VERIFY_THROWS_WITH(j::convertConfigFromJson(json), "finetune.task \"classification\" and evaluate.task \"lm\"");
    json["finetune"]["steps"] = 0;  // nothing finetuned: the converted model keeps the teacher's head
    QCOMPARE(j::convertConfigFromJson(json).finetune.task, std::string("classification"));
    j::JobObserver quiet;
    HH_VERIFY_THROWS_WITH(j::runConvert(config, quiet), "evaluate.task");
    config.evaluate.task = "classification";  // the same task, but the GPT-2 teacher has an LM head
    HH_VERIFY_THROWS_WITH(j::runConvert(config, quiet), kModel);
    QVERIFY(!fs::exists(config.runDir + "/run.h5"));
    QVERIFY(!fs::exists(config.runDir + "/distill"));
  }

  // Every key a stage section may not hold says what to do instead; a top-level key it names
  // exists ("finetune.resume" pointed to a top-level "resume" there is none of).
  void ownedKeyMessagesNameKeysThatExist() {
    const auto json = j::toJson(j::ConvertConfig{});
    const std::string topLevel = "at the top level";
    for (const char* section : {"distill", "finetune", "evaluate"}) {
      for (const char* key : {"model", "run_dir", "output_dir", "adapters", "converted", "feature_map", "rule",
                              "layers", "window", "plan", "data", "seed", "resume", "device", "dtype"}) {
        auto bad = json;
        bad[section][key] = json.contains(key) ? json.at(key) : nlohmann::json(true);
        std::string message;
        try {
          j::convertConfigFromJson(bad);
        } catch (const std::invalid_argument& e) {
          message = e.what();
        }
        const std::string where = std::string(section) + "." + key;
        QVERIFY2(message.find("\"" + where + "\"") != std::string::npos, (where + ": " + message).c_str());
        // What the message says to set "at the top level" must be top-level keys.
        const auto advice = message.substr(message.find("; ") + 2);
        const size_t end = advice.find(topLevel);
        for (size_t open = advice.find('"'); end != std::string::npos && open < end;
             open = advice.find('"', advice.find('"', open + 1) + 1)) {
          const auto named = advice.substr(open + 1, advice.find('"', open + 1) - open - 1);
          QVERIFY2(json.contains(named), (where + " names a top-level \"" + named + "\" there is none of").c_str());
        }
      }
    }
  }

  // A stage's own error already starts with its name: the conversion's message keeps one prefix.
  void aStagesOwnPrefixIsNotDoubled() {
    hh::test::TempDir dir("convert_prefix");
    auto config = smallConvert(dir);
    config.distill.steps = 1;
    config.finetune.steps = 0;
    config.evaluate.batchSize = 0;  // "evaluate: batch_size must be positive", from the stage itself
    j::JobObserver quiet;
    const auto r = j::runConvert(config, quiet);
    QCOMPARE(r.failedStage, std::string("evaluate"));
    QVERIFY2(r.message.rfind("evaluate: ", 0) == 0, r.message.c_str());
    QVERIFY2(r.message.find("evaluate: evaluate:") == std::string::npos, r.message.c_str());
  }

  void cancelInDistillRecordsOnlyWhatWasMeasured() {
    // Cancelled at its first training step: the untrained maps' KL was measured, the distilled
    // maps' never was, so the convert run file has a kl_untrained row and no kl_distilled row
    // (it recorded 0 before).
    hh::test::TempDir dir("convert_cancel_distill");
    const auto config = smallConvert(dir);
    CancelInStage observer("distilling");
    const auto r = j::runConvert(config, observer);
    QCOMPARE(std::string(j::toString(r.status)), std::string("cancelled"));
    QCOMPARE(r.failedStage, std::string("distill"));
    QVERIFY(std::isfinite(r.distill.initialKl));
    QVERIFY(std::isnan(r.distill.finalKl));
    auto run = hh::runs::RunReader::open(r.runFile);
    QCOMPARE(run.scalarRows("kl_untrained"), int64_t(1));
    QCOMPARE(run.scalarRows("kl_distilled"), int64_t(0));
    QCOMPARE(run.scalarRows("distill_seconds"), int64_t(1));
  }
};

HH_TEST_SUITE(TestConvertJob, "engine.jobs.convert", &TestConvertJob::initTestCase,
              &TestConvertJob::runsEveryStageAndExports, &TestConvertJob::exportedFolderReloadsToTheInMemoryModel,
              &TestConvertJob::projectJsonRoundTripsAndRefusesSharedKeysInStages,
              &TestConvertJob::evalDataIsTheEvaluateStagesOwn, &TestConvertJob::cancelInFinetuningStopsTheJob,
              &TestConvertJob::aStageThatThrowsFailsTheConversionThere,
              &TestConvertJob::anOutputOverTheTeacherIsRefused,
              &TestConvertJob::cancelInDistillRecordsOnlyWhatWasMeasured,
              &TestConvertJob::mismatchedTasksAreRefusedBeforeAnyStage,
              &TestConvertJob::ownedKeyMessagesNameKeysThatExist, &TestConvertJob::aStagesOwnPrefixIsNotDoubled)

}  // namespace test_convert_job

#if HH_HAVE_QTEST
#include "test_convert_job.moc"
#endif
