// engine.config.finetune_config: the finetune job's classification data block is checked when the
// config is read, naming the block and the key (in a convert project too, before any stage runs):
// a validation_fraction outside (0, 1) (the job needs a held-out split and a training split) and a
// negative max_examples (which read as "all"); the values in range are kept.
#include <nlohmann/json.hpp>

#include "engine/config/convert_config.h"
#include "engine/config/finetune_config.h"
#include "tests/support/hh_test.h"

namespace test_finetune_config {

namespace {

namespace j = hh::jobs;
using J = nlohmann::json;

J withClassification(const J& block) {
  return J{{"task", "classification"}, {"classification", block}};
}

}  // namespace

class TestFinetuneConfig : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void classificationBlockIsCheckedWhenRead() {
    const char* where = "finetune config \"classification\": validation_fraction";
    for (const double bad : {1.0, -0.5, 0.0, 1.5})
      HH_VERIFY_THROWS_WITH(j::finetuneConfigFromJson(withClassification({{"validation_fraction", bad}})), where);
    HH_VERIFY_THROWS_WITH(j::finetuneConfigFromJson(withClassification({{"max_examples", -5}})),
                          "finetune config \"classification\": max_examples must be >= 0");
    const auto ok = j::finetuneConfigFromJson(withClassification({{"validation_fraction", 0.3}, {"max_examples", 40}}));
    QCOMPARE(ok.classification.validationFraction, 0.3);
    QCOMPARE(ok.classification.maxExamples, int64_t(40));
    QCOMPARE(j::finetuneConfigFromJson(withClassification({{"max_examples", 0}})).classification.maxExamples,
             int64_t(0));
  }

  // In a convert project the same block failed only when the finetune stage ran, after distill.
  void aConvertProjectIsRefusedBeforeAnyStage() {
    J convert{{"finetune", withClassification({{"validation_fraction", 1.0}})},
              {"evaluate", {{"task", "classification"}}}};
    HH_VERIFY_THROWS_WITH(j::convertConfigFromJson(convert), "\"classification\": validation_fraction");
    convert["finetune"]["classification"] = {{"max_examples", -5}};
    HH_VERIFY_THROWS_WITH(j::convertConfigFromJson(convert), "max_examples");
  }
};

HH_TEST_SUITE(TestFinetuneConfig, "engine.config.finetune_config",
              &TestFinetuneConfig::classificationBlockIsCheckedWhenRead,
              &TestFinetuneConfig::aConvertProjectIsRefusedBeforeAnyStage)

}  // namespace test_finetune_config

#if HH_HAVE_QTEST
#include "test_finetune_config.moc"
#endif
