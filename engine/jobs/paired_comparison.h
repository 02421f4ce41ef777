// Two variants of an experiment compared repeat by repeat (experiment_groups.h, "baseline"): the
// paired differences' mean and spread, a two-sided paired t-test on them, and how many repeats
// came out lower or higher. With four data draws the p-value is weak evidence either way; the
// counts say the same thing without a distribution. No Torch.
#pragma once
#include <limits>
#include <utility>
#include <vector>

namespace hh::jobs {

struct PairedComparison {
  static constexpr double kUndefined = std::numeric_limits<double>::quiet_NaN();
  int n = 0;                 // pairs where both values are finite
  double mean = kUndefined;  // of (variant - baseline); NaN for n = 0
  double sd = kUndefined;    // sample sd of the differences (n - 1); NaN for n < 2
  double t = kUndefined;     // mean / (sd / sqrt(n)): NaN for n < 2; 0 where every difference is
                             // 0; +-inf where they are all the same non-zero value
  double p = kUndefined;     // two-sided, Student's t with n - 1 degrees of freedom (NaN for n < 2)
  int lower = 0;   // pairs where the variant's value is below the baseline's
  int higher = 0;  // ... above it
};

// pairs: (variant, baseline) values of one metric, one per repeat; non-finite pairs are skipped.
PairedComparison pairedComparison(const std::vector<std::pair<double, double>>& pairs);

// P(|T| >= |t|) for Student's t with `dof` > 0 degrees of freedom.
double studentTwoSidedP(double t, double dof);
// I_x(a, b), the regularized incomplete beta function, for a, b > 0 and 0 <= x <= 1.
double regularizedIncompleteBeta(double a, double b, double x);

}  // namespace hh::jobs
