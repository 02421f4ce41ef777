// Attention metrics (see attention_metrics.h for the contract, docs/metrics.md for the formulas).
// Everything is computed in float64. Entropy and KL sum each row in one C++ pass on the CPU, and as
// Torch ops on the input's device elsewhere; Spearman ranks each row (its valid keys sorted, ties
// averaged) in a parallel C++ pass on the CPU (row_ranking.h). at::parallel_for is inlined here: it
// only runs in parallel when this file is compiled with OpenMP flags (Torch's parallel backend);
// otherwise it is serial but still correct.
#include "engine/metrics/attention_metrics.h"

#include "engine/metrics/row_ranking.h"

#include <ATen/Parallel.h>
#include <torch/types.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace hh::metrics {
namespace {

using detail::blockType;
using detail::cpuBlock;
using detail::kBlockElements;
using detail::rankRows;
using detail::RowRanker;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

std::string shapeString(torch::IntArrayRef sizes) {
  std::string s = "[";
  for (size_t i = 0; i < sizes.size(); ++i) s += (i ? ", " : "") + std::to_string(sizes[i]);
  return s + "]";
}

void checkWeights(const char* fn, const torch::Tensor& w) {
  TORCH_CHECK(w.defined(), fn, ": tensor is undefined");
  TORCH_CHECK(w.dim() >= 2, fn, ": expected [..., Tq, Tk], got ", shapeString(w.sizes()));
  TORCH_CHECK(w.is_floating_point(), fn, ": expected a floating-point tensor, got ", w.scalar_type());
}

void checkPair(const char* fn, const torch::Tensor& x, const torch::Tensor& y) {
  checkWeights(fn, x);
  checkWeights(fn, y);
  TORCH_CHECK(x.sizes() == y.sizes(), fn, ": both tensors must have the same shape, got ", shapeString(x.sizes()),
              " and ", shapeString(y.sizes()));
}

// valid [broadcastable to sizes] bool, or undefined -> bool view of shape `sizes` on `device`, or undefined.
torch::Tensor expandValid(const char* fn, const torch::Tensor& valid, torch::IntArrayRef sizes, torch::Device device) {
  if (!valid.defined()) return {};
  TORCH_CHECK(valid.scalar_type() == torch::kBool, fn, ": valid must be a bool tensor, got ", valid.scalar_type());
  bool ok = valid.dim() <= static_cast<int64_t>(sizes.size());
  for (int64_t i = 1; ok && i <= valid.dim(); ++i) {
    const int64_t v = valid.size(-i), s = sizes[sizes.size() - i];
    ok = v == 1 || v == s;
  }
  TORCH_CHECK(ok, fn, ": valid ", shapeString(valid.sizes()), " does not broadcast to ", shapeString(sizes));
  return valid.to(device).expand(sizes);
}

// rows [..., H, Tq] (or [Tq] for a 2-D input), used [same] bool -> [H]: mean over used rows per head.
// NaN in a used row propagates; a head with no used row is NaN (0 / 0).
torch::Tensor headMean(const torch::Tensor& rows, const torch::Tensor& used, int64_t inputDim) {
  torch::Tensor r = rows, u = used;
  if (inputDim == 2) {
    r = r.unsqueeze(0);
    u = u.unsqueeze(0);
  }
  const int64_t heads = r.size(-2);
  r = r.movedim(-2, 0).reshape({heads, -1});
  u = u.movedim(-2, 0).reshape({heads, -1});
  const auto total = torch::where(u, r, torch::zeros_like(r)).sum(1);
  return total / u.sum(1).to(torch::kDouble);
}

// rows [r1 - r0] <- each row's sum of term(x, y) over its valid keys, in float64, in one pass a row,
// rows in parallel. x, y [r1 - r0, Tk] (y may be null), valid [same] bool (null: all valid).
template <typename T, typename ScalarTerm>
void sumRowsOnCpu(const T* x, const T* y, const bool* valid, int64_t rows, int64_t tk, double* out, ScalarTerm term) {
  at::parallel_for(0, rows, 16, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      double sum = 0.0;
      for (int64_t j = r * tk; j < (r + 1) * tk; ++j)
        if (!valid || valid[j]) sum += term(static_cast<double>(x[j]), y ? static_cast<double>(y[j]) : 0.0);
      out[r] = sum;
    }
  });
}

