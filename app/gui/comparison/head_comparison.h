// The engine side of the feature-map comparison (comparison_session.h) on given q, k: shared by
// the random head and a loaded model's head (model_session.cpp). Torch header; app/gui only.
#pragma once

#include <torch/types.h>

#include "app/gui/comparison/comparison_session.h"
namespace hh::gui {

// A converted layer's own weights for one head, its rule, window and gates included (what
// LinearAttention::weights gives): the comparison's "trained" map.
struct TrainedWeights {
  torch::Tensor weights;  // [1, 1, T, T]
  int featureDim = 0;     // F of the layer's feature map
};

// q, k [1, 1, T, D] (any float type; computed in float32). `trained` serves the name "trained"
// (nullptr: "trained" is reported as an error). Fills everything in the result but
// settings/source/tokens/milliseconds; throws on bad input.
void compareHead(const torch::Tensor& q, const torch::Tensor& k, bool causal, const ComparisonSettings& settings,
                 const TrainedWeights* trained, ComparisonResult& result);

}  // namespace hh::gui
