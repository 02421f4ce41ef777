// Block reduction of a row-major matrix for display: a 4096 x 4096 attention map is drawn as at
// most ~512 x 512 cells, each cell reducing one block of the full matrix. The full values stay
// with the caller (hover readouts read them, not the reduced ones).
//   values : rows x cols floats, row-major; NaN marks a masked cell (ignored by the reduction,
//            a block with no finite value stays NaN).
// A region (a sub-rectangle, e.g. the zoomed-in part) can be reduced on its own. Blocks are
// blockRows x blockCols; the last block along each axis may be smaller. Display cell (r, c)
// covers source rows [row0 + r * blockRows, row0 + (r + 1) * blockRows), likewise columns.
#pragma once
#include <cstddef>
#include <memory>
#include <vector>

namespace hh::widgets {

// A matrix's values shared between their producer and the views that draw them: a 4096 x 4096
// map (67 MB) is handed to a view without a copy on the GUI thread.
using SharedValues = std::shared_ptr<const std::vector<float>>;

enum class BlockReduce {
  Max,     // largest value: keeps sharp attention peaks visible
  Mean,    // average of the finite values
  AbsMax,  // the value of largest magnitude, sign kept: for signed differences
};

struct DownsampledMatrix {
  int row0 = 0, col0 = 0;            // source cell of display cell (0, 0)
  int rows = 0, cols = 0;            // display size
  int blockRows = 1, blockCols = 1;  // source cells per display cell along each axis
  std::vector<float> values;         // rows x cols, row-major
};

// Finite minimum and maximum of n values; valid = false when none is finite.
struct FiniteRange {
  double lo = 0.0, hi = 0.0;
  bool valid = false;
};
FiniteRange finiteRange(const float* values, std::size_t n);

// Reduces the whole matrix to at most maxRows x maxCols, block = ceil(size / max) (a matrix
// already small enough is copied as is).
DownsampledMatrix downsampleMatrix(int rows, int cols, const float* values, int maxRows, int maxCols,
                                   BlockReduce reduce);

// A sub-rectangle of the matrix, in source cells.
struct MatrixRegion {
  int row0 = 0, col0 = 0, rows = 0, cols = 0;
};
// Reduces `region` (clipped to the matrix) of a rows x cols matrix with the given block sizes (>= 1).
DownsampledMatrix downsampleRegion(int rows, int cols, const float* values, MatrixRegion region, int blockRows,
                                   int blockCols, BlockReduce reduce);

}  // namespace hh::widgets