// x2, y2 [rows, Tk] (y2 may be undefined), v2 [rows, Tk] bool or undefined -> [rows] float64 row sums
// of term over the valid keys (0 for a row without one), on the CPU a block at a time: the inputs
// are read in their own type (blockType), no [rows, Tk] float64 temporaries.
template <typename ScalarTerm>
torch::Tensor rowSumsOnCpu(const torch::Tensor& x2, const torch::Tensor& y2, const torch::Tensor& v2, ScalarTerm term) {
  const int64_t rowsTotal = x2.size(0), tk = x2.size(1);
  const auto type = blockType(x2, y2);
  auto rows = torch::zeros({rowsTotal}, torch::kDouble);
  const int64_t blockRows = std::max<int64_t>(1, kBlockElements / tk);
  for (int64_t r0 = 0; r0 < rowsTotal; r0 += blockRows) {
    const int64_t r1 = std::min(rowsTotal, r0 + blockRows);
    const auto xb = cpuBlock(x2, r0, r1, type);
    const auto yb = y2.defined() ? cpuBlock(y2, r0, r1, type) : torch::Tensor();
    const auto vb = v2.defined() ? v2.slice(0, r0, r1).contiguous() : torch::Tensor();
    const bool* valid = vb.defined() ? vb.data_ptr<bool>() : nullptr;
    double* out = rows.data_ptr<double>() + r0;
    if (type == torch::kDouble) {
      sumRowsOnCpu(xb.data_ptr<double>(), yb.defined() ? yb.data_ptr<double>() : nullptr, valid, r1 - r0, tk, out,
                   term);
    } else {
      sumRowsOnCpu(xb.data_ptr<float>(), yb.defined() ? yb.data_ptr<float>() : nullptr, valid, r1 - r0, tk, out, term);
    }
  }
  return rows;
}

// The same sums as rowSumsOnCpu with Torch ops on x2's device: tensorTerm maps float64 [r, Tk]
// blocks (not to be modified: a float64 input is passed as is) to a new tensor of per-pair terms.
template <typename TensorTerm>
torch::Tensor rowSumsOnDevice(const torch::Tensor& x2, const torch::Tensor& y2, const torch::Tensor& v2,
                              TensorTerm tensorTerm) {
  const int64_t rowsTotal = x2.size(0), tk = x2.size(1);
  const auto invalid2 = v2.defined() ? v2.logical_not() : torch::Tensor();
  auto rows = torch::empty({rowsTotal}, x2.options().dtype(torch::kDouble));
  const int64_t blockRows = std::max<int64_t>(1, kBlockElements / tk);
  for (int64_t r0 = 0; r0 < rowsTotal; r0 += blockRows) {
    const int64_t r1 = std::min(rowsTotal, r0 + blockRows);
    auto terms = tensorTerm(x2.slice(0, r0, r1).to(torch::kDouble),
                            y2.defined() ? y2.slice(0, r0, r1).to(torch::kDouble) : torch::Tensor());
    if (invalid2.defined()) terms.masked_fill_(invalid2.slice(0, r0, r1), 0.0);
    rows.slice(0, r0, r1).copy_(terms.sum(-1));
  }
  return rows;
}

