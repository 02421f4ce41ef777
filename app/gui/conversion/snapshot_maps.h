// How the dashboard prepares a run file's snapshot maps ([S, S] each, row-major) for drawing.
#pragma once
#include <utility>
#include <vector>

namespace hh::gui {

// A causal map stored with zeros above the diagonal (files pooled before the future was stored
// as NaN): those pairs become NaN, drawn grey like the other views draw them, not weights of 0.
void maskAboveDiagonalIfCausal(int size, std::vector<float>& map);

// One colour range for the softmax and the linear map: from min(0, lowest value) to the 99th
// percentile of both maps' finite values, so a few saturated cells (the first query's single key
// is always 1) do not leave the rest in the darkest colours. (0, 0) when there is no value.
std::pair<double, double> sharedWeightRange(const std::vector<float>& softmax, const std::vector<float>& linear);

}  // namespace hh::gui
