// engine.metrics.attention: entropy, KL and Spearman against values worked out by hand on small
// cases (the arithmetic is in the comments; the monotonicity curve has its own suite,
// test_monotonicity_curve.cpp), per-head reductions against a
// manual mean, dtypes against each other, and rowSpearman against a plain reference (std::sort
// ranks + Pearson) on random causal data with many ties.

#include <torch/types.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include "engine/metrics/attention_metrics.h"
#include "tests/engine/metrics/metrics_test_support.h"
#include "tests/support/hh_test.h"

namespace {

namespace m = hh::metrics;
using hh::test::diff;
using hh::test::f64;
using hh::test::kNaN;
using hh::test::mask;
using hh::test::near;
const double kLog2 = std::log(2.0);

double valueAt(const torch::Tensor& t, int64_t i) { return t.reshape({-1})[i].item<double>(); }

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

// Reference Spearman for one row: average ranks by std::sort, then Pearson with explicit means.
std::vector<double> referenceRanks(const std::vector<double>& x) {
  const size_t n = x.size();
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return x[a] < x[b]; });
  std::vector<double> rank(n);
  for (size_t i = 0; i < n;) {
    size_t j = i;
    while (j < n && x[order[j]] == x[order[i]]) ++j;
    double sum = 0.0;
    for (size_t t = i; t < j; ++t) sum += static_cast<double>(t + 1);
    for (size_t t = i; t < j; ++t) rank[order[t]] = sum / static_cast<double>(j - i);
    i = j;
  }
  return rank;
}

