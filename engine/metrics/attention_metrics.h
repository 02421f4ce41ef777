// Attention metrics, defined once and used by the CLI, the jobs and (as plain numbers) the
// workbench. Every function accepts weights from any layer, batched:
//   weights, p, a, scores : [..., Tq, Tk]  (typically [B, H, Tq, Tk])
//   valid                 : bool, broadcastable to [..., Tq, Tk]; undefined = every pair valid.
// "Per head" results reduce every leading dimension except dim -3 (H) and return [H]; a
// [Tq, Tk] input is treated as one head.
// Computation is in float64 whatever the input dtype (float32, float64, bfloat16...); results are
// float64 on the input's device. Paired inputs must have the same shape. Bad shapes, dtypes or a
// non-bool `valid` throw c10::Error (a std::exception). Weights are not renormalised over the valid
// keys: pass rows that already sum to 1 over them. A NaN among valid inputs yields NaN (it is
// never silently dropped), so a diverged model shows up in the per-head numbers.
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

namespace hh::metrics {

// Guard inside logarithms of the KL divergence (documented in docs/metrics.md):
//   KL_i = sum_j p_ij * (log(p_ij + kKlEpsilon) - log(a_ij + kKlEpsilon)),  terms with p_ij = 0 are 0.
// With kKlEpsilon = 1e-10, a linear weight of exactly 0 where p_ij > 0 costs at most
// p_ij * 23.03 nats instead of infinity; for a_ij >> 1e-10 the bias is below 1e-10 / a_ij.
constexpr double kKlEpsilon = 1e-10;

// Lower-triangular [T, T] bool mask (query i sees keys j <= i).
at::Tensor causalMask(int64_t length, at::Device device = at::kCPU);

// H_i = -sum_j a_ij log a_ij over valid j (0 log 0 = 0; a negative weight gives NaN).
// Returns [..., Tq] in float64; a row with no valid key is NaN.
at::Tensor rowEntropy(const at::Tensor& weights, const at::Tensor& valid = {});
// Mean of rowEntropy over rows (and batch) per head: [H] float64. Rows with no valid key are left
// out of the mean; a head with none left is NaN.
at::Tensor headEntropy(const at::Tensor& weights, const at::Tensor& valid = {});

// KL(p || a) per row over valid j: [..., Tq] float64; p the softmax target, a the linear weights.
// A row with no valid key is NaN.
at::Tensor rowKl(const at::Tensor& p, const at::Tensor& a, const at::Tensor& valid = {});
// Mean of rowKl over rows (and batch) per head: [H] float64. Rows with no valid key are left out
// of the mean; a head with none left is NaN.
at::Tensor headKl(const at::Tensor& p, const at::Tensor& a, const at::Tensor& valid = {});

// Spearman rank correlation between scores (q.k / sqrt(d)) and weights along each row over valid
// keys, ties given their average rank. Rows with fewer than 3 valid keys, or constant scores or
// weights, are skipped. Returns [..., Tq] float64 with NaN for skipped rows. A row with a NaN
// among its valid scores or weights is NaN too but is not skipped: it makes its head's mean NaN.
at::Tensor rowSpearman(const at::Tensor& scores, const at::Tensor& weights, const at::Tensor& valid = {});
// Mean over non-skipped rows per head: [H] float64 (NaN if a head has no usable row).
at::Tensor headSpearman(const at::Tensor& scores, const at::Tensor& weights, const at::Tensor& valid = {});

// The scores' half of Spearman's rho, ranked once for several weight tensors (the evaluation
// measures every feature map against one teacher's scores): rowSpearman(RankedScores(s, v), w)
// equals rowSpearman(s, w, v) to the bit. Ranked on the CPU; results go to the scores' device.
struct RankedScores {
  RankedScores(const at::Tensor& scores, const at::Tensor& valid = {});  // as rowSpearman takes them
  std::vector<int64_t> sizes;  // the scores' shape [..., Tq, Tk]
  at::Device device;           // the scores' device
  at::Tensor ranks;            // [rows, Tk] float32, CPU: average rank (1-based) of each valid key, else 0
  at::Tensor validKeys;        // [rows, Tk] bool, contiguous, CPU; undefined = every key valid
  std::vector<double> sxx;     // per row: sum of squared centred ranks (0: constant or < 3 keys; NaN: a NaN score)
};
at::Tensor rowSpearman(const RankedScores& scores, const at::Tensor& weights);   // [..., Tq]
at::Tensor headSpearman(const RankedScores& scores, const at::Tensor& weights);  // [H]

// Binned monotonicity curve: weights against scores over all valid pairs of the given tensors
// (pass one head's slice for a per-head curve). Bins are equal-width over [lo, hi] of the valid
// scores: [min, max] below 2,000 pairs; from 2,000 on, the 0.1th to the 99.9th percentile, the
// pairs beyond counted in the first or last bin (outliers would otherwise stretch the axis into
// near-empty bins). Empty bins have count 0 and NaN mean/std. The curve always has `bins` entries
// (bins >= 1). Bin b holds lo + b*w <= s < lo + (b+1)*w with w = (hi - lo) / bins; the maximum
// goes into the last bin. Pairs whose score is not finite (e.g. -inf from a mask) are ignored. If all scores are
// equal, every pair goes into bin bins/2, centred on that score, and the others (1/bins wide) stay
// empty. No usable pair: all counts 0 and every field NaN. Computed on the CPU.
struct MonotonicityCurve {
  std::vector<double> binCenters;  // score at the bin's centre
  std::vector<double> mean;        // mean weight in the bin
  std::vector<double> stddev;      // population standard deviation of the weights in the bin
  std::vector<int64_t> count;      // pairs in the bin
};
MonotonicityCurve monotonicityCurve(const at::Tensor& scores, const at::Tensor& weights,
                                    const at::Tensor& valid = {}, int bins = 32);

// What kind of head a causal head is, from its weights on a text (the patterns the Hedgehog paper
// shows), each the mean over the rows that have the pattern, per head [H] float64:
//   previousToken  a_{i,i-1} over rows i >= 1;
//   firstToken     a_{i,0} over rows i >= 1 (the attention sink: <s> or the text's first token);
//   induction      a_{i,j+1} over rows i whose token occurred before, j < i - 1 its latest earlier
//                  occurrence with j + 1 < i: attention to what followed the token last time (NaN
//                  where no row has one).
// weights [B, H, T, T] (causal rows summing to 1), ids [B, T] int64.
struct HeadPatterns {
  at::Tensor previousToken, firstToken, induction;  // [H] each
};
HeadPatterns headPatterns(const at::Tensor& weights, const at::Tensor& ids);

}  // namespace hh::metrics
