// Ranking rows for Spearman's rho (see row_ranking.h).
#include "engine/metrics/row_ranking.h"

#include <cmath>

#include "engine/metrics/radix_sort.h"

namespace hh::metrics::detail {
namespace {

// Average ranks (1-based) of one row's valid keys. `keys` holds the valid key indices; they are
// sorted by value (scratch: `pairs`), and each run of equal values gets the mean of the ranks it
// spans. Writes rank[j] for the valid j. Returns false if a valid value is NaN (no ranking then).
bool averageRanks(const double* values, const std::vector<int64_t>& keys,
                  std::vector<std::pair<double, int64_t>>& pairs, double* rank) {
  pairs.clear();
  for (const int64_t j : keys) {
    if (std::isnan(values[j])) return false;
    pairs.emplace_back(values[j], j);
  }
  std::sort(pairs.begin(), pairs.end());
  const int64_t n = static_cast<int64_t>(pairs.size());
  for (int64_t start = 0; start < n;) {
    int64_t end = start + 1;
    while (end < n && pairs[end].first == pairs[start].first) ++end;
    // sorted positions start..end-1 hold ranks start+1..end: their mean is (start + 1 + end) / 2
    const double mean = 0.5 * static_cast<double>(start + 1 + end);
    for (int64_t t = start; t < end; ++t) rank[pairs[t].second] = mean;
    start = end;
  }
  return true;
}

// averageRanks for fp32 values (and narrower ones, widened to fp32 exactly): each valid key
// becomes one 64-bit integer, the float's order-preserving bits above the key's index (-0 taken
// as +0, as == does), sorted by radix (radix_sort.h), several times faster than pairs of double
// and index through std::sort. The same ranks (engine.metrics.attention compares the fp32 path
// with its exact fp64 copy to the bit).
bool averageRanksOfFloats(const float* values, const std::vector<int64_t>& keys, std::vector<uint64_t>& packed,
                          std::vector<uint64_t>& scratch, double* rank) {
  packed.clear();
  for (const int64_t j : keys) {
    if (std::isnan(values[j])) return false;
    packed.push_back(rankingKey(values[j], static_cast<uint32_t>(j)));
  }
  radixSortByUpperHalf(packed, scratch);
  const int64_t n = static_cast<int64_t>(packed.size());
  for (int64_t start = 0; start < n;) {
    int64_t end = start + 1;
    while (end < n && (packed[end] >> 32) == (packed[start] >> 32)) ++end;
    const double mean = 0.5 * static_cast<double>(start + 1 + end);  // as averageRanks
    for (int64_t t = start; t < end; ++t) rank[packed[t] & 0xffffffffu] = mean;
    start = end;
  }
  return true;
}

}  // namespace

torch::ScalarType blockType(const torch::Tensor& x, const torch::Tensor& y) {
  const bool wide = x.scalar_type() == torch::kDouble || (y.defined() && y.scalar_type() == torch::kDouble);
  return wide ? torch::kDouble : torch::kFloat;
}

torch::Tensor cpuBlock(const torch::Tensor& x, int64_t r0, int64_t r1, torch::ScalarType type) {
  return x.slice(0, r0, r1).to(torch::kCPU, type).contiguous();
}

RowRanker::RowRanker(int64_t tk) : rank_(tk) {
  keys_.reserve(tk);
  pairs_.reserve(tk);
  packed_.reserve(tk);
  scratch_.reserve(tk);
}

void RowRanker::setKeys(const bool* validRow, int64_t tk) {
  keys_.clear();
  for (int64_t j = 0; j < tk; ++j)
    if (!validRow || validRow[j]) keys_.push_back(j);
}

bool RowRanker::rank(const torch::Tensor& block, int64_t row) {
  const int64_t tk = block.size(1);
  return block.scalar_type() == torch::kFloat
             ? averageRanksOfFloats(block.data_ptr<float>() + row * tk, keys_, packed_, scratch_, rank_.data())
             : averageRanks(block.data_ptr<double>() + row * tk, keys_, pairs_, rank_.data());
}

double RowRanker::spread() const {
  const double mean = 0.5 * static_cast<double>(keys_.size() + 1);
  double sum = 0.0;
  for (const int64_t j : keys_) sum += (rank_[j] - mean) * (rank_[j] - mean);
  return sum;
}

}  // namespace hh::metrics::detail
