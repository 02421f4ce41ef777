// Tensor -> std::vector / QVector copies for the widgets (see session_tensors.h).
#include "app/gui/common/session_tensors.h"

#include <torch/types.h>

#include <limits>

namespace hh::gui {

std::vector<float> toFloatVector(const torch::Tensor& t) {
  if (!t.defined() || t.numel() == 0) return {};
  const torch::Tensor c = t.detach().to(torch::kCPU, torch::kFloat).contiguous();
  const float* p = c.data_ptr<float>();
  return std::vector<float>(p, p + c.numel());
}

std::vector<float> toMaskedMatrix(const torch::Tensor& matrix, const torch::Tensor& valid) {
  // matrix: [..., T, Tk] with every leading dimension of size 1.
  torch::Tensor m = matrix.detach().to(torch::kCPU, torch::kFloat);
  if (valid.defined()) {
    const torch::Tensor mask = valid.to(torch::kCPU).to(torch::kBool).expand_as(m);
    m = m.masked_fill(mask.logical_not(), std::numeric_limits<float>::quiet_NaN());
  }
  return toFloatVector(m.reshape({m.size(-2), m.size(-1)}));
}

double toScalar(const torch::Tensor& t) {
  if (!t.defined() || t.numel() == 0) return std::numeric_limits<double>::quiet_NaN();
  const torch::Tensor c = t.detach().to(torch::kCPU, torch::kDouble);
  return c.numel() == 1 ? c.item<double>() : c.mean().item<double>();
}

QVector<double> toQVector(const std::vector<double>& values) {
  return QVector<double>(values.begin(), values.end());
}

}  // namespace hh::gui
