// engine.metrics.attention: entropy and KL against values worked out by hand on small cases (the
// arithmetic is in the comments), per-head reductions against a manual mean, dtypes against each
// other, masks, blocks and bad arguments for all three metrics. Spearman by hand and against a
// plain reference is test_spearman.cpp; the monotonicity curve is test_monotonicity_curve.cpp.

#include <torch/types.h>

#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "engine/metrics/attention_metrics.h"
#include "tests/engine/metrics/metrics_test_support.h"
#include "tests/support/hh_test.h"

namespace test_attention_metrics {

namespace {

namespace m = hh::metrics;
using hh::test::diff;
using hh::test::f64;
using hh::test::kNaN;
using hh::test::mask;
using hh::test::near;
using hh::test::valueAt;
const double kLog2 = std::log(2.0);

// Largest |a - b| over two tensors of the same shape; NaN in exactly one of them counts as infinity.
double maxAbsDiff(const torch::Tensor& a, const torch::Tensor& b) {
  const auto x = a.to(torch::kDouble).reshape({-1}), y = b.to(torch::kDouble).reshape({-1});
  if (x.numel() != y.numel() || !torch::equal(x.isnan(), y.isnan())) return std::numeric_limits<double>::infinity();
  if (x.numel() == 0) return 0.0;
  return torch::where(x.isnan(), torch::zeros_like(x), (x - y).abs()).max().item<double>();
}

bool throwsError(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const std::exception&) {
    return true;
  }
  return false;
}

}  // namespace

class TestAttentionMetrics : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void causalMaskRows();
  void entropyUniformOneHotAndHandRow();
  void entropyCausalAndMaskedGarbage();
  void entropyEmptyRowsLeftOut();
  void entropyNaNPropagates();
  void klIdentical();
  void klHandComputed();
  void klEpsilonPath();
  void klEmptyRowsLeftOut();
  void headReductionsMatchManualMean();
  void dtypesAgree();
  void validBroadcasts();
  void nonContiguousAndBlockedInputs();
  void cpuPassMatchesTensorFormula();
  void badArgumentsThrow();
  void headPatternsByHand();
};

void TestAttentionMetrics::causalMaskRows() {
  // T = 3: row i is true for j <= i.
  const auto c = m::causalMask(3);
  QVERIFY2(c.scalar_type() == torch::kBool, "causalMask must be bool");
  QVERIFY2(c.sizes() == torch::IntArrayRef({3, 3}), "causalMask(3) must be [3, 3]");
  QVERIFY2(torch::equal(c, mask({1, 0, 0, 1, 1, 0, 1, 1, 1}, {3, 3})), "causalMask(3) must be lower-triangular");
  QVERIFY2(m::causalMask(1).item<bool>(), "causalMask(1) is [[true]]");
  QVERIFY2(m::causalMask(0).numel() == 0, "causalMask(0) is empty");
}

void TestAttentionMetrics::entropyUniformOneHotAndHandRow() {
  // Uniform over n = 4: H = -4 * (1/4) log(1/4) = log 4.
  // One-hot [0, 1, 0, 0]: H = -(1 log 1) - 3 * (0 log 0) = 0.
  // [0.5, 0.25, 0.25, 0]: H = -(0.5 log 0.5 + 2 * 0.25 log 0.25) = 0.5 log 2 + 0.5 * 2 log 2 = 1.5 log 2.
  const auto w = f64({0.25, 0.25, 0.25, 0.25,  //
                      0.0, 1.0, 0.0, 0.0,      //
                      0.5, 0.25, 0.25, 0.0},
                     {3, 4});
  const auto h = m::rowEntropy(w);
  QVERIFY2(h.scalar_type() == torch::kDouble, "rowEntropy returns float64");
  QVERIFY2(h.sizes() == torch::IntArrayRef({3}), "rowEntropy of [3, 4] is [3]");
  const double tol = 1e-14;
  QVERIFY2(near(valueAt(h, 0), std::log(4.0), tol), diff(valueAt(h, 0), std::log(4.0), tol).c_str());
  QVERIFY2(near(valueAt(h, 1), 0.0, tol), diff(valueAt(h, 1), 0.0, tol).c_str());
  QVERIFY2(near(valueAt(h, 2), 1.5 * kLog2, tol), diff(valueAt(h, 2), 1.5 * kLog2, tol).c_str());
  // A 2-D input is one head: the mean of the three rows, (log 4 + 0 + 1.5 log 2) / 3 = 3.5 log 2 / 3.
  const auto head = m::headEntropy(w);
  QVERIFY2(head.sizes() == torch::IntArrayRef({1}), "headEntropy of a 2-D input is [1]");
  QVERIFY2(near(valueAt(head, 0), 3.5 * kLog2 / 3.0, tol), diff(valueAt(head, 0), 3.5 * kLog2 / 3.0, tol).c_str());
}

