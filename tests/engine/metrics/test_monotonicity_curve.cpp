// engine.metrics.monotonicity_curve: the binned mean weight per score (the Hedgehog paper's
// monotonicity plots) against bins worked out by hand (the arithmetic is in the comments):
// invalid and -inf pairs left out, the maximum in the last bin, constant scores in the middle
// bin, no pairs at all, and the central 99.8 % range once there are 2,000 pairs or more.

#include <torch/types.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include "engine/metrics/attention_metrics.h"
#include "tests/engine/metrics/metrics_test_support.h"
#include "tests/support/hh_test.h"

namespace test_monotonicity_curve {

namespace {

namespace m = hh::metrics;
using hh::test::diff;
using hh::test::f64;
using hh::test::kNaN;
using hh::test::mask;
using hh::test::near;

}  // namespace

class TestMonotonicityCurve : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void monotonicityCurveByHand();
  void monotonicityCurveConstantScores();
  void monotonicityCurveNoPairs();
  void monotonicityCurveTrimsOutliers();
};

void TestMonotonicityCurve::monotonicityCurveByHand() {
  // Valid pairs (score, weight): (0, 0.1) (0.5, 0.3) (1.5, 0.5) (3.5, 0.2) (4, 0.6); an invalid pair
  // (10, 9) and a valid pair with score -inf are ignored. min 0, max 4, 4 bins of width 1:
  //   bin 0 [0, 1): 0.1, 0.3 -> mean 0.2, std sqrt((0.1^2 + 0.1^2) / 2) = 0.1
  //   bin 1 [1, 2): 0.5      -> mean 0.5, std 0
  //   bin 2 [2, 3): empty    -> NaN, count 0
  //   bin 3 [3, 4]: 0.2, 0.6 -> mean 0.4, std 0.2 (4 = max goes into the last bin)
  // centres 0.5, 1.5, 2.5, 3.5.
  const double inf = std::numeric_limits<double>::infinity();
  const auto s = f64({0, 0.5, 1.5, 3.5, 4, 10, -inf, 2.2}, {2, 4});
  const auto w = f64({0.1, 0.3, 0.5, 0.2, 0.6, 9, 0.0, 1.0}, {2, 4});
  const auto valid = mask({1, 1, 1, 1, 1, 0, 1, 0}, {2, 4});
  const auto c = m::monotonicityCurve(s, w, valid, 4);
  QVERIFY2(c.binCenters.size() == 4 && c.mean.size() == 4 && c.stddev.size() == 4 && c.count.size() == 4,
           "4 bins requested, 4 entries each");
  const std::vector<double> centers{0.5, 1.5, 2.5, 3.5}, means{0.2, 0.5, kNaN, 0.4}, stds{0.1, 0.0, kNaN, 0.2};
  const std::vector<int64_t> counts{2, 1, 0, 2};
  const double tol = 1e-15;
  for (int b = 0; b < 4; ++b) {
    QVERIFY2(near(c.binCenters[b], centers[b], tol), diff(c.binCenters[b], centers[b], tol).c_str());
    QVERIFY2(near(c.mean[b], means[b], tol), diff(c.mean[b], means[b], tol).c_str());
    QVERIFY2(near(c.stddev[b], stds[b], tol), diff(c.stddev[b], stds[b], tol).c_str());
    QVERIFY2(c.count[b] == counts[b], ("bin " + std::to_string(b) + " count " + std::to_string(c.count[b])).c_str());
  }
  // Batched causal input: counts add up to the valid pairs, 2 heads * 6 = 12.
  const auto c2 = m::monotonicityCurve(torch::randn({1, 2, 3, 3}), torch::rand({1, 2, 3, 3}), m::causalMask(3), 5);
  QVERIFY2(std::accumulate(c2.count.begin(), c2.count.end(), int64_t{0}) == 12, "every valid pair is counted");
}

