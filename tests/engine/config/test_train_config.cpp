// engine.config.train_config: the train job's config as JSON and back (a text run's keys and a
// synthetic task's), and the errors its parser gives: unknown keys, wrong types, bad values, and
// the plan keys it checks before any work (a feature map's name, a spec where a name belongs, a
// rule that a map cannot take).
#include <nlohmann/json.hpp>

#include "engine/config/train_config.h"
#include "tests/support/hh_test.h"
#include "tests/support/test_device.h"

namespace test_train_config {

namespace j = hh::jobs;

class TestTrainConfig : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void configJsonRoundTripAndErrors() {
    j::TrainConfig c;
    c.device = hh::test::testDevice();
    c.dtype = hh::test::testDtype();
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
    HH_VERIFY_THROWS_WITH(j::trainConfigFromJson({{"feature_map", "relu6"}}),
                          "train config: unknown feature map 'relu6'");
    HH_VERIFY_THROWS_WITH(j::trainConfigFromJson({{"feature_map", "exp_t=2"}}), "give exp_t's t as \"exp_t\"");
    HH_VERIFY_THROWS_WITH(j::trainConfigFromJson({{"feature_map", "taylor"}, {"rule", "delta_mao"}}), "delta_mao rule");
    HH_VERIFY_THROWS_WITH(j::trainConfigFromJson({{"feature_map", "softmax"}, {"rule", "fast"}}), "would be ignored");
  }

  void taskConfigJsonRoundTripAndErrors() {
    j::TrainConfig c;
    c.device = hh::test::testDevice();
    c.dtype = hh::test::testDtype();
    c.task.kind = "copy";
    c.task.vocabSize = 14;
    c.task.sequenceLength = 40;
    c.task.trainSamples = 123;
    c.task.testSamples = 45;
    c.task.seed = 9;
    c.task.supervision = "every_recall";
    c.expT = 2.0;
    const auto json = j::toJson(c);
    QCOMPARE(json.at("task").at("kind").get<std::string>(), std::string("copy"));
    const auto back = j::trainConfigFromJson(json);
    QCOMPARE(back.task.kind, std::string("copy"));
    QCOMPARE(back.task.vocabSize, int64_t(14));
    QCOMPARE(back.task.sequenceLength, int64_t(40));
    QCOMPARE(back.task.trainSamples, int64_t(123));
    QCOMPARE(back.task.testSamples, int64_t(45));
    QCOMPARE(back.task.seed, uint64_t(9));
    QCOMPARE(back.task.supervision, std::string("every_recall"));
    QCOMPARE(back.expT, 2.0);
    QCOMPARE(j::toJson(back).dump(), json.dump());
    // No task: the corpus path, and the task block is still written out with an empty kind.
    QVERIFY(!j::trainConfigFromJson(j::toJson(j::TrainConfig{})).task.enabled());
    using J = nlohmann::json;
    HH_VERIFY_THROWS_WITH(j::trainConfigFromJson({{"task", {{"knd", "copy"}}}}), "unknown key \"knd\"");
    HH_VERIFY_THROWS_WITH(j::trainConfigFromJson({{"task", 3}}), "\"task\": must be a JSON object");
    HH_VERIFY_THROWS_WITH(j::trainConfigFromJson({{"task", {{"kind", "recall"}}}}), "\"kind\" must be");
    HH_VERIFY_THROWS_WITH(j::trainConfigFromJson({{"task", {{"kind", "associative_recall"}, {"vocab_size", 41}}}}),
                          "\"vocab_size\"");
    HH_VERIFY_THROWS_WITH(j::trainConfigFromJson({{"task", {{"kind", "copy"}, {"sequence_length", 2}}}}),
                          "\"sequence_length\"");
    HH_VERIFY_THROWS_WITH(j::trainConfigFromJson({{"task", {{"kind", "copy"}, {"test_samples", 0}}}}),
                          "\"test_samples\"");
    HH_VERIFY_THROWS_WITH(j::trainConfigFromJson({{"task", {{"kind", "copy"}, {"train_samples", "many"}}}}),
                          "\"train_samples\" has the wrong type");
    HH_VERIFY_THROWS_WITH(j::trainConfigFromJson({{"task", {{"kind", "copy"}}}, {"tokenizer", "gpt2"}}),
                          "\"tokenizer\" must be empty");
    HH_VERIFY_THROWS_WITH(j::trainConfigFromJson({{"exp_t", 0.0}}), "exp_t must be positive");
    // A negative count used to mean "all", the same as 0, so a mistyped --max-train -7 ran on everything.
    HH_VERIFY_THROWS_WITH(j::trainConfigFromJson({{"data", {{"max_train_sequences", -7}}}}), "max_train_sequences");
    HH_VERIFY_THROWS_WITH(j::trainConfigFromJson({{"data", {{"max_validation_sequences", -1}}}}),
                          "max_validation_sequences");
    HH_VERIFY_THROWS_WITH(j::trainConfigFromJson({{"data", {{"validation_fraction", 1.5}}}}), "validation_fraction");
    QCOMPARE(j::trainConfigFromJson({{"data", {{"max_train_sequences", 0}}}}).data.maxTrainSequences, int64_t(0));
    // rule and layers shape a linear map; without one the job ignored them.
    HH_VERIFY_THROWS_WITH(j::trainConfigFromJson({{"rule", "delta"}}), "rule and layers apply to a linear feature_map");
    HH_VERIFY_THROWS_WITH(j::trainConfigFromJson({{"feature_map", "softmax"}, {"layers", {1}}}), "would be ignored");
    QCOMPARE(j::trainConfigFromJson({{"feature_map", "hedgehog"}, {"rule", "delta"}}).rule, std::string("delta"));
    QVERIFY(j::trainConfigFromJson({{"task", J(nullptr)}}).task.kind.empty());
  }
};

HH_TEST_SUITE(TestTrainConfig, "engine.config.train_config", &TestTrainConfig::configJsonRoundTripAndErrors,
              &TestTrainConfig::taskConfigJsonRoundTripAndErrors)

}  // namespace test_train_config

#if HH_HAVE_QTEST
#include "test_train_config.moc"
#endif