void TestAttentionMetrics::entropyCausalAndMaskedGarbage() {
  // Causal uniform rows over T = 4: row i is uniform over i + 1 keys, so H_i = log(i + 1):
  // [0, log 2, log 3, log 4]; head mean = (log 2 + log 3 + log 4) / 4 = log 24 / 4.
  // Invalid (upper) entries hold garbage (0.7) that must be ignored.
  std::vector<double> values;
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) values.push_back(j <= i ? 1.0 / (i + 1) : 0.7);
  const auto w = f64(values, {1, 1, 4, 4});
  const auto valid = m::causalMask(4);
  const auto h = m::rowEntropy(w, valid);
  QVERIFY2(h.sizes() == torch::IntArrayRef({1, 1, 4}), "rowEntropy of [1, 1, 4, 4] is [1, 1, 4]");
  const double tol = 1e-14;
  for (int i = 0; i < 4; ++i) {
    QVERIFY2(near(valueAt(h, i), std::log(i + 1.0), tol), diff(valueAt(h, i), std::log(i + 1.0), tol).c_str());
  }
  const auto head = m::headEntropy(w, valid);
  QVERIFY2(near(valueAt(head, 0), std::log(24.0) / 4.0, tol), diff(valueAt(head, 0), std::log(24.0) / 4.0, tol).c_str());
}

void TestAttentionMetrics::entropyEmptyRowsLeftOut() {
  // Row 0 valid: [0.5, 0.5] -> log 2. Row 1 has no valid key -> NaN, left out of the head mean.
  const auto w = f64({0.5, 0.5, 0.5, 0.5}, {2, 2});
  const auto valid = mask({1, 1, 0, 0}, {2, 2});
  const auto h = m::rowEntropy(w, valid);
  QVERIFY2(near(valueAt(h, 0), kLog2, 1e-14), diff(valueAt(h, 0), kLog2, 1e-14).c_str());
  QVERIFY2(std::isnan(valueAt(h, 1)), "a row with no valid key is NaN");
  const auto head = m::headEntropy(w, valid);
  QVERIFY2(near(valueAt(head, 0), kLog2, 1e-14), diff(valueAt(head, 0), kLog2, 1e-14).c_str());
  // No valid key at all: the head has no row, NaN.
  const auto none = m::headEntropy(w, torch::zeros({2, 2}, torch::kBool));
  QVERIFY2(std::isnan(valueAt(none, 0)), "a head with no valid row is NaN");
}

void TestAttentionMetrics::entropyNaNPropagates() {
  // A NaN at a valid key makes its row and its head NaN; at an invalid key it is ignored.
  const auto w = f64({0.5, 0.5, kNaN, 0.5, 0.5, kNaN}, {2, 3});
  const auto validAll = mask({1, 1, 1, 1, 1, 1}, {2, 3});
  const auto validTwo = mask({1, 1, 0}, {3});
  QVERIFY2(std::isnan(valueAt(m::headEntropy(w, validAll), 0)), "NaN weight must reach the head mean");
  const double got = valueAt(m::headEntropy(w, validTwo), 0);
  QVERIFY2(near(got, kLog2, 1e-14), diff(got, kLog2, 1e-14).c_str());
}

void TestAttentionMetrics::klIdentical() {
  // KL(p || p): every term is p (log(p + eps) - log(p + eps)) = 0 exactly.
  const auto p = torch::softmax(torch::randn({2, 3, 5, 5}, torch::kDouble), -1);
  const auto kl = m::rowKl(p, p);
  QVERIFY2(kl.sizes() == torch::IntArrayRef({2, 3, 5}), "rowKl of [2, 3, 5, 5] is [2, 3, 5]");
  QVERIFY2(kl.abs().max().item<double>() == 0.0, "KL of identical rows is exactly 0");
  const auto head = m::headKl(p, p);
  QVERIFY2(head.sizes() == torch::IntArrayRef({3}), "headKl of [2, 3, 5, 5] is [3]");
  QVERIFY2(head.abs().max().item<double>() == 0.0, "headKl of identical rows is exactly 0");
}

