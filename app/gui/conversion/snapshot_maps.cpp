// How the dashboard prepares snapshot maps for drawing; see snapshot_maps.h.
#include "app/gui/conversion/snapshot_maps.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>

#include "engine/runs/run_layout.h"

namespace hh::gui {

void maskAboveDiagonalIfCausal(int size, std::vector<float>& map) {
  if (size < 2 || map.size() != size_t(size) * size_t(size) || !runs::isCausalMap(map.data(), size)) return;
  for (size_t r = 0; r < size_t(size); ++r)
    for (size_t c = r + 1; c < size_t(size); ++c) map[r * size_t(size) + c] = std::numeric_limits<float>::quiet_NaN();
}

std::pair<double, double> sharedWeightRange(const std::vector<float>& softmax, const std::vector<float>& linear) {
  std::vector<float> finite;
  for (const auto* map : {&softmax, &linear})
    for (float v : *map)
      if (std::isfinite(v)) finite.push_back(v);
  if (finite.empty()) return {0.0, 0.0};
  const double lo = std::min(0.0, double(*std::min_element(finite.begin(), finite.end())));
  const auto nth = finite.begin() + std::ptrdiff_t(0.99 * double(finite.size() - 1));
  std::nth_element(finite.begin(), nth, finite.end());
  return {lo, double(*nth)};
}

}  // namespace hh::gui
