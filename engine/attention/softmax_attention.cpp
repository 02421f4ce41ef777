#include "engine/attention/softmax_attention.h"

#include <torch/types.h>
#include <torch/version.h>

#include <cmath>
#include <stdexcept>

#include "engine/attention/fused_softmax_cpu.h"

namespace hh::attn {

namespace {
// PyTorch's fused attention (LibTorch 2 and later: the flash and memory-efficient kernels on a
// GPU) where it computes what the code below does: CUDA tensors of one floating type other than
// fp64, no key mask (a row whose keys are all padding is NaN there and zeros here). On a GPU the
// code below materialises [B,H,T,T] fp32 scores: on the H100 a GPT-2 small forward over 8 x 1024
// tokens took 103.5 ms with it against 21.1 ms with Hedgehog layers in its place
// (docs/performance_gpu.md). The scores are still fp32 inside the kernel; in bf16 the weights are
// rounded to bf16 before they multiply v.
bool fusedAttentionServes(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                          const torch::Tensor& keyMask) {
#if TORCH_VERSION_MAJOR >= 2
  return q.is_cuda() && !keyMask.defined() && q.scalar_type() != torch::kDouble && k.scalar_type() == q.scalar_type() &&
         v.scalar_type() == q.scalar_type();
#else
  (void)q, (void)k, (void)v, (void)keyMask;
  return false;
#endif
}

torch::Tensor fusedAttention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, bool causal) {
#if TORCH_VERSION_MAJOR >= 2
  TORCH_CHECK(!causal || q.size(2) == k.size(2), "causal attention needs as many keys as queries");
  return at::scaled_dot_product_attention(q, k, v, {}, 0.0, causal, 1.0 / std::sqrt(static_cast<double>(q.size(-1))));
#else
  (void)q, (void)k, (void)causal;
  return v;
#endif
}

// weights [B,H,Tq,Tk] after softmax, valid bool [1 or B,1,Tq,Tk]: a row with no valid key (fully
// padded) is NaN there, and is defined here as all zeros. Other rows are left as they are, so NaN
// inputs still give NaN rows.
torch::Tensor zeroRowsWithoutKeys(const torch::Tensor& weights, const torch::Tensor& valid) {
  return weights.masked_fill(valid.any(-1, true).logical_not(), 0.0);
}
}  // namespace

torch::Tensor attentionScores(const torch::Tensor& q, const torch::Tensor& k) {
  // q [B,H,Tq,D], k [B,H,Tk,D] -> [B,H,Tq,Tk]
  TORCH_CHECK(q.dim() == 4 && k.dim() == 4, "attentionScores: q and k must be [B,H,T,D]");
  const double scale = 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
  // The scale on q ([B,H,Tq,D]) rather than on the product: the [B,H,Tq,Tk] scores are written
  // once instead of written, read and written again.
  return torch::matmul(q * scale, k.transpose(-2, -1));
}

torch::Tensor validPairs(int64_t tq, int64_t tk, bool causal, const torch::Tensor& keyMask, torch::Device device) {
  // -> bool [1 or B, 1, Tq, Tk]
  auto valid = torch::ones({1, 1, tq, tk}, torch::TensorOptions().dtype(torch::kBool).device(device));
  if (causal) {
    TORCH_CHECK(tq == tk, "causal attention needs as many keys as queries");
    valid = torch::tril(valid);
  }
  if (keyMask.defined()) {
    TORCH_CHECK(keyMask.dim() == 2 && keyMask.size(1) == tk, "keyMask must be [B, Tk]");
    valid = valid & keyMask.to(torch::kBool).to(device).view({keyMask.size(0), 1, 1, tk});
  }
  return valid;
}

torch::Tensor softmaxWeights(const torch::Tensor& q, const torch::Tensor& k, bool causal, const torch::Tensor& keyMask) {
  const auto computeType = q.scalar_type() == torch::kDouble ? torch::kDouble : torch::kFloat;
  auto scores = attentionScores(q.to(computeType), k.to(computeType));  // [B,H,Tq,Tk]
  torch::Tensor valid;
  if (causal || keyMask.defined()) {
    valid = validPairs(q.size(2), k.size(2), causal, keyMask, q.device());
    scores.masked_fill_(valid.logical_not(), -std::numeric_limits<double>::infinity());  // this call's own tensor
  }
  auto weights = torch::softmax(scores, -1);
  // Without a key mask every row has a valid key (itself, or every key): nothing to repair.
  if (!keyMask.defined()) return weights;
  return zeroRowsWithoutKeys(weights, valid);
}

torch::Tensor softmaxAttention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, bool causal,
                               const torch::Tensor& keyMask) {
  if (fusedAttentionServes(q, k, v, keyMask)) return fusedAttention(q, k, v, causal);
  auto weights = softmaxWeights(q, k, causal, keyMask);
  return torch::matmul(weights, v.to(weights.scalar_type())).to(v.scalar_type());
}

