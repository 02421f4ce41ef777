// exp_t's shifted features (engine/attention/stable_exp.h) against the unshifted map's fp64 brute
// force: equal where exp(t x) fits, finite and equal where it overflows fp32, in every form,
// in decoding (whose keys raise the shift as they come), with padded keys, and in the gradient.
#include <torch/torch.h>

#include "engine/attention/linear_attention.h"
#include "engine/attention/reference.h"
#include "engine/attention/stable_exp.h"
#include "tests/support/hh_test.h"

namespace test_stable_exp {

namespace a = hh::attn;

namespace {

constexpr double kT = 2.0;

a::LinearAttention expLayer(a::UpdateRule rule, bool causal, double eps, int64_t heads, int64_t d) {
  a::LinearAttentionConfig c;
  c.featureMap.kind = a::FeatureMapKind::ExpT;
  c.featureMap.expT = kT;
  c.featureMap.heads = heads;
  c.featureMap.headDim = d;
  c.rule.rule = rule;
  c.rule.causal = causal;
  c.rule.eps = eps;
  c.rule.chunkSize = 8;
  return a::LinearAttention(c, heads * d);
}

// The unshifted definition in fp64: exp(t q), exp(t k) into the brute force.
torch::Tensor unshifted(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, const a::RuleInputs& gates,
                        const a::RuleOptions& options) {
  const auto q64 = q.to(torch::kDouble), k64 = k.to(torch::kDouble);
  return a::referenceLinearAttention(torch::exp(kT * q64), torch::exp(kT * k64), v.to(torch::kDouble), gates, options);
}

double relError(const torch::Tensor& got, const torch::Tensor& want) {
  return ((got.to(torch::kDouble) - want).abs().max() / want.abs().max()).item<double>();
}

// Entries of 40 to 55 that grow along the sequence, so that decoding raises the shift often:
// t x from 80 to 110, past fp32's exp range (88) and within the shifted form's (a feature's keys
// may span 87 in t x, stable_exp.h).
torch::Tensor growingInputs(int64_t b, int64_t h, int64_t t, int64_t d) {
  const auto ramp = torch::linspace(0.0, 1.0, t, torch::kDouble).view({1, 1, t, 1});
  return 40.0 + torch::randn({b, h, t, d}, torch::kDouble) * 0.5 + ramp * 15.0 * torch::rand({b, h, 1, d}, torch::kDouble);
}

}  // namespace

class TestStableExp : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  // Moderate inputs in fp64, epsilon 0: every form of the layer equals the unshifted brute force.
  void formsEqualTheUnshiftedMap() {
    torch::manual_seed(1);
    const int64_t b = 2, h = 2, t = 21, d = 4;
    const auto q = torch::randn({b, h, t, d}, torch::kDouble), k = torch::randn({b, h, t, d}, torch::kDouble);
    const auto v = torch::randn({b, h, t, d}, torch::kDouble);
    for (const bool causal : {true, false}) {
      auto layer = expLayer(a::UpdateRule::Additive, causal, 0.0, h, d);
      layer->to(torch::kDouble);
      const auto want = unshifted(q, k, v, {}, layer->config().rule);
      for (const auto form : {a::AttentionForm::Quadratic, a::AttentionForm::Chunked}) {
        const double err = relError(layer->forward(q, k, v, {}, form), want);
        QVERIFY2(err < 1e-12, (a::toString(form) + (causal ? " causal " : " full ") + std::to_string(err)).c_str());
      }
    }
    QVERIFY(a::usesShiftedExp(expLayer(a::UpdateRule::Gated, true, 0.0, h, d)->config()));
    QVERIFY(!a::usesShiftedExp(expLayer(a::UpdateRule::Delta, true, 0.0, h, d)->config()));
  }

  // t x of 80 to 110 in fp32: the unshifted features overflow (the old path's output is not
  // finite); the shifted layer's output is finite and equals the fp64 brute force, weights too.
  void largeInputsStayFiniteAndExact() {
    torch::manual_seed(2);
    const int64_t b = 1, h = 2, t = 40, d = 8;
    const auto q = growingInputs(b, h, t, d), k = growingInputs(b, h, t, d);
    const auto v = torch::randn({b, h, t, d}, torch::kDouble);
    auto layer = expLayer(a::UpdateRule::Additive, true, 1e-6, h, d);
    const auto q32 = q.to(torch::kFloat), k32 = k.to(torch::kFloat), v32 = v.to(torch::kFloat);
    const auto old = a::linearAttention(a::AttentionForm::Chunked, torch::exp(kT * q32), torch::exp(kT * k32), v32, {},
                                        layer->config().rule);
    QVERIFY(!torch::isfinite(old).all().item<bool>());
    const auto want = unshifted(q, k, v, {}, layer->config().rule);
    QVERIFY(torch::isfinite(want).all().item<bool>());
    const auto got = layer->forward(q32, k32, v32, {}, a::AttentionForm::Chunked);
    QVERIFY(torch::isfinite(got).all().item<bool>());
    const double err = relError(got, want);
    qInfo("t x up to %.0f: fp32 error %.2e against the fp64 brute force", (kT * torch::maximum(q, k)).max().item<double>(), err);
    QVERIFY(err < 1e-4);
    const auto weights = layer->weights(q32, k32);
    const auto wantWeights = a::referenceLinearWeights(torch::exp(kT * q), torch::exp(kT * k), {}, layer->config().rule);
    QVERIFY(relError(weights, wantWeights) < 1e-4);
  }

