// Tensor -> plain data for the widgets, which never see Torch (docs/design.md, "Shape"). Everything
// is copied to the CPU in float32 (matrices) or float64 (curves), row-major.
#pragma once

#include <torch/types.h>

#include <QVector>

#include <vector>

namespace hh::gui {

// Any shape, flattened in row-major order, as float32.
std::vector<float> toFloatVector(const torch::Tensor& t);

// A [T, Tk] matrix (leading size-1 dimensions allowed, e.g. [1, 1, T, Tk]) with NaN where
// `valid` (bool, broadcastable to it; undefined = all valid) is false: masked pairs show as the
// heatmap's neutral background.
std::vector<float> toMaskedMatrix(const torch::Tensor& matrix, const torch::Tensor& valid = {});

// The single value of a one-element tensor (or the mean of a larger one) as a double.
double toScalar(const torch::Tensor& t);

QVector<double> toQVector(const std::vector<double>& values);

}  // namespace hh::gui