void TestMonotonicityCurve::monotonicityCurveConstantScores() {
  // All scores 2: every pair goes into bin bins/2 = 2 (of 4), centred on 2; the others are 1/4 wide:
  // centres 1.5, 1.75, 2, 2.25. Weights 0.1, 0.2, 0.3: mean 0.2, std sqrt((0.01 + 0 + 0.01) / 3).
  const auto c = m::monotonicityCurve(f64({2, 2, 2}, {1, 3}), f64({0.1, 0.2, 0.3}, {1, 3}), {}, 4);
  const std::vector<double> centers{1.5, 1.75, 2.0, 2.25};
  const double tol = 1e-15;
  int nonEmpty = 0;
  for (int b = 0; b < 4; ++b) {
    QVERIFY2(near(c.binCenters[b], centers[b], tol), diff(c.binCenters[b], centers[b], tol).c_str());
    nonEmpty += c.count[b] > 0;
  }
  QVERIFY2(nonEmpty == 1 && c.count[2] == 3, "one non-empty bin, the middle one, with all 3 pairs");
  QVERIFY2(near(c.mean[2], 0.2, tol), diff(c.mean[2], 0.2, tol).c_str());
  QVERIFY2(near(c.stddev[2], std::sqrt(0.02 / 3.0), 1e-15), diff(c.stddev[2], std::sqrt(0.02 / 3.0), 1e-15).c_str());
  QVERIFY2(std::isnan(c.mean[0]) && std::isnan(c.stddev[3]), "empty bins are NaN");
}

void TestMonotonicityCurve::monotonicityCurveNoPairs() {
  const auto c = m::monotonicityCurve(torch::randn({3, 3}), torch::rand({3, 3}), torch::zeros({3, 3}, torch::kBool), 3);
  QVERIFY2(c.count.size() == 3, "the curve keeps its bins");
  for (int b = 0; b < 3; ++b) {
    QVERIFY2(c.count[b] == 0 && std::isnan(c.mean[b]) && std::isnan(c.binCenters[b]), "no pair: count 0, NaN");
  }
}

void TestMonotonicityCurve::monotonicityCurveTrimsOutliers() {
  // 5,000 scores evenly in [0, 1) and 3 outliers at 100 (a token on itself): the bins span the
  // central range, not [0, 100] with 30 empty bins between the curve and 3 stray pairs; the
  // outliers are counted in the last bin.
  const int64_t n = 5000;
  auto s = torch::cat({torch::arange(n, torch::kDouble) / double(n), torch::full({3}, 100.0, torch::kDouble)}).view({1, -1});
  const auto w = torch::full_like(s, 0.5);
  const auto c = m::monotonicityCurve(s, w, {}, 10);
  QVERIFY2(c.binCenters.back() < 1.0, std::to_string(c.binCenters.back()).c_str());
  int64_t total = 0, empty = 0;
  for (int b = 0; b < 10; ++b) {
    total += c.count[b];
    empty += c.count[b] == 0;
  }
  QCOMPARE(total, n + 3);
  QCOMPARE(empty, int64_t(0));
  QVERIFY(c.count[9] >= 3 + 400);
  // Below 2,000 pairs the range is [min, max] as before.
  const auto small = m::monotonicityCurve(s.narrow(1, n - 100, 103), w.narrow(1, n - 100, 103), {}, 10);
  QVERIFY(small.binCenters.back() > 90.0);
}

HH_TEST_SUITE(TestMonotonicityCurve, "engine.metrics.monotonicity_curve", &TestMonotonicityCurve::monotonicityCurveByHand,
              &TestMonotonicityCurve::monotonicityCurveConstantScores, &TestMonotonicityCurve::monotonicityCurveNoPairs,
              &TestMonotonicityCurve::monotonicityCurveTrimsOutliers)

}  // namespace test_monotonicity_curve

#if HH_HAVE_QTEST
#include "test_monotonicity_curve.moc"
#endif