double referenceSpearman(const std::vector<double>& s, const std::vector<double>& w) {
  if (s.size() < 3) return kNaN;
  const auto rs = referenceRanks(s), rw = referenceRanks(w);
  const double n = static_cast<double>(s.size());
  const double ms = std::accumulate(rs.begin(), rs.end(), 0.0) / n;
  const double mw = std::accumulate(rw.begin(), rw.end(), 0.0) / n;
  double sxy = 0.0, sxx = 0.0, syy = 0.0;
  for (size_t i = 0; i < s.size(); ++i) {
    sxy += (rs[i] - ms) * (rw[i] - mw);
    sxx += (rs[i] - ms) * (rs[i] - ms);
    syy += (rw[i] - mw) * (rw[i] - mw);
  }
  if (sxx == 0.0 || syy == 0.0) return kNaN;
  return sxy / std::sqrt(sxx * syy);
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
  void spearmanMonotonic();
  void spearmanTiesByHand();
  void spearmanSkippedRows();
  void spearmanValidSubset();
  void spearmanNaNPropagates();
  void spearmanRandomAgainstReference();
  void headReductionsMatchManualMean();
  void dtypesAgree();
  void validBroadcasts();
  void nonContiguousAndBlockedInputs();
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

void TestAttentionMetrics::spearmanMonotonic() {
  // Weights = softmax(scores) are strictly increasing in the scores: rho = 1.
  // Weights of the negated scores are strictly decreasing: rho = -1.
  const auto s = f64({0.3, -1.2, 2.5, 0.9, 1.7, -0.4}, {1, 6});
  const auto up = m::rowSpearman(s, torch::softmax(s, -1));
  const auto down = m::rowSpearman(s, torch::softmax(-s, -1));
  QVERIFY2(near(valueAt(up, 0), 1.0, 1e-15), diff(valueAt(up, 0), 1.0, 1e-15).c_str());
  QVERIFY2(near(valueAt(down, 0), -1.0, 1e-15), diff(valueAt(down, 0), -1.0, 1e-15).c_str());
}

void TestAttentionMetrics::spearmanTiesByHand() {
  const double tol = 1e-15;
  // Ties in the weights: scores [1, 2, 3, 4] -> ranks [1, 2, 3, 4]; weights [1, 1, 2, 3] -> [1.5, 1.5, 3, 4].
  // Mean rank 2.5: ds = [-1.5, -0.5, 0.5, 1.5], dw = [-1, -1, 0.5, 1.5].
  // sum ds dw = 1.5 + 0.5 + 0.25 + 2.25 = 4.5; sum ds^2 = 5; sum dw^2 = 1 + 1 + 0.25 + 2.25 = 4.5.
  // rho = 4.5 / sqrt(5 * 4.5) = sqrt(0.9) = 0.948683298...
  {
    const auto got = valueAt(m::rowSpearman(f64({1, 2, 3, 4}, {1, 4}), f64({1, 1, 2, 3}, {1, 4})), 0);
    QVERIFY2(near(got, std::sqrt(0.9), tol), diff(got, std::sqrt(0.9), tol).c_str());
  }
  // Ties in the scores: scores [3, 1, 1, 2] -> ranks [4, 1.5, 1.5, 3]; weights [0.1, 0.4, 0.2, 0.3] -> [1, 4, 2, 3].
  // ds = [1.5, -1, -1, 0.5], dw = [-1.5, 1.5, -0.5, 0.5].
  // sum ds dw = -2.25 - 1.5 + 0.5 + 0.25 = -3; sum ds^2 = 2.25 + 1 + 1 + 0.25 = 4.5; sum dw^2 = 5.
  // rho = -3 / sqrt(22.5) = -0.632455532...
  {
    const auto got = valueAt(m::rowSpearman(f64({3, 1, 1, 2}, {1, 4}), f64({0.1, 0.4, 0.2, 0.3}, {1, 4})), 0);
    const double want = -3.0 / std::sqrt(22.5);
    QVERIFY2(near(got, want, tol), diff(got, want, tol).c_str());
  }
  // Three-way tie: scores [1, 2, 2, 2, 3] -> [1, 3, 3, 3, 5]; weights [5, 4, 3, 2, 1] -> [5, 4, 3, 2, 1].
  // Mean 3: ds = [-2, 0, 0, 0, 2], dw = [2, 1, 0, -1, -2]; sum ds dw = -4 - 4 = -8;
  // sum ds^2 = 8; sum dw^2 = 10; rho = -8 / sqrt(80) = -0.894427191...
  {
    const auto got = valueAt(m::rowSpearman(f64({1, 2, 2, 2, 3}, {1, 5}), f64({5, 4, 3, 2, 1}, {1, 5})), 0);
    const double want = -8.0 / std::sqrt(80.0);
    QVERIFY2(near(got, want, tol), diff(got, want, tol).c_str());
  }
}

void TestAttentionMetrics::spearmanSkippedRows() {
  // Causal 4 x 4 with increasing scores and weights: rows 0 and 1 have 1 and 2 valid keys (< 3) and
  // are skipped (NaN); rows 2 and 3 have rho = 1; the head mean over the non-skipped rows is 1.
  const auto s = torch::arange(4, torch::kDouble).repeat({4, 1}).reshape({1, 1, 4, 4});
  const auto w = (s + 1.0) / 10.0;
  const auto valid = m::causalMask(4);
  const auto rows = m::rowSpearman(s, w, valid);
  QVERIFY2(std::isnan(valueAt(rows, 0)) && std::isnan(valueAt(rows, 1)), "rows with < 3 valid keys are NaN");
  QVERIFY2(near(valueAt(rows, 2), 1.0, 1e-15) && near(valueAt(rows, 3), 1.0, 1e-15), "rows 2, 3 are monotonic");
  const auto head = m::headSpearman(s, w, valid);
  QVERIFY2(head.sizes() == torch::IntArrayRef({1}), "headSpearman of [1, 1, 4, 4] is [1]");
  QVERIFY2(near(valueAt(head, 0), 1.0, 1e-15), diff(valueAt(head, 0), 1.0, 1e-15).c_str());

  // Constant weights (row 0) or constant scores (row 1) are skipped; row 2 has rho = -1.
  const auto s2 = f64({1, 2, 3, 5, 5, 5, 1, 2, 3}, {3, 3});
  const auto w2 = f64({0.3, 0.3, 0.3, 0.1, 0.2, 0.7, 0.5, 0.3, 0.2}, {3, 3});
  const auto rows2 = m::rowSpearman(s2, w2);
  QVERIFY2(std::isnan(valueAt(rows2, 0)), "constant weights: skipped");
  QVERIFY2(std::isnan(valueAt(rows2, 1)), "constant scores: skipped");
  QVERIFY2(near(valueAt(rows2, 2), -1.0, 1e-15), diff(valueAt(rows2, 2), -1.0, 1e-15).c_str());
  QVERIFY2(near(valueAt(m::headSpearman(s2, w2), 0), -1.0, 1e-15), "head mean skips rows 0 and 1");

  // Every row skipped: the head is NaN.
  const auto allSkipped = m::headSpearman(f64({1, 2, 3, 4}, {2, 2}), f64({1, 2, 3, 4}, {2, 2}));
  QVERIFY2(std::isnan(valueAt(allSkipped, 0)), "a head with no usable row is NaN");
}

void TestAttentionMetrics::spearmanValidSubset() {
  // Key 1 is invalid and holds a score (100) and weight (0) that would break monotonicity; over the
  // valid keys {0, 2, 3, 4} scores [1, 2, 3, 4] and weights [0.1, 0.2, 0.3, 0.4] give rho = 1.
  const auto s = f64({1, 100, 2, 3, 4}, {1, 5});
  const auto w = f64({0.1, 0.0, 0.2, 0.3, 0.4}, {1, 5});
  const auto valid = mask({1, 0, 1, 1, 1}, {5});  // broadcast over rows
  const double got = valueAt(m::rowSpearman(s, w, valid), 0);
  QVERIFY2(near(got, 1.0, 1e-15), diff(got, 1.0, 1e-15).c_str());
  // Without the mask: scores rank [1, 5, 2, 3, 4], weights [2, 1, 3, 4, 5]; mean 3:
  // ds = [-2, 2, -1, 0, 1], dw = [-1, -2, 0, 1, 2]; sum ds dw = 2 - 4 + 0 + 0 + 2 = 0 -> rho = 0.
  const double unmasked = valueAt(m::rowSpearman(s, w), 0);
  QVERIFY2(near(unmasked, 0.0, 1e-15), diff(unmasked, 0.0, 1e-15).c_str());
}

void TestAttentionMetrics::spearmanNaNPropagates() {
  // Row 0: NaN score at a valid key -> NaN and not skipped, so the head mean is NaN.
  // Row 1: the NaN sits at an invalid key -> ignored, rho = 1 over [1, 2, 3].
  const auto s = f64({1, kNaN, 2, 3, 1, 2, 3, kNaN}, {2, 4});
  const auto w = f64({0.1, 0.2, 0.3, 0.4, 0.1, 0.2, 0.3, 0.4}, {2, 4});
  const auto rows = m::rowSpearman(s, w, mask({1, 1, 1, 1, 1, 1, 1, 0}, {2, 4}));
  QVERIFY2(std::isnan(valueAt(rows, 0)), "NaN score gives a NaN row");
  QVERIFY2(near(valueAt(rows, 1), 1.0, 1e-15), diff(valueAt(rows, 1), 1.0, 1e-15).c_str());
  const auto head = m::headSpearman(s, w, mask({1, 1, 1, 1, 1, 1, 1, 0}, {2, 4}));
  QVERIFY2(std::isnan(valueAt(head, 0)), "a NaN row is not skipped: the head mean is NaN");
}

void TestAttentionMetrics::spearmanRandomAgainstReference() {
  // [2, 3, 17, 17] causal; scores and weights rounded to coarse grids so that ties are frequent.
  torch::manual_seed(1234);
  const int64_t B = 2, H = 3, T = 17;
  const auto s = torch::round(torch::randn({B, H, T, T}, torch::kDouble) * 2.0) / 2.0;
  const auto w = torch::round(torch::softmax(s + 0.5 * torch::randn({B, H, T, T}, torch::kDouble), -1) * 16.0) / 16.0;
  const auto valid = m::causalMask(T);
  const auto rows = m::rowSpearman(s, w, valid);
  QVERIFY2(rows.sizes() == torch::IntArrayRef({B, H, T}), "rowSpearman of [B, H, T, T] is [B, H, T]");

  const auto sa = s.accessor<double, 4>();
  const auto wa = w.accessor<double, 4>();
  std::vector<double> headSum(H, 0.0);
  std::vector<int> headCount(H, 0);
  int usable = 0, tied = 0;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < T; ++i) {
        std::vector<double> rs, rw;
        for (int64_t j = 0; j <= i; ++j) {  // causal: keys 0..i
          rs.push_back(sa[b][h][i][j]);
          rw.push_back(wa[b][h][i][j]);
        }
        const double want = referenceSpearman(rs, rw);
        const double got = rows[b][h][i].item<double>();
        QVERIFY2(near(got, want, 1e-12), (diff(got, want, 1e-12) + " at b " + std::to_string(b) + " h " +
                                          std::to_string(h) + " i " + std::to_string(i)).c_str());
        if (!std::isnan(want)) {
          headSum[h] += want;
          ++headCount[h];
          ++usable;
          std::sort(rs.begin(), rs.end());
          tied += std::adjacent_find(rs.begin(), rs.end()) != rs.end();
        }
      }
  QVERIFY2(usable > 60 && tied > 30, ("the random case must exercise ties: usable " + std::to_string(usable) +
                                      ", rows with tied scores " + std::to_string(tied)).c_str());
  const auto head = m::headSpearman(s, w, valid);
  for (int64_t h = 0; h < H; ++h) {
    const double want = headSum[h] / headCount[h];
    QVERIFY2(near(valueAt(head, h), want, 1e-12), diff(valueAt(head, h), want, 1e-12).c_str());
  }
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
              &TestAttentionMetrics::entropyUniformOneHotAndHandRow, &TestAttentionMetrics::entropyCausalAndMaskedGarbage,
              &TestAttentionMetrics::entropyEmptyRowsLeftOut, &TestAttentionMetrics::entropyNaNPropagates,
              &TestAttentionMetrics::klIdentical, &TestAttentionMetrics::klHandComputed,
              &TestAttentionMetrics::klEpsilonPath, &TestAttentionMetrics::klEmptyRowsLeftOut,
              &TestAttentionMetrics::spearmanMonotonic, &TestAttentionMetrics::spearmanTiesByHand,
              &TestAttentionMetrics::spearmanSkippedRows, &TestAttentionMetrics::spearmanValidSubset,
              &TestAttentionMetrics::spearmanNaNPropagates, &TestAttentionMetrics::spearmanRandomAgainstReference,
              &TestAttentionMetrics::headReductionsMatchManualMean,
              &TestAttentionMetrics::dtypesAgree, &TestAttentionMetrics::validBroadcasts,
              &TestAttentionMetrics::nonContiguousAndBlockedInputs,
              &TestAttentionMetrics::badArgumentsThrow, &TestAttentionMetrics::headPatternsByHand)

#if HH_HAVE_QTEST
#include "test_attention_metrics.moc"
#endif
