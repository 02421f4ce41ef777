// engine.jobs.recall_probe: the passkey and multi-query recall prompts (recall_probe.h) and their
// scoring:
//   - passkey: the needle (random tokens, distinct, past the special ids) is hidden once before
//     the tail and repeated as the tail; every answer position's next token is the needle token
//     shown at its target, and the target lies inside the hidden needle;
//   - mqar: every query position holds a key shown earlier, its next token is that key's value,
//     and the target is where the value was shown (right after the key);
//   - scoring on the tiny GPT-2 fixture: accuracies in [0, 1], equal for teacher and converted
//     when nothing is converted; the needle mass of each head is a weight in [0, 1]; converted
//     layers give their own (linear) weights, different from the teacher's;
//   - bad options (unknown task, too short, longer than the filler or the model) are refused.
#include <torch/types.h>

#include <cmath>

#include "engine/jobs/recall_probe.h"
#include "engine/models/model_io.h"
#include "tests/support/hh_test.h"

namespace test_recall_probe {

namespace {

namespace j = hh::jobs;
namespace m = hh::models;

torch::Tensor filler(int64_t rows, int64_t length) {
  torch::manual_seed(3);
  return torch::randint(3, 1000, {rows, length}, torch::kLong);
}

}  // namespace

class TestRecallProbe : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void passkeyPromptsHideTheNeedleOnce() {
    j::RecallProbeOptions o;
    o.trials = 5;
    const auto p = j::makeRecallPrompts(filler(3, 80), 70, 1000, o, 1);
    QCOMPARE(p.ids.sizes().vec(), (std::vector<int64_t>{5, 70}));
    for (int64_t b = 0; b < 5; ++b) {
      QCOMPARE(p.answerPositions[b].size(), size_t(o.needle - o.cue));
      for (size_t i = 0; i < p.answerPositions[b].size(); ++i) {
        const int64_t pos = p.answerPositions[b][i], target = p.needlePositions[b][i];
        QCOMPARE(p.ids[b][pos + 1].item<int64_t>(), p.ids[b][target].item<int64_t>());
        QVERIFY(target < 70 - o.needle && p.ids[b][target].item<int64_t>() >= o.firstRandomToken);
        QCOMPARE(p.ids[b][pos].item<int64_t>(), p.ids[b][target - 1].item<int64_t>());  // the token before repeats too
      }
    }
  }

  void mqarQueriesAskForValuesShownEarlier() {
    j::RecallProbeOptions o;
    o.task = "mqar";
    o.trials = 4;
    o.pairs = 5;
    const auto p = j::makeRecallPrompts(filler(4, 64), 64, 1000, o, 2);
    for (int64_t b = 0; b < 4; ++b) {
      QCOMPARE(p.answerPositions[b].size(), size_t(5));
      for (size_t i = 0; i < 5; ++i) {
        const int64_t pos = p.answerPositions[b][i], target = p.needlePositions[b][i];
        QVERIFY(target < pos);
        QCOMPARE(p.ids[b][pos].item<int64_t>(), p.ids[b][target - 1].item<int64_t>());      // the key
        QCOMPARE(p.ids[b][pos + 1].item<int64_t>(), p.ids[b][target].item<int64_t>());      // its value
      }
    }
  }

  void scoresTeacherAndConvertedHeads() {
    setenv("HH_NUM_THREADS", "1", 0);
    auto model = m::loadModel(std::string(HH_FIXTURES_DIR) + "/tiny-random-gpt2");
    j::RecallProbeOptions o;
    o.lengths = {32, 48};
    o.trials = 3;
    auto points = j::runRecallProbe(*model, filler(3, 48), o);
    QCOMPARE(points.size(), size_t(2));
    for (const auto& p : points) {
      QVERIFY(p.teacherAccuracy >= 0 && p.teacherAccuracy <= 1);
      QCOMPARE(p.convertedAccuracy, p.teacherAccuracy);  // nothing converted
      QVERIFY(p.teacherMass.values == p.convertedMass.values);
      for (const double v : p.teacherMass.values) QVERIFY(v >= 0 && v <= 1);
    }
    model->setAttentionPlan(m::AttentionPlan::fromSpecs({"softmax", "hedgehog", "hedgehog_window(8)", "softmax", "hedgehog"}));
    points = j::runRecallProbe(*model, filler(3, 48), o);
    const int H = points[0].convertedMass.heads;
    for (const double v : points[0].convertedMass.values) QVERIFY(v >= 0 && v <= 1);
    QCOMPARE(points[0].convertedMass.values[0], points[0].teacherMass.values[0]);        // layer 0 is softmax
    QVERIFY(points[0].convertedMass.values[H] != points[0].teacherMass.values[H]);       // layer 1 is linear
  }

  void badOptionsAreRefused() {
    j::RecallProbeOptions o;
    o.task = "needle";
    HH_VERIFY_THROWS_WITH(j::makeRecallPrompts(filler(1, 64), 64, 1000, o, 0), "passkey or mqar");
    o.task = "passkey";
    HH_VERIFY_THROWS_WITH(j::makeRecallPrompts(filler(1, 64), 12, 1000, o, 0), "too short");
    HH_VERIFY_THROWS_WITH(j::makeRecallPrompts(filler(1, 64), 80, 1000, o, 0), "fewer than 80");
    auto model = m::loadModel(std::string(HH_FIXTURES_DIR) + "/tiny-random-gpt2");
    o.lengths = {model->config().maxPositions + 1};
    HH_VERIFY_THROWS_WITH(j::runRecallProbe(*model, filler(1, o.lengths[0]), o), "past the model's");
  }
};

HH_TEST_SUITE(TestRecallProbe, "engine.jobs.recall_probe", &TestRecallProbe::passkeyPromptsHideTheNeedleOnce,
              &TestRecallProbe::mqarQueriesAskForValuesShownEarlier, &TestRecallProbe::scoresTeacherAndConvertedHeads,
              &TestRecallProbe::badOptionsAreRefused)

}  // namespace test_recall_probe

#if HH_HAVE_QTEST
#include "test_recall_probe.moc"
#endif
