// The engine side of the feature-map comparison (comparison_session.h) on given q, k: shared by
// the random head and a loaded model's head (model_session.cpp). Torch header; app/gui only.
#pragma once

#include <torch/types.h>

#include "app/gui/comparison/comparison_session.h"
#include "engine/attention/feature_map.h"

namespace hh::gui {

// q, k [1, 1, T, D] (any float type; computed in float32). `trained` serves the name "trained"
// (nullptr: "trained" is reported as an error); `trainedHead` selects its head. Fills everything
// in the result but settings/source/tokens/milliseconds; throws on bad input.
void compareHead(const torch::Tensor& q, const torch::Tensor& k, bool causal, const ComparisonSettings& settings,
                 hh::attn::FeatureMap* trained, int trainedHead, ComparisonResult& result);

}  // namespace hh::gui