void TestAttentionMetrics::klHandComputed() {
  // KL([0.5, 0.5] || [0.25, 0.75]) = 0.5 log(0.5 / 0.25) + 0.5 log(0.5 / 0.75)
  //   = 0.5 log 2 + 0.5 log(2/3) = 0.5 log(4/3) = 0.143841036...
  // The epsilon changes it by about 0.5 * 1e-10 * (1/0.5 - 1/0.25 + 1/0.5 - 1/0.75) < 1e-9.
  const auto p = f64({0.5, 0.5}, {1, 2});
  const auto a = f64({0.25, 0.75}, {1, 2});
  const double want = 0.5 * std::log(4.0 / 3.0);
  const double got = valueAt(m::rowKl(p, a), 0);
  QVERIFY2(near(got, want, 1e-9), diff(got, want, 1e-9).c_str());
  QVERIFY2(near(want, 0.143841036, 1e-9), "hand value 0.5 log(4/3) = 0.143841036");
  // KL is not symmetric: KL([0.25, 0.75] || [0.5, 0.5]) = 0.25 log 0.5 + 0.75 log 1.5 = 0.130812035...
  const double back = valueAt(m::rowKl(a, p), 0);
  const double wantBack = 0.25 * std::log(0.5) + 0.75 * std::log(1.5);
  QVERIFY2(near(back, wantBack, 1e-9), diff(back, wantBack, 1e-9).c_str());
}

void TestAttentionMetrics::klEpsilonPath() {
  const double e = m::kKlEpsilon;
  // A zero in a where p > 0: p = [0.5, 0.5], a = [1, 0]. The documented formula gives
  //   0.5 (log(0.5 + e) - log(1 + e)) + 0.5 (log(0.5 + e) - log(e))
  //   ~= -0.5 log 2 + 0.5 (-log 2 + 23.0258509) = 11.5129255 - log 2 = 10.8197783 (finite).
  {
    const auto p = f64({0.5, 0.5}, {1, 2});
    const auto a = f64({1.0, 0.0}, {1, 2});
    const double want = 0.5 * (std::log(0.5 + e) - std::log(1.0 + e)) + 0.5 * (std::log(0.5 + e) - std::log(e));
    const double got = valueAt(m::rowKl(p, a), 0);
    QVERIFY2(near(got, want, 1e-12), diff(got, want, 1e-12).c_str());
    QVERIFY2(near(got, 10.8197783, 1e-6), diff(got, 10.8197783, 1e-6).c_str());
  }
  // A zero in p: its term is 0 whatever a is. p = [1, 0], a = [0.5, 0.5]:
  //   1 * (log(1 + e) - log(0.5 + e)) + 0 = log 2 - 1e-10 (to first order).
  {
    const auto p = f64({1.0, 0.0}, {1, 2});
    const auto a = f64({0.5, 0.5}, {1, 2});
    const double want = std::log(1.0 + e) - std::log(0.5 + e);
    const double got = valueAt(m::rowKl(p, a), 0);
    QVERIFY2(near(got, want, 1e-14), diff(got, want, 1e-14).c_str());
    QVERIFY2(near(got, kLog2, 1e-9), diff(got, kLog2, 1e-9).c_str());
  }
}

void TestAttentionMetrics::klEmptyRowsLeftOut() {
  // Row 0 (valid): KL([0.5, 0.5] || [0.25, 0.75]) = 0.5 log(4/3); row 1 has no valid key -> NaN,
  // and the head mean is row 0 alone.
  const auto p = f64({0.5, 0.5, 0.5, 0.5}, {2, 2});
  const auto a = f64({0.25, 0.75, 0.25, 0.75}, {2, 2});
  const auto valid = mask({1, 1, 0, 0}, {2, 2});
  const auto rows = m::rowKl(p, a, valid);
  QVERIFY2(std::isnan(valueAt(rows, 1)), "a row with no valid key is NaN");
  const double want = 0.5 * std::log(4.0 / 3.0);
  const double got = valueAt(m::headKl(p, a, valid), 0);
  QVERIFY2(near(got, want, 1e-9), diff(got, want, 1e-9).c_str());
}

