// Display-cell planning of a HeatmapView along one axis; see heatmap_axes.h.
#include "widgets/heatmap_axes.h"

#include <algorithm>
#include <cmath>

namespace hh::widgets {
namespace {
constexpr int kMinBudget = 32;  // display cells per side, at least
}  // namespace

double blockCenter(int start, int i, int block) {
  return start + i * double(block) + (block - 1) / 2.0;
}

QCPRange centreRange(int start, int displayCells, int block) {
  if (displayCells == 1) {
    const double c = blockCenter(start, 0, block);
    return QCPRange(c - block / 4.0, c + block / 4.0);
  }
  return QCPRange(blockCenter(start, 0, block), blockCenter(start, displayCells - 1, block));
}

int cellBudget(int pixels, int maxCells) {
  if (pixels < kMinBudget) return maxCells;
  return std::clamp(pixels, kMinBudget, maxCells);
}

AxisPlan planAxis(const QCPRange& range, int cells, int budget) {
  if (cells <= budget) return AxisPlan{0, cells, 1};
  const int lo = std::clamp(int(std::floor(range.lower + 0.5)), 0, cells - 1);
  const int hi = std::clamp(int(std::floor(range.upper + 0.5)), 0, cells - 1);
  const int margin = (hi - lo + 1) / 4;
  int a = std::max(0, lo - margin);
  const int b = std::min(cells, hi + 1 + margin);
  const int block = std::max(1, (b - a + budget - 1) / budget);
  a = (a / block) * block;
  return AxisPlan{a, b - a, block};
}

}  // namespace hh::widgets
