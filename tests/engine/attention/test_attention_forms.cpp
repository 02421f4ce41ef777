// Every feature map x update rule x causality x form against the fp64 brute force
// (engine/attention/reference.h), at odd lengths that the chunk size does not divide.
// Tolerance (relative, max-abs over the output): float32 1e-5, float64 1e-10. The forms run on
// HH_TEST_DEVICE (the reference on the CPU).
#include <torch/types.h>

#include "engine/attention/linear_attention.h"
#include "engine/attention/reference.h"
#include "engine/parity/parity_check.h"
#include "tests/support/hh_test.h"
#include "tests/support/test_device.h"

namespace test_attention_forms {

class TestAttentionForms : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void initTestCase() { HH_SKIP_UNLESS_TEST_DEVICE(); }

  void allFormsMatchBruteForce() {
    hh::parity::ParityOptions o;
    o.device = hh::resolveDevice(hh::test::testDevice());
    o.lengths = {37, 131};
    o.chunkSize = 16;
    o.dtypes = {"float32", "float64"};
    int rows = 0;
    for (const auto& r : hh::parity::runParity(o)) {
      ++rows;
      const double tol = hh::parity::toleranceFor(r.dtype);
      const std::string what = r.featureMap + "/" + r.rule + "/" + (r.causal ? "causal" : "full") + "/" + r.form +
                               "/" + r.dtype + "/T=" + std::to_string(r.length) +
                               " rel=" + std::to_string(r.relError);
      QVERIFY2(std::isfinite(r.relError) && r.relError <= tol, what.c_str());
    }
    // 10 maps x (5 causal rules x 3 forms + 2 weights rows + full: 2 forms + 1 weights), delta_mao
    // on the 7 maps with non-negative features x 3 forms, softmax 2; x 2 dtypes x 2 lengths; and the
    // Hedgehog layer's own forward (the fused kernel) in float32 at both lengths.
    QCOMPARE(rows, 2 * 2 * (2 + 10 * (5 * 3 + 2 + 3) + 7 * 3) + 2);
  }

  void defaultChunkSizeAtLengthsAroundIt() {
    // The default chunk of 64 at 1, 63, 64, 65 and 200 tokens, Hedgehog features, additive rule.
    for (const int64_t t : {1, 63, 64, 65, 200}) {
      torch::manual_seed(t);
      const auto fq = torch::rand({1, 3, t, 8}, torch::kDouble) + 0.05;
      const auto fk = torch::rand({1, 3, t, 8}, torch::kDouble) + 0.05;
      const auto v = torch::randn({1, 3, t, 5}, torch::kDouble);
      hh::attn::RuleOptions ro;
      const auto ref = hh::attn::referenceLinearAttention(fq, fk, v, {}, ro);
      const auto got = hh::attn::linearChunked(fq.to(torch::kFloat), fk.to(torch::kFloat), v.to(torch::kFloat), {}, ro);
      const double rel = (got.to(torch::kDouble) - ref).abs().max().item<double>() / ref.abs().max().item<double>();
      QVERIFY2(rel < 1e-5, ("T=" + std::to_string(t) + " rel=" + std::to_string(rel)).c_str());
    }
  }

  void halfPrecisionAccumulatesInFloat() {
    // fp16 inputs whose key sums exceed fp16's range (65504) must not overflow the normaliser.
    const int64_t t = 300;
    const auto fq = torch::full({1, 1, t, 4}, 200.0);
    const auto fk = torch::full({1, 1, t, 4}, 200.0);
    const auto v = torch::randn({1, 1, t, 4});
    hh::attn::RuleOptions ro;
    const auto ref = hh::attn::referenceLinearAttention(fq, fk, v, {}, ro);
    const auto got = hh::attn::linearChunked(fq.to(torch::kHalf), fk.to(torch::kHalf), v.to(torch::kHalf), {}, ro);
    QVERIFY(torch::isfinite(got).all().item<bool>());
    const double rel = (got.to(torch::kDouble) - ref).abs().max().item<double>() / ref.abs().max().item<double>();
    QVERIFY2(rel < 5e-3, std::to_string(rel).c_str());
  }

  void recurrentStateDoesNotGrow() {
    hh::attn::RuleOptions ro;
    for (const auto rule : hh::attn::allUpdateRules()) {
      ro.rule = rule;
      auto state = hh::attn::initialState(1, 2, 8, 4, ro);
      const int64_t bytes0 = state.bytes();
      hh::attn::RuleInputs g{torch::full({1, 2, 1}, 0.9), torch::full({1, 2, 1}, 0.5), torch::full({1, 2, 1, 8}, 0.9),
                             torch::full({1, 2, 1, 4}, 0.9)};
      for (int i = 0; i < 500; ++i)
        hh::attn::linearStep(state, torch::rand({1, 2, 8}), torch::rand({1, 2, 8}), torch::randn({1, 2, 4}), g, ro);
      QCOMPARE(state.bytes(), bytes0);
      QCOMPARE(state.position, int64_t(500));
    }
  }

  void rejectsBadInputs() {
    hh::attn::RuleOptions ro;
    ro.rule = hh::attn::UpdateRule::Gated;
    const auto f = torch::rand({1, 1, 5, 4});
    bool threw = false;
    try {
      hh::attn::linearChunked(f, f, torch::rand({1, 1, 5, 4}), {}, ro);  // gate missing
    } catch (const std::invalid_argument&) {
      threw = true;
    }
    QVERIFY(threw);
    ro.causal = false;
    threw = false;
    hh::attn::RuleInputs gated;
    gated.gate = torch::rand({1, 1, 5});
    try {
      hh::attn::linearChunked(f, f, torch::rand({1, 1, 5, 4}), gated, ro);
    } catch (const std::invalid_argument& e) {
      threw = std::string(e.what()).find("causal only") != std::string::npos;
    }
    QVERIFY(threw);
  }
};

HH_TEST_SUITE(TestAttentionForms, "engine.attention.forms", &TestAttentionForms::initTestCase, &TestAttentionForms::allFormsMatchBruteForce,
              &TestAttentionForms::defaultChunkSizeAtLengthsAroundIt, &TestAttentionForms::halfPrecisionAccumulatesInFloat,
              &TestAttentionForms::recurrentStateDoesNotGrow, &TestAttentionForms::rejectsBadInputs)

}  // namespace test_attention_forms

#if HH_HAVE_QTEST
#include "test_attention_forms.moc"
#endif