void TestAttentionMetrics::headReductionsMatchManualMean() {
  // [B, H, T, T] -> [H]: the mean over b and rows i of the row values for each head h.
  torch::manual_seed(7);
  const int64_t B = 2, H = 3, T = 5;
  const auto valid = m::causalMask(T);
  const auto scores = torch::randn({B, H, T, T}, torch::kDouble);
  const auto p = torch::softmax(scores.masked_fill(valid.logical_not(), -1e300), -1);
  const auto a = torch::softmax(scores.masked_fill(valid.logical_not(), -1e300) * 0.5, -1);
  const auto ent = m::rowEntropy(a, valid), kl = m::rowKl(p, a, valid), rho = m::rowSpearman(scores, a, valid);
  const auto headEnt = m::headEntropy(a, valid), headKl = m::headKl(p, a, valid), headRho = m::headSpearman(scores, a, valid);
  QVERIFY2(headEnt.sizes() == torch::IntArrayRef({H}) && headKl.sizes() == torch::IntArrayRef({H}) &&
               headRho.sizes() == torch::IntArrayRef({H}),
           "head metrics of [B, H, T, T] are [H]");
  for (int64_t h = 0; h < H; ++h) {
    double sumEnt = 0, sumKl = 0, sumRho = 0;
    int nRho = 0;
    for (int64_t b = 0; b < B; ++b)
      for (int64_t i = 0; i < T; ++i) {
        sumEnt += ent[b][h][i].item<double>();
        sumKl += kl[b][h][i].item<double>();
        if (i >= 2) {  // rows 0 and 1 have < 3 keys
          sumRho += rho[b][h][i].item<double>();
          ++nRho;
        }
      }
    const double tol = 1e-14;
    QVERIFY2(near(valueAt(headEnt, h), sumEnt / (B * T), tol), diff(valueAt(headEnt, h), sumEnt / (B * T), tol).c_str());
    QVERIFY2(near(valueAt(headKl, h), sumKl / (B * T), tol), diff(valueAt(headKl, h), sumKl / (B * T), tol).c_str());
    QVERIFY2(near(valueAt(headRho, h), sumRho / nRho, tol), diff(valueAt(headRho, h), sumRho / nRho, tol).c_str());
  }
  // More leading dims: [2, 2, H, T, T] still reduces to [H], equal to the [4, H, T, T] reshape.
  const auto w5 = torch::softmax(torch::randn({2, 2, H, T, T}, torch::kDouble), -1);
  const auto h5 = m::headEntropy(w5), h4 = m::headEntropy(w5.reshape({4, H, T, T}));
  QVERIFY2(h5.sizes() == torch::IntArrayRef({H}), "5-D input reduces to [H]");
  QVERIFY2(maxAbsDiff(h5, h4) < 1e-14, "extra leading dims are averaged like batch");
}

void TestAttentionMetrics::dtypesAgree() {
  torch::manual_seed(11);
  const int64_t T = 9;
  const auto valid = m::causalMask(T);
  const auto s64 = torch::randn({2, 2, T, T}, torch::kDouble);
  const auto p64 = torch::softmax(s64.masked_fill(valid.logical_not(), -1e300), -1);
  const auto a64 = torch::softmax(s64.masked_fill(valid.logical_not(), -1e300) * 0.7, -1);
  const auto s32 = s64.to(torch::kFloat), p32 = p64.to(torch::kFloat), a32 = a64.to(torch::kFloat);

  // float32 input vs the same values widened to float64: identical (the widening is exact).
  QVERIFY2(maxAbsDiff(m::headEntropy(a32, valid), m::headEntropy(a32.to(torch::kDouble), valid)) == 0.0,
           "float32 and its exact float64 copy agree exactly");
  QVERIFY2(maxAbsDiff(m::rowSpearman(s32, a32, valid), m::rowSpearman(s32.to(torch::kDouble), a32.to(torch::kDouble), valid)) == 0.0,
           "Spearman: float32 and its exact float64 copy agree exactly");
  // float32 vs the float64 originals: within float32 rounding (relative ~6e-8 on the weights).
  const double dEnt = maxAbsDiff(m::headEntropy(a32, valid), m::headEntropy(a64, valid));
  const double dKl = maxAbsDiff(m::headKl(p32, a32, valid), m::headKl(p64, a64, valid));
  QVERIFY2(dEnt < 1e-6, ("entropy float32 vs float64: " + std::to_string(dEnt)).c_str());
  QVERIFY2(dKl < 1e-6, ("KL float32 vs float64: " + std::to_string(dKl)).c_str());
  QVERIFY2(m::headEntropy(a32, valid).scalar_type() == torch::kDouble, "results are float64 for float32 input");

  // bfloat16: a uniform row of 4 (0.25 is exact in bfloat16) has entropy log 4.
  const auto u = torch::full({1, 4}, 0.25, torch::kBFloat16);
  const double hb = valueAt(m::rowEntropy(u), 0);
  QVERIFY2(near(hb, std::log(4.0), 1e-14), diff(hb, std::log(4.0), 1e-14).c_str());
  const double rb = valueAt(m::rowSpearman(f64({1, 2, 3, 4}, {1, 4}).to(torch::kBFloat16), f64({1, 1, 2, 3}, {1, 4}).to(torch::kBFloat16)), 0);
  QVERIFY2(near(rb, std::sqrt(0.9), 1e-15), diff(rb, std::sqrt(0.9), 1e-15).c_str());
}

