// Softmax attention on the CPU a block of query rows at a time (see fused_softmax_cpu.h).
#include "engine/attention/fused_softmax_cpu.h"

#include <ATen/Parallel.h>
#include <torch/types.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/attention/blas_kernels.h"
#include "engine/attention/vector_math.h"

namespace hh::attn {
namespace {

using vec::Floats8;

constexpr int kSoftmaxBlockRows = 64;  // query rows per block: one [64, Tk] fp32 buffer per thread

struct AttentionShape {
  int tq = 0, tk = 0, d = 0, dv = 0;
  bool causal = false;
  float scale = 1.0f;
  int stride = 0;  // of the block buffer's rows: Tk rounded up to 8
};

// One row of scores t [keys] (n of them valid): t_j = exp(t_j - max) for j < n, 0 for n <= j < keys;
// returns the sum.
__attribute__((target_clones("avx2", "default"))) float expRow(float* t, int n, int keys) {
  const float m = vec::maxOf(t, n);
  Floats8 sum = vec::splat(0.0f);
  for (int j = 0; j < n; j += 8) {
    const Floats8 e = vec::lanesBelow(j, n) ? vec::exp8(vec::load(t + j) - m) : vec::splat(0.0f);
    sum += e;
    vec::store(t + j, e);
  }
  for (int j = (n + 7) / 8 * 8; j < keys; ++j) t[j] = 0.0f;
  return vec::sum(sum);
}

// One (batch, head): q [Tq, D], k [Tk, D], v [Tk, Dv] -> y [Tq, Dv], all fp32 contiguous.
void headAttention(const float* q, const float* k, const float* v, const AttentionShape& s, float* t, float* y) {
  for (int i0 = 0; i0 < s.tq; i0 += kSoftmaxBlockRows) {
    const int rows = std::min(kSoftmaxBlockRows, s.tq - i0), keys = s.causal ? i0 + rows : s.tk;
    blas::gemm<float>(false, true, rows, keys, s.d, s.scale, q + int64_t(i0) * s.d, s.d, k, s.d, 0.0f, t, s.stride);
    float sums[kSoftmaxBlockRows];
    for (int r = 0; r < rows; ++r) sums[r] = expRow(t + int64_t(r) * s.stride, s.causal ? i0 + r + 1 : s.tk, keys);
    float* out = y + int64_t(i0) * s.dv;
    blas::gemm<float>(false, false, rows, s.dv, keys, 1.0f, t, s.stride, v, s.dv, 0.0f, out, s.dv);
    for (int r = 0; r < rows; ++r) {
      const float inv = 1.0f / sums[r];
      for (int c = 0; c < s.dv; ++c) out[int64_t(r) * s.dv + c] *= inv;
    }
  }
}

[[noreturn]] void failSoftmax(const std::string& what) {
  throw std::invalid_argument("fused softmax attention (CPU): " + what);
}

bool fp32OrBf16(const at::Tensor& t) {
  return t.scalar_type() == at::kFloat || t.scalar_type() == at::kBFloat16;
}

}  // namespace

bool fusedSoftmaxAttentionCpuAccepts(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                     const at::Tensor& keyMask) {
  const bool needsGradient =
      at::GradMode::is_enabled() && (q.requires_grad() || k.requires_grad() || v.requires_grad());
  return blas::available() && !keyMask.defined() && !needsGradient && q.dim() == 4 && k.dim() == 4 && v.dim() == 4 &&
         q.device().is_cpu() && k.device().is_cpu() && v.device().is_cpu() && fp32OrBf16(q) && fp32OrBf16(k) &&
         fp32OrBf16(v) && k.size(2) > 0;
}

at::Tensor fusedSoftmaxAttentionCpu(const at::Tensor& qIn, const at::Tensor& kIn, const at::Tensor& vIn, bool causal) {
  // q [B,H,Tq,D], k [B,H,Tk,D], v [B,H,Tk,Dv] -> [B,H,Tq,Dv]
  if (!fusedSoftmaxAttentionCpuAccepts(qIn, kIn, vIn, {}))
    failSoftmax("needs fp32 or bf16 [B, H, T, X] CPU tensors without a key mask or a gradient, and a BLAS");
  const int64_t B = qIn.size(0), H = qIn.size(1);
  if (kIn.size(0) != B || kIn.size(1) != H || kIn.size(3) != qIn.size(3) ||
      vIn.sizes().slice(0, 3) != kIn.sizes().slice(0, 3))
    failSoftmax("q [B, H, Tq, D], k [B, H, Tk, D] and v [B, H, Tk, Dv] do not agree");
  if (causal && qIn.size(2) != kIn.size(2)) failSoftmax("causal attention needs as many keys as queries");
  if (qIn.size(2) > (int64_t(1) << 24) || kIn.size(2) > (int64_t(1) << 24) || qIn.size(3) > 65536 ||
      vIn.size(3) > 65536)
    failSoftmax("a dimension is too large");
  const auto q = qIn.to(torch::kFloat).contiguous(), k = kIn.to(torch::kFloat).contiguous(),
             v = vIn.to(torch::kFloat).contiguous();
  AttentionShape s;
  s.tq = static_cast<int>(q.size(2));
  s.tk = static_cast<int>(k.size(2));
  s.d = static_cast<int>(q.size(3));
  s.dv = static_cast<int>(v.size(3));
  s.causal = causal;
  s.scale = static_cast<float>(1.0 / std::sqrt(double(s.d)));
  s.stride = (s.tk + 7) / 8 * 8;
  auto y = torch::empty({B, H, q.size(2), v.size(3)}, q.options());
  const blas::SingleThreaded oneThread;  // the (batch, head) tasks are the parallelism
  at::parallel_for(0, B * H, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> t(size_t(kSoftmaxBlockRows) * s.stride);
    for (int64_t bh = begin; bh < end; ++bh)
      headAttention(q.data_ptr<float>() + bh * s.tq * s.d, k.data_ptr<float>() + bh * s.tk * s.d,
                    v.data_ptr<float>() + bh * s.tk * s.dv, s, t.data(), y.data_ptr<float>() + bh * s.tq * s.dv);
  });
  return y.to(vIn.scalar_type());
}

}  // namespace hh::attn