// x, y [..., Tq, Tk] (y may be undefined) -> (row sums [..., Tq], rows with >= 1 valid key [..., Tq]).
// Each row sums one term per valid pair, in float64; a row without a valid key is NaN. On the CPU
// scalarTerm(x, y) on doubles (rowSumsOnCpu), elsewhere tensorTerm, the same formula as Torch ops
// on the input's device (rowSumsOnDevice).
template <typename TensorTerm, typename ScalarTerm>
std::pair<torch::Tensor, torch::Tensor> rowSums(const char* fn, const torch::Tensor& x, const torch::Tensor& y,
                                                const torch::Tensor& valid, TensorTerm tensorTerm,
                                                ScalarTerm scalarTerm) {
  const auto device = x.device();
  const int64_t tk = x.size(-1);
  const int64_t rowsTotal = tk > 0 ? x.numel() / tk : 0;
  const auto rowShape = x.sizes().slice(0, x.dim() - 1);
  const auto f64 = torch::TensorOptions().dtype(torch::kDouble).device(device);
  if (rowsTotal == 0) {  // no rows, or rows without keys
    if (valid.defined()) expandValid(fn, valid, x.sizes(), device);  // still refuses a mask that does not fit
    return {torch::full(rowShape, kNaN, f64), torch::zeros(rowShape, f64.dtype(torch::kBool))};
  }
  const auto x2 = x.reshape({rowsTotal, tk});
  const auto y2 = y.defined() ? y.to(device).reshape({rowsTotal, tk}) : torch::Tensor();
  const auto v2 =
      valid.defined() ? expandValid(fn, valid, x.sizes(), device).reshape({rowsTotal, tk}) : torch::Tensor();
  auto rows = device.is_cpu() ? rowSumsOnCpu(x2, y2, v2, scalarTerm) : rowSumsOnDevice(x2, y2, v2, tensorTerm);
  const auto used = v2.defined() ? v2.any(-1) : torch::ones({rowsTotal}, f64.dtype(torch::kBool));
  rows.masked_fill_(used.logical_not(), kNaN);
  return {rows.reshape(rowShape), used.reshape(rowShape)};
}

// weights [..., Tq, Tk] -> (row entropies [..., Tq], rows with >= 1 valid key [..., Tq]).
std::pair<torch::Tensor, torch::Tensor> entropyRows(const char* fn, const torch::Tensor& weights,
                                                    const torch::Tensor& valid) {
  checkWeights(fn, weights);
  // -w log w; 0 where w == 0; NaN where w < 0 or w is NaN
  return rowSums(
      fn, weights, {}, valid, [](const torch::Tensor& w, const torch::Tensor&) { return torch::xlogy(w, w).neg_(); },
      [](double w, double) { return w == 0.0 ? 0.0 : -w * std::log(w); });
}

// p, a [..., Tq, Tk] -> (row KL [..., Tq], rows with >= 1 valid key [..., Tq]).
std::pair<torch::Tensor, torch::Tensor> klRows(const char* fn, const torch::Tensor& p, const torch::Tensor& a,
                                               const torch::Tensor& valid) {
  checkPair(fn, p, a);
  // p (log(p + eps) - log(a + eps)), as p log((p + eps) / (a + eps)): one logarithm instead of two,
  // and no cancellation where p and a are close (identical rows give exactly 0 either way); terms
  // with p = 0 are 0.
  const auto tensorTerm = [](const torch::Tensor& pd, const torch::Tensor& ad) {
    auto terms = (pd + kKlEpsilon).div_(ad + kKlEpsilon).log_().mul_(pd);
    return terms.masked_fill_(pd == 0, 0.0);
  };
  const auto scalarTerm = [](double pd, double ad) {
    return pd == 0.0 ? 0.0 : pd * std::log((pd + kKlEpsilon) / (ad + kKlEpsilon));
  };
  return rowSums(fn, p, a, valid, tensorTerm, scalarTerm);
}