void TestAttentionMetrics::validBroadcasts() {
  // A [T, T] mask, a [1, 1, T, T] mask and the fully expanded [B, H, T, T] mask give the same result.
  torch::manual_seed(3);
  const int64_t T = 6;
  const auto s = torch::randn({2, 3, T, T}, torch::kDouble);
  const auto w = torch::softmax(s, -1);
  const auto v2 = m::causalMask(T), v4 = v2.view({1, 1, T, T}), vFull = v2.expand({2, 3, T, T}).contiguous();
  QVERIFY2(maxAbsDiff(m::rowEntropy(w, v2), m::rowEntropy(w, vFull)) == 0.0, "entropy: [T, T] mask broadcasts");
  QVERIFY2(maxAbsDiff(m::rowKl(w, w * 0.5 + 0.5 / T, v4), m::rowKl(w, w * 0.5 + 0.5 / T, vFull)) == 0.0,
           "KL: [1, 1, T, T] mask broadcasts");
  QVERIFY2(maxAbsDiff(m::rowSpearman(s, w, v2), m::rowSpearman(s, w, vFull)) == 0.0, "Spearman: [T, T] mask broadcasts");
  // An all-true mask equals no mask.
  const auto ones = torch::ones({T, T}, torch::kBool);
  QVERIFY2(maxAbsDiff(m::rowSpearman(s, w, ones), m::rowSpearman(s, w)) == 0.0, "all-true mask = no mask");
  QVERIFY2(maxAbsDiff(m::headEntropy(w, ones), m::headEntropy(w)) == 0.0, "all-true mask = no mask (entropy)");
}

void TestAttentionMetrics::nonContiguousAndBlockedInputs() {
  torch::manual_seed(5);
  // A non-contiguous view (heads and batch swapped twice) gives the same values as its copy.
  const auto s = torch::randn({3, 2, 7, 7}, torch::kDouble).transpose(0, 1);  // [2, 3, 7, 7], not contiguous
  const auto w = torch::softmax(s, -1);
  const auto valid = m::causalMask(7);
  QVERIFY2(!s.is_contiguous(), "the view must be non-contiguous");
  QVERIFY2(maxAbsDiff(m::headEntropy(w, valid), m::headEntropy(w.contiguous(), valid)) == 0.0, "entropy of a view");
  QVERIFY2(maxAbsDiff(m::headSpearman(s, w, valid), m::headSpearman(s.contiguous(), w.contiguous(), valid)) == 0.0,
           "Spearman of a view");
  // Inputs larger than one processing block (about 4M pairs): [3, 1500, 1000] = 4.5M pairs. Rows are
  // independent, so the result must equal the concatenation of two smaller calls.
  const auto big = torch::rand({3, 1500, 1000}, torch::kFloat);
  const auto bigScores = torch::randn({3, 1500, 1000}, torch::kFloat);
  const auto bigValid = torch::rand({1500, 1000}) > 0.3;
  const auto whole = m::rowEntropy(big, bigValid);
  const auto parts = torch::cat({m::rowEntropy(big.slice(0, 0, 2), bigValid), m::rowEntropy(big.slice(0, 2, 3), bigValid)});
  QVERIFY2(maxAbsDiff(whole, parts) == 0.0, "entropy across block boundaries");
  const auto klWhole = m::rowKl(big, big.flip(-1), bigValid);
  const auto klParts = torch::cat({m::rowKl(big.slice(0, 0, 2), big.slice(0, 0, 2).flip(-1), bigValid),
                                   m::rowKl(big.slice(0, 2, 3), big.slice(0, 2, 3).flip(-1), bigValid)});
  QVERIFY2(maxAbsDiff(klWhole, klParts) == 0.0, "KL across block boundaries");
  const auto rhoWhole = m::rowSpearman(bigScores, big, bigValid);
  const auto rhoParts = torch::cat({m::rowSpearman(bigScores.slice(0, 0, 2), big.slice(0, 0, 2), bigValid),
                                    m::rowSpearman(bigScores.slice(0, 2, 3), big.slice(0, 2, 3), bigValid)});
  QVERIFY2(maxAbsDiff(rhoWhole, rhoParts) == 0.0, "Spearman across block boundaries");
}

