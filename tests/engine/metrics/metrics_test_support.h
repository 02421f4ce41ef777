// Small helpers the metrics suites share: tensors from literals, and a tolerance check that
// treats NaN as equal to NaN with a message that says how far off a value is.
#pragma once
#include <torch/types.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

namespace hh::test {

inline const double kNaN = std::numeric_limits<double>::quiet_NaN();

inline torch::Tensor f64(std::vector<double> values, std::vector<int64_t> shape) {
  return torch::tensor(values, torch::kDouble).reshape(shape);
}

inline torch::Tensor mask(std::vector<int> values, std::vector<int64_t> shape) {
  std::vector<int64_t> v(values.begin(), values.end());
  return torch::tensor(v, torch::kLong).reshape(shape).to(torch::kBool);
}

// Element i of a tensor read flat, as a double.
inline double valueAt(const torch::Tensor& t, int64_t i) { return t.reshape({-1})[i].item<double>(); }

// |got - want| <= tol; a NaN `want` asks for a NaN.
inline bool near(double got, double want, double tol) {
  if (std::isnan(want)) return std::isnan(got);
  return std::abs(got - want) <= tol;
}

inline std::string diff(double got, double want, double tol) {
  char text[160];
  std::snprintf(text, sizeof text, "got %.17g, want %.17g (off by %.3g, tolerance %.3g)", got, want, got - want, tol);
  return text;
}

}  // namespace hh::test