// (rho [..., Tq] on the scores' device, skipped [..., Tq] bool) of weights against ranked scores.
// A row is skipped (rho NaN) if it has < 3 valid keys or constant valid scores or weights; a row
// with a NaN among its valid scores or weights is NaN but not skipped, so it poisons the head mean.
std::pair<torch::Tensor, torch::Tensor> spearmanRows(const char* fn, const RankedScores& s,
                                                     const torch::Tensor& weights) {
  checkWeights(fn, weights);
  TORCH_CHECK(weights.sizes() == torch::IntArrayRef(s.sizes), fn, ": both tensors must have the same shape, got ",
              shapeString(s.sizes), " and ", shapeString(weights.sizes()));
  const int64_t rowsTotal = static_cast<int64_t>(s.sxx.size()), tk = s.sizes.back();
  const std::vector<int64_t> rowShape(s.sizes.begin(), s.sizes.end() - 1);
  auto rho = torch::full({rowsTotal}, kNaN, torch::kDouble);    // skipped rows keep NaN
  auto skipped = torch::ones({rowsTotal}, torch::kBool);        // and true
  double* rhoPtr = rho.data_ptr<double>();
  bool* skipPtr = skipped.data_ptr<bool>();
  const float* rankPtr = s.ranks.data_ptr<float>();
  rankRows(weights.reshape({rowsTotal, tk}), s.validKeys, [&](int64_t r, const RowRanker& w, bool ranked) {
    if (std::isnan(s.sxx[r]) || !ranked) {
      skipPtr[r] = false;  // NaN data: reported, not hidden
      return;
    }
    const double syy = w.spread();
    if (s.sxx[r] == 0.0 || syy == 0.0) return;  // constant scores or weights: skipped
    // Both rank vectors are permutations (ties averaged) of 1..n: their mean is (n + 1) / 2.
    const double mean = 0.5 * static_cast<double>(w.keys().size() + 1);
    const float* rankS = rankPtr + r * tk;
    double sxy = 0.0;
    for (const int64_t j : w.keys()) sxy += (double(rankS[j]) - mean) * (w.ranks()[j] - mean);
    rhoPtr[r] = sxy / std::sqrt(s.sxx[r] * syy);
    skipPtr[r] = false;
  });
  return {rho.reshape(rowShape).to(s.device), skipped.reshape(rowShape).to(s.device)};
}

}  // namespace

RankedScores::RankedScores(const torch::Tensor& scores, const torch::Tensor& valid) : device(scores.device()) {
  checkWeights("RankedScores", scores);
  sizes = scores.sizes().vec();
  const int64_t tk = sizes.back();
  // Average ranks are multiples of 1/2 up to Tk: exact in float32 below 2^23 keys.
  TORCH_CHECK(tk < (int64_t{1} << 23), "RankedScores: ", tk, " keys are too many to rank in float32");
  int64_t rowsTotal = 1;
  for (size_t i = 0; i + 1 < sizes.size(); ++i) rowsTotal *= sizes[i];
  sxx.assign(static_cast<size_t>(rowsTotal), 0.0);
  ranks = torch::zeros({rowsTotal, tk}, torch::kFloat);
  if (rowsTotal == 0 || tk == 0) return;
  if (valid.defined())
    validKeys = expandValid("RankedScores", valid, scores.sizes(), torch::kCPU).reshape({rowsTotal, tk}).contiguous();
  float* rankPtr = ranks.data_ptr<float>();
  rankRows(scores.reshape({rowsTotal, tk}), validKeys, [&](int64_t r, const RowRanker& ranker, bool ranked) {
    if (!ranked) {
      sxx[static_cast<size_t>(r)] = kNaN;
      return;
    }
    for (const int64_t j : ranker.keys()) rankPtr[r * tk + j] = static_cast<float>(ranker.ranks()[j]);
    sxx[static_cast<size_t>(r)] = ranker.spread();
  });
}

torch::Tensor causalMask(int64_t length, torch::Device device) {
  // -> [T, T] bool, true on and below the diagonal
  TORCH_CHECK(length >= 0, "causalMask: negative length ", length);
  return torch::ones({length, length}, torch::TensorOptions().dtype(torch::kBool).device(device)).tril();
}

torch::Tensor rowEntropy(const torch::Tensor& weights, const torch::Tensor& valid) {
  // weights [..., Tq, Tk] -> [..., Tq]
  return entropyRows("rowEntropy", weights, valid).first;
}

torch::Tensor headEntropy(const torch::Tensor& weights, const torch::Tensor& valid) {
  // weights [B, H, Tq, Tk] (any leading dims, or [Tq, Tk]) -> [H]
  const auto [rows, used] = entropyRows("headEntropy", weights, valid);
  return headMean(rows, used, weights.dim());
}