  // Decoding: a prefill of 13 tokens, then one step per token, keys raising the shift as they
  // come; equal to the whole sequence at once, additive and gated, in fp32 at t x past 88.
  void decodingEqualsTheWholeSequence() {
    torch::manual_seed(3);
    const int64_t b = 2, h = 2, t = 30, d = 8, prompt = 13;
    const auto q = growingInputs(b, h, t, d).to(torch::kFloat), k = growingInputs(b, h, t, d).to(torch::kFloat);
    const auto v = torch::randn({b, h, t, d});
    for (const auto rule : {a::UpdateRule::Additive, a::UpdateRule::Gated}) {
      auto layer = expLayer(rule, true, 1e-6, h, d);
      const auto hidden = torch::randn({b, t, h * d});
      const auto whole = layer->forward(q, k, v, hidden, a::AttentionForm::Chunked);
      auto state = layer->initialState(b);
      std::vector<torch::Tensor> ys{layer->prefill(state, q.narrow(2, 0, prompt), k.narrow(2, 0, prompt),
                                                   v.narrow(2, 0, prompt), hidden.narrow(1, 0, prompt))};
      for (int64_t i = prompt; i < t; ++i)
        ys.push_back(layer->step(state, q.narrow(2, i, 1), k.narrow(2, i, 1), v.narrow(2, i, 1), hidden.narrow(1, i, 1)));
      const auto decoded = torch::cat(ys, 2);
      QVERIFY(torch::isfinite(decoded).all().item<bool>());
      const double err = relError(decoded, whole.to(torch::kDouble));
      QVERIFY2(err < 1e-4, (a::toString(rule) + ": " + std::to_string(err)).c_str());
      QVERIFY(state.keyShift.defined() && (state.keyShift > 88).any().item<bool>());
      QVERIFY(state.S.max().item<double>() <= double(t) * v.abs().max().item<double>());  // features <= 1
    }
  }

  // Padded keys (keyMask false) with huge entries neither set the shift nor contribute.
  void paddedKeysTakeNoPart() {
    torch::manual_seed(4);
    const int64_t h = 2, t = 12, d = 4, real = 8;
    const auto q = torch::randn({1, h, t, d}, torch::kDouble), v = torch::randn({1, h, t, d}, torch::kDouble);
    auto k = torch::randn({1, h, t, d}, torch::kDouble);
    k.narrow(2, real, t - real).fill_(400.0);  // exp(800) in fp64 would be inf
    const auto mask = torch::arange(t).lt(real).unsqueeze(0);  // [1,T]
    auto layer = expLayer(a::UpdateRule::Additive, false, 0.0, h, d);
    layer->to(torch::kDouble);
    const auto got = layer->forward(q, k, v, {}, a::AttentionForm::Quadratic, mask);
    const auto want = unshifted(q.narrow(2, 0, real), k.narrow(2, 0, real), v.narrow(2, 0, real), {}, layer->config().rule);
    QVERIFY(torch::isfinite(got).all().item<bool>());
    QVERIFY(relError(got.narrow(2, 0, real), want) < 1e-12);
  }

  // The gradient is the unshifted map's (the shifts are constants; the output does not depend on
  // them), for q, k and v, in fp64 with epsilon 0.
  void gradientEqualsTheUnshiftedMap() {
    torch::manual_seed(5);
    const int64_t h = 2, t = 10, d = 4;
    const auto q0 = torch::randn({1, h, t, d}, torch::kDouble), k0 = torch::randn({1, h, t, d}, torch::kDouble);
    const auto v0 = torch::randn({1, h, t, d}, torch::kDouble), gy = torch::randn({1, h, t, d}, torch::kDouble);
    auto layer = expLayer(a::UpdateRule::Additive, true, 0.0, h, d);
    layer->to(torch::kDouble);
    auto q = q0.clone().requires_grad_(true), k = k0.clone().requires_grad_(true), v = v0.clone().requires_grad_(true);
    (layer->forward(q, k, v, {}, a::AttentionForm::Chunked) * gy).sum().backward();
    auto q2 = q0.clone().requires_grad_(true), k2 = k0.clone().requires_grad_(true), v2 = v0.clone().requires_grad_(true);
    (a::linearQuadratic(torch::exp(kT * q2), torch::exp(kT * k2), v2, {}, layer->config().rule) * gy).sum().backward();
    QVERIFY(relError(q.grad(), q2.grad()) < 1e-10);
    QVERIFY(relError(k.grad(), k2.grad()) < 1e-10);
    QVERIFY(relError(v.grad(), v2.grad()) < 1e-10);
  }
};

HH_TEST_SUITE(TestStableExp, "engine.attention.stable_exp", &TestStableExp::formsEqualTheUnshiftedMap,
              &TestStableExp::largeInputsStayFiniteAndExact, &TestStableExp::decodingEqualsTheWholeSequence,
              &TestStableExp::paddedKeysTakeNoPart, &TestStableExp::gradientEqualsTheUnshiftedMap)

}  // namespace test_stable_exp

#if HH_HAVE_QTEST
#include "test_stable_exp.moc"
#endif
