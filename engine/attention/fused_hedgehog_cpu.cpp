#include "engine/attention/fused_hedgehog_cpu.h"

#include <ATen/Parallel.h>

#include <cmath>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "engine/attention/blas_kernels.h"

namespace hh::attn {

bool fusedHedgehogAvailable() { return blas::available(); }

#if HH_HAVE_BLAS
namespace {
void gemm(bool transA, bool transB, int m, int n, int k, float alpha, const float* a, int lda, const float* b, int ldb,
          float beta, float* c, int ldc) {
  blas::gemm<float>(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

// exp(x) for x clamped to [-87.3, 88.7]: x = n ln2 + r, |r| <= ln2/2, exp(r) by its Taylor series
// to degree 7 (truncation below 6e-9 relative), 2^n through the float exponent bits. Written so
// that the compiler vectorises the loops that call it.
inline float expApprox(float x) {
  x = std::fmin(std::fmax(x, -87.3f), 88.7f);
  const float n = std::nearbyint(x * 1.44269504088896341f);
  const float r = x - n * 0.693145751953125f - n * 1.42860682030941723e-6f;  // ln2 split hi + lo
  float p = 1.0f / 5040.0f;
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return p * scale;
}

// u [rows, d] (with bias added) -> features [rows, 2d] = [exp(u), exp(-u)].
__attribute__((target_clones("avx2", "default"))) void hedgehogFeatures(const float* u, int rows, int d, float* out) {
  for (int r = 0; r < rows; ++r) {
    const float* ur = u + static_cast<int64_t>(r) * d;
    float* o = out + static_cast<int64_t>(r) * 2 * d;
    for (int j = 0; j < d; ++j) {
      const float e = expApprox(ur[j]);
      o[j] = e;
      o[d + j] = 1.0f / e;
    }
  }
}

struct HeadTask {
  const float *q, *k, *v;  // [T, D] rows of one (batch, head)
  const float *w, *b;      // W [D, D] (out x in), b [D]
  float* y;                // [T, D]
};

void runHead(const HeadTask& t, int64_t length, int d, int chunk, float eps) {
  const int f = 2 * d, e = d + 1;
  std::vector<float> uq(chunk * d), uk(chunk * d), fq(chunk * f), fk(chunk * f), vp(chunk * e), scores(chunk * chunk),
      out(chunk * e), state(static_cast<size_t>(f) * e, 0.0f);
  for (int64_t t0 = 0; t0 < length; t0 += chunk) {
    const int len = static_cast<int>(std::min<int64_t>(chunk, length - t0));
    // u = x W^T + b for queries and keys: [len, D]
    for (int r = 0; r < len; ++r) {
      std::memcpy(&uq[r * d], t.b, sizeof(float) * d);
      std::memcpy(&uk[r * d], t.b, sizeof(float) * d);
    }
    gemm(false, true, len, d, d, 1.0f, t.q + t0 * d, d, t.w, d, 1.0f, uq.data(), d);
    gemm(false, true, len, d, d, 1.0f, t.k + t0 * d, d, t.w, d, 1.0f, uk.data(), d);
    hedgehogFeatures(uq.data(), len, d, fq.data());
    hedgehogFeatures(uk.data(), len, d, fk.data());
    for (int r = 0; r < len; ++r) {
      std::memcpy(&vp[r * e], t.v + (t0 + r) * d, sizeof(float) * d);
      vp[r * e + d] = 1.0f;
    }
    // Intra-chunk: scores = fq fk^T masked to j <= i, out = scores [v, 1].
    gemm(false, true, len, len, f, 1.0f, fq.data(), f, fk.data(), f, 0.0f, scores.data(), len);
    for (int i = 0; i < len; ++i) std::fill(&scores[i * len + i + 1], &scores[(i + 1) * len], 0.0f);
    gemm(false, false, len, e, len, 1.0f, scores.data(), len, vp.data(), e, 0.0f, out.data(), e);
    // Inter-chunk: out += fq S; then S += fk^T [v, 1].
    if (t0 > 0) gemm(false, false, len, e, f, 1.0f, fq.data(), f, state.data(), e, 1.0f, out.data(), e);
    gemm(true, false, f, e, len, 1.0f, fk.data(), f, vp.data(), e, 1.0f, state.data(), e);
    for (int r = 0; r < len; ++r) {
      const float inv = 1.0f / (out[r * e + d] + eps);
      float* yr = t.y + (t0 + r) * d;
      for (int j = 0; j < d; ++j) yr[j] = out[r * e + j] * inv;
    }
  }
}
}  // namespace

torch::Tensor fusedHedgehogCausalForward(const torch::Tensor& qIn, const torch::Tensor& kIn, const torch::Tensor& vIn,
                                         const torch::Tensor& weight, const torch::Tensor& bias, int64_t chunkSize,
                                         double eps) {
  // q, k, v [B,H,T,D] -> y [B,H,T,D]
  if (qIn.scalar_type() != torch::kFloat || !qIn.device().is_cpu() || qIn.dim() != 4)
    throw std::invalid_argument("fused Hedgehog kernel: float32 [B,H,T,D] CPU tensors only");
  const auto q = qIn.contiguous(), k = kIn.contiguous(), v = vIn.contiguous();
  const auto w = weight.detach().to(torch::kFloat).contiguous(), b = bias.detach().to(torch::kFloat).contiguous();
  const int64_t nb = q.size(0), nh = q.size(1), t = q.size(2), d = q.size(3);
  if (w.size(0) != nh || w.size(1) != d || v.sizes() != q.sizes())
    throw std::invalid_argument("fused Hedgehog kernel: shapes of q, k, v, W do not agree");
  auto y = torch::empty_like(q);
  const int chunk = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(chunkSize, t)));
  blas::SingleThreaded oneThread;
  at::parallel_for(0, nb * nh, 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const int64_t h = i % nh, off = i * t * d;
      HeadTask task{q.data_ptr<float>() + off, k.data_ptr<float>() + off, v.data_ptr<float>() + off,
                    w.data_ptr<float>() + h * d * d, b.data_ptr<float>() + h * d, y.data_ptr<float>() + off};
      runHead(task, t, static_cast<int>(d), chunk, static_cast<float>(eps));
    }
  });
  return y;
}

#else
torch::Tensor fusedHedgehogCausalForward(const torch::Tensor&, const torch::Tensor&, const torch::Tensor&,
                                         const torch::Tensor&, const torch::Tensor&, int64_t, double) {
  throw std::invalid_argument("fused Hedgehog kernel: built without BLAS");
}
#endif

}  // namespace hh::attn