void TestAttentionMetrics::cpuPassMatchesTensorFormula() {
  // On the CPU, entropy and KL sum each row in one C++ pass; the contract's formulas written as
  // float64 Torch ops are the reference: causal rows with padded keys, zeros among p, a weight of 0
  // where p > 0 (the epsilon path), NaN in a where p = 0 (a term of 0), a negative weight and a NaN
  // (NaN rows), and rows without a valid key (NaN); float32, float64 and bfloat16 inputs.
  torch::manual_seed(17);
  const int64_t B = 2, H = 3, T = 37;
  auto keep = torch::ones({B, 1, 1, T}, torch::kBool);
  keep.index_put_({1, 0, 0, torch::indexing::Slice(0, 3)}, false);           // batch 1: rows 0-2 have no key
  const auto valid = m::causalMask(T).view({1, 1, T, T}).logical_and(keep);  // [B, 1, T, T]
  auto p = torch::softmax(torch::randn({B, H, T, T}, torch::kDouble) * 3, -1);
  auto a = torch::softmax(torch::randn({B, H, T, T}, torch::kDouble), -1);
  p.masked_fill_(torch::rand({B, H, T, T}, torch::kDouble) < 0.2, 0.0);
  p.index_put_({0, 0, 5, 2}, 0.3);
  a.index_put_({0, 0, 5, 2}, 0.0);  // a = 0 where p > 0
  p.index_put_({0, 1, 6, 3}, 0.0);
  a.index_put_({0, 1, 6, 3}, kNaN);  // p = 0: the KL term is 0 whatever a is (the entropy row is NaN)
  p.index_put_({0, 2, 8, 1}, 0.1);
  a.index_put_({0, 2, 8, 1}, -0.25);  // a negative weight: NaN
  p.index_put_({1, 0, 9, 4}, kNaN);   // NaN
  const auto full = valid.expand({B, H, T, T});
  const auto wantKl = ((p + m::kKlEpsilon).log() - (a + m::kKlEpsilon).log())
                          .mul(p)
                          .masked_fill(p == 0, 0.0)
                          .masked_fill(full.logical_not(), 0.0)
                          .sum(-1)
                          .masked_fill(full.any(-1).logical_not(), kNaN);  // [B, H, T]
  const auto wantEntropy = torch::xlogy(a, a)
                               .neg()
                               .masked_fill(full.logical_not(), 0.0)
                               .sum(-1)
                               .masked_fill(full.any(-1).logical_not(), kNaN);
  const auto sameOrNaN = [](const torch::Tensor& got, const torch::Tensor& want, double tol) {
    const auto bothNaN = got.isnan().logical_and(want.isnan());
    const auto close = (got - want).abs() <= tol * (want.abs() + 1e-300);
    return bothNaN.logical_or(close).all().item<bool>() && got.isnan().equal(want.isnan());
  };
  QVERIFY2(sameOrNaN(m::rowKl(p, a, valid), wantKl, 1e-12), "KL, float64: the CPU pass equals the formula");
  QVERIFY2(sameOrNaN(m::rowEntropy(a, valid), wantEntropy, 1e-12), "entropy, float64: the CPU pass equals the formula");
  QVERIFY2(wantKl.isnan().sum().item<int64_t>() == 3 * H + 2, "the case has 9 rows without a key and two NaN rows");
  for (const auto type : {torch::kFloat, torch::kBFloat16}) {  // the same values as that type, widened exactly
    const auto pt = p.to(type), at = a.to(type);
    const auto pw = pt.to(torch::kDouble), aw = at.to(torch::kDouble);
    QVERIFY2(sameOrNaN(m::rowKl(pt, at, valid), m::rowKl(pw, aw, valid), 0.0),
             "KL: a narrow input equals its float64 copy");
    QVERIFY2(sameOrNaN(m::rowEntropy(at, valid), m::rowEntropy(aw, valid), 0.0), "entropy: the same");
  }
}