torch::Tensor rowKl(const torch::Tensor& p, const torch::Tensor& a, const torch::Tensor& valid) {
  // p, a [..., Tq, Tk] -> [..., Tq]
  return klRows("rowKl", p, a, valid).first;
}

torch::Tensor headKl(const torch::Tensor& p, const torch::Tensor& a, const torch::Tensor& valid) {
  // p, a [B, H, Tq, Tk] (any leading dims, or [Tq, Tk]) -> [H]
  const auto [rows, used] = klRows("headKl", p, a, valid);
  return headMean(rows, used, p.dim());
}

torch::Tensor rowSpearman(const torch::Tensor& scores, const torch::Tensor& weights, const torch::Tensor& valid) {
  // scores, weights [..., Tq, Tk] -> [..., Tq]
  checkPair("rowSpearman", scores, weights);
  return rowSpearman(RankedScores(scores, valid), weights);
}

torch::Tensor headSpearman(const torch::Tensor& scores, const torch::Tensor& weights, const torch::Tensor& valid) {
  // scores, weights [B, H, Tq, Tk] (any leading dims, or [Tq, Tk]) -> [H]
  checkPair("headSpearman", scores, weights);
  return headSpearman(RankedScores(scores, valid), weights);
}

torch::Tensor rowSpearman(const RankedScores& scores, const torch::Tensor& weights) {
  return spearmanRows("rowSpearman", scores, weights).first;
}

torch::Tensor headSpearman(const RankedScores& scores, const torch::Tensor& weights) {
  const auto [rows, skipped] = spearmanRows("headSpearman", scores, weights);
  return headMean(rows, skipped.logical_not(), static_cast<int64_t>(scores.sizes.size()));
}

// From this many pairs on, monotonicityCurve bins the central 99.8 % of the scores.
constexpr int64_t kCurveTrimMinPairs = 2000;

namespace {

// The bins span the scores' central range: with many pairs, from the 0.1th to the 99.9th
// percentile, the few beyond counted in the edge bins. A handful of outlying scores (a token
// attending to itself) would otherwise stretch the axis into bins of one or two pairs, drawn as
// stray points far from the curve. sv [N], N >= 1.
std::pair<double, double> curveRange(const torch::Tensor& sv) {
  const int64_t n = sv.numel();
  if (n < kCurveTrimMinPairs) return {sv.min().item<double>(), sv.max().item<double>()};
  const int64_t tail = n / 1000;
  return {std::get<0>(sv.kthvalue(tail + 1)).item<double>(), std::get<0>(sv.kthvalue(n - tail)).item<double>()};
}

// The bin of each score sv [N] -> [N] int64; writes the bins' centres into `centers`.
torch::Tensor binOfEachScore(const torch::Tensor& sv, int bins, std::vector<double>& centers) {
  const auto [lo, hi] = curveRange(sv);
  const double width = (hi - lo) / bins;
  if (width > 0.0) {
    // Bin b holds lo + b*width <= s < lo + (b+1)*width; the maximum goes into the last bin.
    for (int b = 0; b < bins; ++b) centers[b] = lo + (b + 0.5) * width;
    return torch::floor((sv - lo) / width).clamp(0, bins - 1).to(torch::kLong);
  }
  // All scores equal (or a range too narrow to split): every pair goes into bin bins/2, centred on
  // the score; the other bins are empty, 1/bins wide, so the curve keeps `bins` entries.
  for (int b = 0; b < bins; ++b) centers[b] = lo + (b - bins / 2) * (1.0 / bins);
  return torch::full_like(sv, bins / 2, torch::kLong);
}

// Count, mean and population standard deviation of the weights wv [N] in each bin idx [N].
void fillBinStatistics(MonotonicityCurve& curve, const torch::Tensor& idx, const torch::Tensor& wv, int bins) {
  const auto count = torch::zeros({bins}, torch::kLong).index_add_(0, idx, torch::ones_like(idx));
  const auto countD = count.to(torch::kDouble);
  const auto mean = torch::zeros({bins}, torch::kDouble).index_add_(0, idx, wv) / countD;
  const auto dev = wv - mean.index_select(0, idx);
  const auto stdv = (torch::zeros({bins}, torch::kDouble).index_add_(0, idx, dev * dev) / countD).sqrt();
  const auto countA = count.accessor<int64_t, 1>();
  const auto meanA = mean.accessor<double, 1>();
  const auto stdA = stdv.accessor<double, 1>();
  for (int b = 0; b < bins; ++b) {
    curve.count[b] = countA[b];
    if (countA[b] > 0) {
      curve.mean[b] = meanA[b];
      curve.stddev[b] = stdA[b];
    }
  }
}

}  // namespace

