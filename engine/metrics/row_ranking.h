// Ranking the rows of attention tensors for Spearman's rho (attention_metrics.cpp): each row's
// valid keys sorted by value, ties averaged, rows in parallel; and the CPU blocks the metrics walk
// big inputs in. Internal to the metrics library (docs/metrics.md, "Spearman").
#pragma once

#include <ATen/Parallel.h>
#include <torch/types.h>

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

namespace hh::metrics::detail {

// Elements per block when a metric walks the rows of a big input: bounds the float64 temporaries
// (about 32 MiB each) whatever the input size.
inline constexpr int64_t kBlockElements = int64_t{1} << 22;

// The type a CPU pass reads its inputs in: float64 if one of them is, else float32 (fp32, bf16 and
// fp16 values are exact in it), which is half the memory and ranks faster.
torch::ScalarType blockType(const torch::Tensor& x, const torch::Tensor& y = {});

// Rows [r0, r1) of x [rows, Tk] as a contiguous CPU block of `type`.
torch::Tensor cpuBlock(const torch::Tensor& x, int64_t r0, int64_t r1, torch::ScalarType type);

// Ranks one row's valid keys: fp32 values through the packed sort, fp64 through pairs.
class RowRanker {
 public:
  explicit RowRanker(int64_t tk);
  // Takes the valid keys of a row (validRow null: every key).
  void setKeys(const bool* validRow, int64_t tk);
  const std::vector<int64_t>& keys() const { return keys_; }
  // Average ranks of row `row` of a block (cpuBlock) at the keys into ranks(); false if a
  // value there is NaN.
  bool rank(const torch::Tensor& block, int64_t row);
  const std::vector<double>& ranks() const { return rank_; }
  // Sum over the keys of (rank - mean)^2; the mean of average ranks 1..n is (n + 1) / 2.
  double spread() const;

 private:
  std::vector<double> rank_;
  std::vector<int64_t> keys_;
  std::vector<std::pair<double, int64_t>> pairs_;
  std::vector<uint64_t> packed_, scratch_;
};

// Ranks every row of x [rows, Tk] that has at least 3 valid keys (validKeys [rows, Tk] bool,
// contiguous, CPU, or undefined: all) and hands it on: rowFn(r, ranker, ranked), ranked false
// when a valid value is NaN. Rows in parallel, converted a block at a time.
template <typename RowFn>
void rankRows(const torch::Tensor& x, const torch::Tensor& validKeys, RowFn rowFn) {
  const int64_t rowsTotal = x.size(0), tk = x.size(1);
  const int64_t blockRows = std::max<int64_t>(1, kBlockElements / std::max<int64_t>(tk, 1));
  for (int64_t r0 = 0; r0 < rowsTotal; r0 += blockRows) {
    const int64_t r1 = std::min(rowsTotal, r0 + blockRows);
    const auto block = cpuBlock(x, r0, r1, blockType(x));
    at::parallel_for(r0, r1, 16, [&](int64_t begin, int64_t end) {
      RowRanker ranker(tk);
      for (int64_t r = begin; r < end; ++r) {
        ranker.setKeys(validKeys.defined() ? validKeys.data_ptr<bool>() + r * tk : nullptr, tk);
        if (ranker.keys().size() < 3) continue;  // too few keys: skipped whatever the values
        const bool ranked = ranker.rank(block, r - r0);
        rowFn(r, ranker, ranked);
      }
    });
  }
}

}  // namespace hh::metrics::detail
