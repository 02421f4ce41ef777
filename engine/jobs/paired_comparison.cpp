#include "engine/jobs/paired_comparison.h"

#include <cmath>
#include <limits>
#include <stdexcept>

namespace hh::jobs {

namespace {

// The continued fraction of I_x(a, b) (converges fast for x < (a + 1) / (a + b + 2)), evaluated
// by the modified Lentz method: f = 1 / (1 + d1 / (1 + d2 / (1 + ...))) with
//   d(2m + 1) = -(a + m)(a + b + m) x / ((a + 2m)(a + 2m + 1)),
//   d(2m)     = m (b - m) x / ((a + 2m - 1)(a + 2m)).
double betaContinuedFraction(double a, double b, double x) {
  constexpr double tiny = 1e-300, eps = 1e-15;
  double c = 1, d = 1 - (a + b) * x / (a + 1);
  if (std::fabs(d) < tiny) d = tiny;
  d = 1 / d;
  double f = d;
  for (int m = 1; m <= 500; ++m) {
    for (const double term : {m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                              -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))}) {
      d = 1 + term * d;
      if (std::fabs(d) < tiny) d = tiny;
      c = 1 + term / c;
      if (std::fabs(c) < tiny) c = tiny;
      d = 1 / d;
      f *= d * c;
      if (std::fabs(d * c - 1) < eps) return f;
    }
  }
  return f;  // 500 terms: far more than any a, b an experiment has
}

}  // namespace

double regularizedIncompleteBeta(double a, double b, double x) {
  if (!(a > 0) || !(b > 0) || !(x >= 0 && x <= 1))
    throw std::invalid_argument("regularizedIncompleteBeta: needs a, b > 0 and 0 <= x <= 1");
  if (x == 0 || x == 1) return x;
  // x^a (1 - x)^b / B(a, b), in logs.
  const double front =
      std::exp(std::lgamma(a + b) - std::lgamma(a) - std::lgamma(b) + a * std::log(x) + b * std::log1p(-x));
  if (x < (a + 1) / (a + b + 2)) return front * betaContinuedFraction(a, b, x) / a;
  return 1 - front * betaContinuedFraction(b, a, 1 - x) / b;  // I_x(a, b) = 1 - I_(1-x)(b, a)
}

double studentTwoSidedP(double t, double dof) {
  if (std::isnan(t) || !(dof > 0)) return PairedComparison::kUndefined;
  if (std::isinf(t)) return 0;
  return regularizedIncompleteBeta(dof / 2, 0.5, dof / (dof + t * t));
}

PairedComparison pairedComparison(const std::vector<std::pair<double, double>>& pairs) {
  std::vector<double> diffs;
  PairedComparison c;
  for (const auto& [variant, baseline] : pairs) {
    if (!std::isfinite(variant) || !std::isfinite(baseline)) continue;
    diffs.push_back(variant - baseline);
    c.lower += variant < baseline;
    c.higher += variant > baseline;
  }
  c.n = int(diffs.size());
  if (c.n == 0) return c;
  double sum = 0;
  for (double d : diffs) sum += d;
  c.mean = sum / c.n;
  if (c.n < 2) return c;
  double squares = 0;
  for (double d : diffs) squares += (d - c.mean) * (d - c.mean);
  c.sd = std::sqrt(squares / (c.n - 1));
  if (c.sd == 0) {
    c.t = c.mean == 0 ? 0 : std::copysign(std::numeric_limits<double>::infinity(), c.mean);
    c.p = c.mean == 0 ? 1 : 0;
    return c;
  }
  c.t = c.mean / (c.sd / std::sqrt(double(c.n)));
  c.p = studentTwoSidedP(c.t, c.n - 1);
  return c;
}

}  // namespace hh::jobs