torch::Tensor softmaxAttentionInBlocks(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, bool causal,
                                       const torch::Tensor& keyMask, int64_t blockBytes) {
  // q [B,H,Tq,D], k [B,H,Tk,D], v [B,H,Tk,Dv] -> [B,H,Tq,Dv]
  if (fusedAttentionServes(q, k, v, keyMask)) return fusedAttention(q, k, v, causal);  // no T x T at all
  if (fusedSoftmaxAttentionCpuAccepts(q, k, v, keyMask)) return fusedSoftmaxAttentionCpu(q, k, v, causal);
  const int64_t B = q.size(0), H = q.size(1), tq = q.size(2), tk = k.size(2);
  const auto computeType = q.scalar_type() == torch::kDouble ? torch::kDouble : torch::kFloat;
  const int64_t rowBytes = std::max<int64_t>(1, B * H * tk * int64_t(c10::elementSize(computeType)));
  const int64_t rows = std::max<int64_t>(16, blockBytes / rowBytes);
  if (rows >= tq) return softmaxAttention(q, k, v, causal, keyMask);
  TORCH_CHECK(!causal || tq == tk, "causal attention needs as many keys as queries");
  TORCH_CHECK(!keyMask.defined() || (keyMask.dim() == 2 && keyMask.size(1) == tk), "keyMask must be [B, Tk]");
  const auto opts = torch::TensorOptions(torch::kLong).device(q.device());
  auto out = torch::empty({B, H, tq, v.size(3)}, v.options());
  for (int64_t i0 = 0; i0 < tq; i0 += rows) {
    const int64_t n = std::min(rows, tq - i0);
    const int64_t keys = causal ? i0 + n : tk;  // a causal block sees keys 0 .. i0 + n - 1
    auto scores = attentionScores(q.narrow(2, i0, n).to(computeType), k.narrow(2, 0, keys).to(computeType));
    torch::Tensor valid;  // [1 or B, 1, n, keys]
    if (causal) valid = (torch::arange(keys, opts).unsqueeze(0) <= torch::arange(i0, i0 + n, opts).unsqueeze(1)).view({1, 1, n, keys});
    if (keyMask.defined()) {
      const auto m = keyMask.narrow(1, 0, keys).to(torch::kBool).to(q.device()).view({keyMask.size(0), 1, 1, keys});
      valid = valid.defined() ? valid & m : m;
    }
    if (valid.defined()) scores.masked_fill_(valid.logical_not(), -std::numeric_limits<double>::infinity());
    auto weights = torch::softmax(scores, -1);
    scores = torch::Tensor();
    // A row with no valid key (fully padded) is all zeros, as in softmaxWeights; NaN inputs stay NaN.
    if (keyMask.defined()) weights.masked_fill_(valid.any(-1, true).logical_not(), 0.0);
    out.narrow(2, i0, n).copy_(torch::matmul(weights, v.narrow(2, 0, keys).to(computeType)));
  }
  return out;
}

torch::Tensor cachedSoftmaxAttention(const torch::Tensor& qIn, const torch::Tensor& keys, const torch::Tensor& values,
                                     double scale) {
  // qIn [B,H,T,D]; keys, values [B,Hkv,N,D] -> [B,H,T,D]
  const int64_t B = qIn.size(0), H = qIn.size(1), T = qIn.size(2), D = qIn.size(3);
  const int64_t Hkv = keys.size(1), n = keys.size(2), groups = H / Hkv;
  TORCH_CHECK(groups * Hkv == H && n >= T, "cachedSoftmaxAttention: q ", qIn.sizes(), " against cache ", keys.sizes());
  const auto computeType = qIn.scalar_type() == torch::kDouble ? torch::kDouble : torch::kFloat;
  if (T == 1 && n >= 256 && keys.device().is_cpu() && keys.scalar_type() == computeType &&
      values.scalar_type() == computeType && keys.stride(-1) == 1 && values.stride(-1) == 1) {
    // One query per head against a long cache: matrix-vector products read each cached row once
    // (a batched matrix product would first copy the whole cache into its packed layout).
    const auto q = qIn.to(computeType);
    auto out = torch::empty({B, H, 1, D}, q.options());
    for (int64_t b = 0; b < B; ++b) {
      for (int64_t h = 0; h < H; ++h) {
        const auto kh = keys[b][h / groups], vh = values[b][h / groups];  // [N,D]
        const auto w = torch::softmax(torch::mv(kh, q[b][h][0]) * scale, 0);  // [N]
        out[b][h][0].copy_(torch::mv(vh.t(), w));
      }
    }
    return out.to(qIn.scalar_type());
  }
  const auto q = qIn.reshape({B, Hkv, groups * T, D}).to(computeType);             // [B,Hkv,gT,D]
  auto scores = torch::matmul(q, keys.to(computeType).transpose(-1, -2)) * scale;  // [B,Hkv,gT,N]
  if (T > 1) {
    const int64_t offset = n - T;
    const auto opts = torch::TensorOptions(torch::kLong).device(q.device());
    const auto allowed = torch::arange(n, opts).unsqueeze(0) <= (torch::arange(T, opts) + offset).unsqueeze(1);  // [T,N]
    scores = scores.masked_fill(allowed.repeat({groups, 1}).logical_not(), -std::numeric_limits<double>::infinity());
  }
  const auto weights = torch::softmax(scores, -1);
  return torch::matmul(weights.to(values.scalar_type()), values).reshape({B, H, T, D}).to(qIn.scalar_type());
}

}  // namespace hh::attn