void TestAttentionMetrics::badArgumentsThrow() {
  const auto w = torch::rand({2, 3, 4, 4});
  QVERIFY2(throwsError([&] { m::rowKl(w, torch::rand({2, 3, 4, 5})); }), "KL: shape mismatch throws");
  QVERIFY2(throwsError([&] { m::rowSpearman(w, torch::rand({3, 4, 4})); }), "Spearman: shape mismatch throws");
  QVERIFY2(throwsError([&] { m::rowEntropy(torch::rand({4})); }), "1-D weights throw");
  QVERIFY2(throwsError([&] { m::rowEntropy(w, torch::ones({4, 4})); }), "a float mask throws");
  QVERIFY2(throwsError([&] { m::rowEntropy(w, torch::ones({3, 4}, torch::kBool)); }), "a non-broadcastable mask throws");
  QVERIFY2(throwsError([&] { m::monotonicityCurve(w, w, {}, 0); }), "0 bins throws");
}

void TestAttentionMetrics::headPatternsByHand() {
  // ids 7 8 9 7 8. Head 0 looks at the previous token; head 1 at what followed the current
  // token last time (rows 3 and 4: keys 1 and 2), else at the first token.
  const auto ids = torch::tensor(std::vector<int64_t>{7, 8, 9, 7, 8}).view({1, 5});
  auto w = torch::zeros({1, 2, 5, 5}, torch::kDouble);
  w[0][0][0][0] = 1;
  for (int i = 1; i < 5; ++i) w[0][0][i][i - 1] = 1;
  for (int i = 0; i < 3; ++i) w[0][1][i][0] = 1;
  w[0][1][3][1] = 1;
  w[0][1][4][2] = 1;
  const auto p = m::headPatterns(w.to(torch::kFloat), ids);
  auto at = [](const torch::Tensor& t, int h) { return t[h].item<double>(); };
  QCOMPARE(at(p.previousToken, 0), 1.0);
  QCOMPARE(at(p.firstToken, 0), 0.25);   // rows 1-4: only row 1's previous token is the first
  QCOMPARE(at(p.induction, 0), 0.0);
  QCOMPARE(at(p.previousToken, 1), 0.25);
  QCOMPARE(at(p.firstToken, 1), 0.5);
  QCOMPARE(at(p.induction, 1), 1.0);
  // A token repeated at once has nothing earlier to copy from: no induction row, NaN.
  const auto twice = m::headPatterns(torch::tensor(std::vector<float>{1, 0, 1, 0}).view({1, 1, 2, 2}),
                                     torch::tensor(std::vector<int64_t>{5, 5}).view({1, 2}));
  QVERIFY(std::isnan(twice.induction[0].item<double>()));
  QCOMPARE(twice.previousToken[0].item<double>(), 1.0);
  QVERIFY2(throwsError([&] { m::headPatterns(w, torch::zeros({1, 4}, torch::kLong)); }), "ids of the wrong length throw");
}

HH_TEST_SUITE(TestAttentionMetrics, "engine.metrics.attention", &TestAttentionMetrics::causalMaskRows,
              &TestAttentionMetrics::entropyUniformOneHotAndHandRow,
              &TestAttentionMetrics::entropyCausalAndMaskedGarbage, &TestAttentionMetrics::entropyEmptyRowsLeftOut,
              &TestAttentionMetrics::entropyNaNPropagates, &TestAttentionMetrics::klIdentical,
              &TestAttentionMetrics::klHandComputed, &TestAttentionMetrics::klEpsilonPath,
              &TestAttentionMetrics::klEmptyRowsLeftOut, &TestAttentionMetrics::headReductionsMatchManualMean,
              &TestAttentionMetrics::dtypesAgree, &TestAttentionMetrics::validBroadcasts,
              &TestAttentionMetrics::nonContiguousAndBlockedInputs, &TestAttentionMetrics::cpuPassMatchesTensorFormula,
              &TestAttentionMetrics::badArgumentsThrow, &TestAttentionMetrics::headPatternsByHand)

}  // namespace test_attention_metrics

#if HH_HAVE_QTEST
#include "test_attention_metrics.moc"
#endif
