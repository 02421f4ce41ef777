// How a HeatmapView maps its source cells to display cells along one axis: which cells to reduce,
// in blocks of what size, and where each display cell's centre lies in plot coordinates.
#pragma once
#include "widgets/qcp.h"

namespace hh::widgets {

// Centre, in plot coordinates, of display cell i when display cell 0 starts at source cell
// `start` and each display cell covers `block` source cells.
double blockCenter(int start, int i, int block);

// The range of display-cell centres along one axis. QCPColorMap draws nothing for a single
// cell (its width is derived from the distance between cell centres), so one display cell is
// drawn as two copies a half block apart.
QCPRange centreRange(int start, int displayCells, int block);

// Display cells available along an axis of `pixels` length, at most `maxCells` (a plot not laid
// out yet gets the maximum; the view re-plans once it is).
int cellBudget(int pixels, int maxCells);

// Which source cells to reduce along one axis and how coarsely: the visible cells plus a
// quarter of their extent on each side (room to pan before the next re-reduction), blocks
// aligned to multiples of the block size so that panning does not shift block boundaries.
struct AxisPlan {
  int start = 0, span = 0, block = 1;
  bool operator==(const AxisPlan& o) const { return start == o.start && span == o.span && block == o.block; }
};
AxisPlan planAxis(const QCPRange& range, int cells, int budget);

}  // namespace hh::widgets
