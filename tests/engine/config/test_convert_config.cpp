// engine.config.convert_config: the data a convert project's evaluate stage reads for
// evaluate.task "classification" (engine/config/convert_config.h):
//   - eval_data when the project sets it;
//   - without it, the finetune stage's classification data (path, sequence length, validation
//     fraction, seed), so that the rows evaluated are the rows the finetune split held out (the
//     LM corpus was taken, and failed only after distill and finetune had run);
//   - a project with neither (finetune.task "lm") is refused before any stage runs.
#include <nlohmann/json.hpp>

#include <torch/types.h>

#include "engine/config/convert_config.h"
#include "engine/data/classification_data.h"
#include "engine/tokenizers/tokenizer.h"
#include "tests/support/hh_test.h"

namespace test_convert_config {

namespace {

namespace j = hh::jobs;
namespace d = hh::data;
using J = nlohmann::json;

// The reviewer's project (conv_ok.json): classification finetuning, then evaluation, no eval_data.
J classificationProject() {
  return J::parse(R"({"model": "teacher", "run_dir": "cv", "data": {"corpus": "ten.jsonl", "sequence_length": 16},
    "distill": {"steps": 2, "eval_every": 1},
    "finetune": {"steps": 1, "task": "classification",
                 "classification": {"path": "utf8.tsv", "sequence_length": 24, "validation_fraction": 0.3, "seed": 7}},
    "evaluate": {"task": "classification"}})");
}

// The held-out rows of `options` over `corpus`, as [N, T] ids.
at::Tensor heldOut(const d::LabelledCorpus& corpus, const hh::tok::Tokenizer& tokenizer,
                   const d::ClassificationOptions& options) {
  return d::buildClassificationDataset(corpus, tokenizer, options).validation.ids;
}

}  // namespace

class TestConvertConfig : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void classificationEvaluatesTheFinetuneSplit() {
    const auto c = j::convertConfigFromJson(classificationProject());
    const auto e = j::evaluateStage(c);
    QCOMPARE(e.data.corpus, std::string("utf8.tsv"));
    QCOMPARE(e.data.sequenceLength, int64_t(24));
    QCOMPARE(e.data.validationFraction, 0.3);
    QCOMPARE(e.data.seed, uint64_t(7));
    QCOMPARE(e.data.maxValidationSequences, int64_t(0));  // the whole held-out split (max_sequences caps it)
    // eval_data, when set, is what the stage reads.
    auto json = classificationProject();
    json["eval_data"] = {{"corpus", "other.tsv"}, {"validation_fraction", 1.0}};
    QCOMPARE(j::evaluateStage(j::convertConfigFromJson(json)).data.corpus, std::string("other.tsv"));
    // Task lm keeps the LM corpus.
    json = classificationProject();
    json["finetune"]["task"] = "lm";
    json["evaluate"]["task"] = "lm";
    QCOMPARE(j::evaluateStage(j::convertConfigFromJson(json)).data.corpus, std::string("ten.jsonl"));
  }

  // With max_examples the finetune split holds out a share of that many examples: the evaluate
  // stage's rows are the same ones (the evaluate job reads the data as below, then keeps the first
  // max_validation_sequences rows).
  void heldOutRowsAreTheFinetuneSplits() {
    d::LabelledCorpus corpus;
    for (int i = 0; i < 40; ++i) corpus.examples.push_back({"example number " + std::to_string(i), i % 2});
    const auto tokenizer = hh::tok::loadTokenizer(std::string(HH_FIXTURES_DIR) + "/tiny-random-gpt2");
    for (const int64_t maxExamples : {int64_t(0), int64_t(10), int64_t(100)}) {
      auto json = classificationProject();
      json["finetune"]["classification"]["max_examples"] = maxExamples;
      const auto c = j::convertConfigFromJson(json);
      const auto& f = c.finetune.classification;
      const auto e = j::evaluateStage(c).data;
      d::ClassificationOptions finetune{f.sequenceLength, f.validationFraction, f.seed, f.maxExamples};
      d::ClassificationOptions evaluate{e.sequenceLength, e.validationFraction, e.seed, 0};
      const auto expected = heldOut(corpus, *tokenizer, finetune);
      auto got = heldOut(corpus, *tokenizer, evaluate);
      if (e.maxValidationSequences > 0 && got.size(0) > e.maxValidationSequences)
        got = got.narrow(0, 0, e.maxValidationSequences);
      QVERIFY2(expected.size(0) > 0, std::to_string(maxExamples).c_str());
      QVERIFY2(torch::equal(got, expected), std::to_string(maxExamples).c_str());
    }
  }

  void classificationWithoutLabelledDataIsRefused() {
    auto json = classificationProject();
    json["finetune"] = {{"steps", 0}};  // finetune task lm: no classification data anywhere
    HH_VERIFY_THROWS_WITH(j::convertConfigFromJson(json), "evaluate.task \"classification\" needs labelled data");
    auto c = j::convertConfigFromJson(classificationProject());
    c.finetune.task = "lm";
    c.finetune.steps = 0;
    HH_VERIFY_THROWS_WITH(j::checkConvertTasks(c), "set \"eval_data\"");  // runConvert's check, before any stage
    c.evalData = j::DataConfig{};
    c.evalData->corpus = "labelled.jsonl";
    j::checkConvertTasks(c);
    QCOMPARE(j::evaluateStage(c).data.corpus, std::string("labelled.jsonl"));
  }
};

HH_TEST_SUITE(TestConvertConfig, "engine.config.convert_config",
              &TestConvertConfig::classificationEvaluatesTheFinetuneSplit,
              &TestConvertConfig::heldOutRowsAreTheFinetuneSplits,
              &TestConvertConfig::classificationWithoutLabelledDataIsRefused)

}  // namespace test_convert_config

#if HH_HAVE_QTEST
#include "test_convert_config.moc"
#endif