MonotonicityCurve monotonicityCurve(const torch::Tensor& scores, const torch::Tensor& weights,
                                    const torch::Tensor& valid, int bins) {
  // scores, weights [..., Tq, Tk] -> `bins` bins over the valid pairs with a finite score
  checkPair("monotonicityCurve", scores, weights);
  TORCH_CHECK(bins >= 1, "monotonicityCurve: bins must be >= 1, got ", bins);
  const auto s = scores.to(torch::kCPU, torch::kDouble);
  const auto w = weights.to(torch::kCPU, torch::kDouble);
  auto keep = torch::isfinite(s);
  const auto mask = expandValid("monotonicityCurve", valid, s.sizes(), torch::kCPU);
  if (mask.defined()) keep = keep & mask;
  const auto sv = s.masked_select(keep);  // [N]
  const auto wv = w.masked_select(keep);  // [N]

  MonotonicityCurve curve;
  curve.binCenters.assign(bins, kNaN);
  curve.mean.assign(bins, kNaN);
  curve.stddev.assign(bins, kNaN);
  curve.count.assign(bins, 0);
  if (sv.numel() == 0) return curve;
  fillBinStatistics(curve, binOfEachScore(sv, bins, curve.binCenters), wv, bins);
  return curve;
}

HeadPatterns headPatterns(const torch::Tensor& weights, const torch::Tensor& ids) {
  TORCH_CHECK(weights.dim() == 4 && ids.dim() == 2 && weights.size(0) == ids.size(0) &&
                  weights.size(2) == ids.size(1) && weights.size(3) == ids.size(1),
              "headPatterns: weights must be [B, H, T, T] and ids [B, T]");
  const auto w = weights.to(torch::kDouble).cpu().contiguous();  // [B, H, T, T]
  const int64_t B = w.size(0), H = w.size(1), T = w.size(2);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  HeadPatterns out;
  if (T < 2) {
    out.previousToken = out.firstToken = out.induction = torch::full({H}, nan, torch::kDouble);
    return out;
  }
  out.previousToken = w.diagonal(-1, 2, 3).mean(std::vector<int64_t>{0, 2});              // a_{i,i-1}
  out.firstToken = w.select(3, 0).narrow(2, 1, T - 1).mean(std::vector<int64_t>{0, 2});  // a_{i,0}, i >= 1
  const auto a = w.accessor<double, 4>();
  const auto tokens = ids.to(torch::kLong).cpu().contiguous();
  const auto t = tokens.accessor<int64_t, 2>();
  std::vector<double> sum(static_cast<size_t>(H), 0.0);
  int64_t rows = 0;
  for (int64_t b = 0; b < B; ++b) {
    std::unordered_map<int64_t, std::vector<int64_t>> seen;  // token -> earlier positions
    for (int64_t i = 0; i < T; ++i) {
      auto& positions = seen[t[b][i]];
      for (auto j = positions.rbegin(); j != positions.rend(); ++j) {
        if (*j + 1 >= i) continue;  // what followed it is the query itself
        for (int64_t h = 0; h < H; ++h) sum[static_cast<size_t>(h)] += a[b][h][i][*j + 1];
        ++rows;
        break;
      }
      positions.push_back(i);
    }
  }
  out.induction = torch::full({H}, nan, torch::kDouble);
  if (rows > 0)
    for (int64_t h = 0; h < H; ++h) out.induction[h] = sum[static_cast<size_t>(h)] / double(rows);
  return out;
}

}  // namespace hh::metrics
