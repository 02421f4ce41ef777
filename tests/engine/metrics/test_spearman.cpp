// engine.metrics.spearman: rowSpearman and headSpearman against values worked out by hand (ties,
// skipped rows, masks, NaN; the arithmetic is in the comments) and against a plain reference
// (std::sort average ranks + Pearson with explicit means) on random causal data with many ties.

#include <torch/types.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "engine/metrics/attention_metrics.h"
#include "tests/engine/metrics/metrics_test_support.h"
#include "tests/support/hh_test.h"

namespace test_spearman {

namespace {

namespace m = hh::metrics;
using hh::test::diff;
using hh::test::f64;
using hh::test::kNaN;
using hh::test::mask;
using hh::test::near;
using hh::test::valueAt;

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

class TestSpearman : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void spearmanMonotonic();
  void spearmanTiesByHand();
  void spearmanSkippedRows();
  void spearmanValidSubset();
  void spearmanNaNPropagates();
  void spearmanRandomAgainstReference();
  void rankedScoresServeSeveralWeights();
};

void TestSpearman::spearmanMonotonic() {
  // Weights = softmax(scores) are strictly increasing in the scores: rho = 1.
  // Weights of the negated scores are strictly decreasing: rho = -1.
  const auto s = f64({0.3, -1.2, 2.5, 0.9, 1.7, -0.4}, {1, 6});
  const auto up = m::rowSpearman(s, torch::softmax(s, -1));
  const auto down = m::rowSpearman(s, torch::softmax(-s, -1));
  QVERIFY2(near(valueAt(up, 0), 1.0, 1e-15), diff(valueAt(up, 0), 1.0, 1e-15).c_str());
  QVERIFY2(near(valueAt(down, 0), -1.0, 1e-15), diff(valueAt(down, 0), -1.0, 1e-15).c_str());
}

void TestSpearman::spearmanTiesByHand() {
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

void TestSpearman::spearmanSkippedRows() {
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

void TestSpearman::spearmanValidSubset() {
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

void TestSpearman::spearmanNaNPropagates() {
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

void TestSpearman::spearmanRandomAgainstReference() {
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

void TestSpearman::rankedScoresServeSeveralWeights() {
  // One ranking of fp32 scores with many ties [2, 2, 9, 9] (causal), three weight tensors against
  // it, each row against the reference; and the rows whose fate the scores decide: a NaN score
  // (row NaN, not skipped, whatever the weights: head 0 NaN), constant scores (skipped, unless a
  // weight is NaN: then NaN), fewer than 3 keys (skipped even with a NaN weight).
  torch::manual_seed(99);
  const int64_t T = 9;
  auto s = torch::round(torch::randn({2, 2, T, T}) * 2.0) / 2.0;
  s[0][0][5][2] = kNaN;
  s[1][1][6].fill_(0.5);
  const auto valid = m::causalMask(T);
  const m::RankedScores ranked(s, valid);
  for (int trial = 0; trial < 3; ++trial) {
    auto w = torch::round(torch::softmax(s.nan_to_num() + torch::randn({2, 2, T, T}), -1) * 8.0) / 8.0;
    if (trial == 1) w[1][1][6][3] = kNaN;  // the constant-scores row
    if (trial == 2) w[0][1][1][0] = kNaN;  // a row of 2 keys
    const auto rows = m::rowSpearman(ranked, w);
    const auto sa = s.accessor<float, 4>();
    const auto wa = w.accessor<float, 4>();
    for (int64_t b = 0; b < 2; ++b)
      for (int64_t h = 0; h < 2; ++h)
        for (int64_t i = 0; i < T; ++i) {
          const double got = rows[b][h][i].item<double>();
          std::vector<double> rs, rw;
          for (int64_t j = 0; j <= i; ++j) rs.push_back(sa[b][h][i][j]), rw.push_back(wa[b][h][i][j]);
          const bool nanRow = std::any_of(rs.begin(), rs.end(), [](double v) { return std::isnan(v); }) ||
                              std::any_of(rw.begin(), rw.end(), [](double v) { return std::isnan(v); });
          if (nanRow) continue;
          const double want = referenceSpearman(rs, rw);
          QVERIFY2(near(got, want, 1e-12), (diff(got, want, 1e-12) + " trial " + std::to_string(trial)).c_str());
        }
    const auto head = m::headSpearman(ranked, w);
    QVERIFY2(std::isnan(valueAt(head, 0)), "the NaN score's row is not skipped: head 0 is NaN");
    QVERIFY2(std::isnan(valueAt(rows[1][1], 6)), "constant scores: NaN");
    if (trial == 1)
      QVERIFY2(std::isnan(valueAt(head, 1)), "constant scores and a NaN weight: NaN, not skipped");
    else
      QVERIFY2(std::isfinite(valueAt(head, 1)), "constant scores, or 2 keys with a NaN weight: skipped");
  }
  HH_VERIFY_THROWS(std::exception, m::rowSpearman(ranked, torch::rand({2, 2, T, T - 1})));
}

HH_TEST_SUITE(TestSpearman, "engine.metrics.spearman", &TestSpearman::spearmanMonotonic, &TestSpearman::spearmanTiesByHand,
              &TestSpearman::spearmanSkippedRows, &TestSpearman::spearmanValidSubset,
              &TestSpearman::spearmanNaNPropagates, &TestSpearman::spearmanRandomAgainstReference,
              &TestSpearman::rankedScoresServeSeveralWeights)

}  // namespace test_spearman

#if HH_HAVE_QTEST
#include "test_spearman.moc"
#endif
