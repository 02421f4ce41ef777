// engine.jobs.paired_comparison: the statistics an experiment's "baseline" reports.
//   - regularizedIncompleteBeta against its closed forms (I_x(1, 1) = x, I_x(a, 1) = x^a,
//     I_x(1, b) = 1 - (1 - x)^b, I_(1/2)(a, a) = 1/2) and an fp64 Simpson integral of
//     t^(a-1) (1-t)^(b-1) / B(a, b), within 1e-10; bad arguments refused;
//   - studentTwoSidedP against the closed forms for 1 and 2 degrees of freedom
//     (1 - 2 atan|t| / pi, 1 - |t| / sqrt(2 + t^2)) within 1e-12, and the printed tables' 5 % and
//     1 % points (3 and 10 degrees of freedom) within 2e-4 (the tables' three decimals);
//   - pairedComparison: mean, sample sd, t = -sqrt(7) and p = 1 - sqrt(7) / 3 of a hand-worked
//     example, non-finite pairs skipped, ties counted neither lower nor higher, one pair (a mean
//     only), identical differences (t infinite, p 0) and no differences (t 0, p 1).
#include <cmath>
#include <limits>
#include <stdexcept>

#include "engine/jobs/paired_comparison.h"
#include "tests/support/hh_test.h"

namespace test_paired_comparison {

namespace {

namespace j = hh::jobs;

// I_x(a, b) by composite Simpson over [0, x] (a, b >= 1, so the integrand is smooth).
double simpsonIncompleteBeta(double a, double b, double x) {
  const int n = 200000;  // even
  const double h = x / n;
  const auto f = [&](double t) { return std::pow(t, a - 1) * std::pow(1 - t, b - 1); };
  double sum = f(0) + f(x);
  for (int i = 1; i < n; ++i) sum += (i % 2 ? 4 : 2) * f(i * h);
  const double beta = std::exp(std::lgamma(a) + std::lgamma(b) - std::lgamma(a + b));
  return sum * h / 3 / beta;
}

bool near(double got, double want, double tolerance) {
  if (std::fabs(got - want) <= tolerance) return true;
  qInfo("got %.15g, want %.15g", got, want);
  return false;
}

}  // namespace

class TestPairedComparison : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void incompleteBetaMatchesClosedFormsAndAnIntegral() {
    for (double x : {0.0, 0.1, 0.37, 0.5, 0.9, 1.0}) {
      QVERIFY(near(j::regularizedIncompleteBeta(1, 1, x), x, 1e-12));
      QVERIFY(near(j::regularizedIncompleteBeta(3.5, 1, x), std::pow(x, 3.5), 1e-12));
      QVERIFY(near(j::regularizedIncompleteBeta(1, 2.5, x), 1 - std::pow(1 - x, 2.5), 1e-12));
    }
    for (double a : {0.5, 2.0, 7.3}) QVERIFY(near(j::regularizedIncompleteBeta(a, a, 0.5), 0.5, 1e-12));
    for (double x : {0.05, 0.3, 0.62, 0.97})
      QVERIFY(near(j::regularizedIncompleteBeta(3.7, 2.2, x), simpsonIncompleteBeta(3.7, 2.2, x), 1e-10));
    HH_VERIFY_THROWS_WITH(j::regularizedIncompleteBeta(0, 1, 0.5), "needs a, b > 0");
    HH_VERIFY_THROWS_WITH(j::regularizedIncompleteBeta(1, 1, 1.5), "0 <= x <= 1");
    HH_VERIFY_THROWS_WITH(j::regularizedIncompleteBeta(1, 1, std::nan("")), "0 <= x <= 1");
  }

  void studentPMatchesClosedFormsAndTables() {
    const double pi = std::acos(-1.0);
    for (double t : {0.0, 0.3, -1.0, 2.5, 12.706, -40.0}) {
      QVERIFY(near(j::studentTwoSidedP(t, 1), 1 - 2 * std::atan(std::fabs(t)) / pi, 1e-12));
      QVERIFY(near(j::studentTwoSidedP(t, 2), 1 - std::fabs(t) / std::sqrt(2 + t * t), 1e-12));
    }
    QVERIFY(near(j::studentTwoSidedP(3.182, 3), 0.05, 2e-4));
    QVERIFY(near(j::studentTwoSidedP(-5.841, 3), 0.01, 2e-4));
    QVERIFY(near(j::studentTwoSidedP(2.228, 10), 0.05, 2e-4));
    QVERIFY(near(j::studentTwoSidedP(3.169, 10), 0.01, 2e-4));
    QCOMPARE(j::studentTwoSidedP(std::numeric_limits<double>::infinity(), 3), 0.0);
    QVERIFY(std::isnan(j::studentTwoSidedP(std::nan(""), 3)));
    QVERIFY(std::isnan(j::studentTwoSidedP(1, 0)));
  }

  void pairedComparisonOfAWorkedExample() {
    const double nan = std::nan("");
    // Differences -2, -1, -4 (the NaN and the infinite pair skipped): mean -7/3, sd sqrt(7/3),
    // t = -sqrt(7), p (2 degrees of freedom) = 1 - sqrt(7) / 3.
    const auto c =
        j::pairedComparison({{10, 12}, {11, 12}, {nan, 1}, {9, 13}, {std::numeric_limits<double>::infinity(), 1}});
    QCOMPARE(c.n, 3);
    QVERIFY(near(c.mean, -7.0 / 3, 1e-14));
    QVERIFY(near(c.sd, std::sqrt(7.0 / 3), 1e-14));
    QVERIFY(near(c.t, -std::sqrt(7.0), 1e-13));
    QVERIFY(near(c.p, 1 - std::sqrt(7.0) / 3, 1e-12));
    QCOMPARE(c.lower, 3);
    QCOMPARE(c.higher, 0);

    const auto tie = j::pairedComparison({{1, 1}, {2, 1}, {0, 1}});
    QCOMPARE(tie.lower, 1);
    QCOMPARE(tie.higher, 1);
    QCOMPARE(tie.mean, 0.0);

    const auto one = j::pairedComparison({{5, 3}});
    QCOMPARE(one.n, 1);
    QCOMPARE(one.mean, 2.0);
    QVERIFY(std::isnan(one.sd) && std::isnan(one.t) && std::isnan(one.p));
    QCOMPARE(one.higher, 1);

    const auto same = j::pairedComparison({{3, 1}, {4, 2}});
    QVERIFY(std::isinf(same.t) && same.t > 0);
    QCOMPARE(same.p, 0.0);
    const auto none = j::pairedComparison({{3, 3}, {4, 4}});
    QCOMPARE(none.t, 0.0);
    QCOMPARE(none.p, 1.0);

    const auto empty = j::pairedComparison({{nan, 1}});
    QCOMPARE(empty.n, 0);
    QVERIFY(std::isnan(empty.mean));
  }
};

HH_TEST_SUITE(TestPairedComparison, "engine.jobs.paired_comparison",
              &TestPairedComparison::incompleteBetaMatchesClosedFormsAndAnIntegral,
              &TestPairedComparison::studentPMatchesClosedFormsAndTables,
              &TestPairedComparison::pairedComparisonOfAWorkedExample)

}  // namespace test_paired_comparison

#if HH_HAVE_QTEST
#include "test_paired_comparison.moc"
#endif
