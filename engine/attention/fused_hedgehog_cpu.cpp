#include "engine/attention/fused_hedgehog_cpu.h"

#include <ATen/Parallel.h>
#include <torch/types.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "engine/attention/blas_kernels.h"
#include "engine/attention/vector_math.h"
#include "engine/config/attention_types.h"

namespace hh::attn {

bool fusedHedgehogAvailable() { return blas::available(); }

#if HH_HAVE_BLAS
namespace {
void gemm(bool transA, bool transB, int m, int n, int k, float alpha, const float* a, int lda, const float* b, int ldb,
          float beta, float* c, int ldc) {
  blas::gemm<float>(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

using vec::exp8;
using vec::Floats8;

// u [rows, d] (bias added) -> features [rows, 2d] = [exp(u), exp(-u)], u clamped to
// +-kHedgehogClamp as the feature map does; d a multiple of 8.
__attribute__((target_clones("avx2", "default"))) void hedgehogFeatures(const float* u, int rows, int d, float* out) {
  const float c = static_cast<float>(kHedgehogClamp);
  const Floats8 lo = {-c, -c, -c, -c, -c, -c, -c, -c}, hi = -lo;
  for (int r = 0; r < rows; ++r) {
    const float* ur = u + static_cast<int64_t>(r) * d;
    float* o = out + static_cast<int64_t>(r) * 2 * d;
    for (int j = 0; j < d; j += 8) {
      Floats8 x;
      std::memcpy(&x, ur + j, sizeof x);
      x = x < lo ? lo : x;
      x = x > hi ? hi : x;
      const Floats8 e = exp8(x);
      const Floats8 inv = 1.0f / e;
      std::memcpy(o + j, &e, sizeof e);
      std::memcpy(o + d + j, &inv, sizeof inv);
    }
  }
}

// Rows of [rows, cols]: mask the upper triangle (j > i) to 0 and return the row sums in den.
__attribute__((target_clones("avx2", "default"))) void maskAndRowSum(float* scores, int rows, float* den) {
  for (int i = 0; i < rows; ++i) {
    float* row = scores + static_cast<int64_t>(i) * rows;
    float sum = 0.0f;
    for (int j = 0; j <= i; ++j) sum += row[j];
    for (int j = i + 1; j < rows; ++j) row[j] = 0.0f;
    den[i] = sum;
  }
}

// den[r] += fq[r] . z; z += sum of fk rows; y = num / (den + eps).
__attribute__((target_clones("avx2", "default"))) void normalise(const float* fq, const float* fk, int rows, int f,
                                                               int d, float* z, float* den, const float* num,
                                                               float eps, float* y) {
  for (int r = 0; r < rows; ++r) {
    float s = 0.0f;
    for (int j = 0; j < f; ++j) s += fq[static_cast<int64_t>(r) * f + j] * z[j];
    den[r] += s;
  }
  for (int r = 0; r < rows; ++r)
    for (int j = 0; j < f; ++j) z[j] += fk[static_cast<int64_t>(r) * f + j];
  for (int r = 0; r < rows; ++r) {
    const float inv = 1.0f / (den[r] + eps);
    for (int j = 0; j < d; ++j) y[static_cast<int64_t>(r) * d + j] = num[static_cast<int64_t>(r) * d + j] * inv;
  }
}

struct HeadTask {
  const float *q, *k, *v;  // [T, D] rows of one (batch, head)
  const float *w, *b;      // W [D, D] (out x in), b [D]
  float* y;                // [T, D]
};

// Features are computed for blocks of kBlockChunks chunks at once (larger products), then the
// chunks of the block run in order: numerator with values [T, D] read in place, normaliser kept
// apart (z [F]) so every product has 64-aligned sizes.
constexpr int kBlockChunks = 4;

void runHead(const HeadTask& t, int64_t length, int d, int chunk, float eps) {
  const int f = 2 * d, block = chunk * kBlockChunks;
  std::vector<float> uq(static_cast<size_t>(block) * d), uk(uq.size()), fq(static_cast<size_t>(block) * f),
      fk(fq.size()), scores(static_cast<size_t>(chunk) * chunk), num(static_cast<size_t>(chunk) * d), den(chunk),
      state(static_cast<size_t>(f) * d, 0.0f), z(f, 0.0f);
  for (int64_t b0 = 0; b0 < length; b0 += block) {
    const int blen = static_cast<int>(std::min<int64_t>(block, length - b0));
    // u = x W^T + b for queries and keys of the block: [blen, D]
    for (int r = 0; r < blen; ++r) {
      std::memcpy(&uq[static_cast<size_t>(r) * d], t.b, sizeof(float) * d);
      std::memcpy(&uk[static_cast<size_t>(r) * d], t.b, sizeof(float) * d);
    }
    gemm(false, true, blen, d, d, 1.0f, t.q + b0 * d, d, t.w, d, 1.0f, uq.data(), d);
    gemm(false, true, blen, d, d, 1.0f, t.k + b0 * d, d, t.w, d, 1.0f, uk.data(), d);
    hedgehogFeatures(uq.data(), blen, d, fq.data());
    hedgehogFeatures(uk.data(), blen, d, fk.data());
    for (int c0 = 0; c0 < blen; c0 += chunk) {
      const int len = std::min(chunk, blen - c0);
      const int64_t t0 = b0 + c0;
      const float *qf = fq.data() + static_cast<size_t>(c0) * f, *kf = fk.data() + static_cast<size_t>(c0) * f;
      const float* vc = t.v + t0 * d;
      // Intra-chunk: scores = fq fk^T masked to j <= i; num = scores v; den = row sums.
      gemm(false, true, len, len, f, 1.0f, qf, f, kf, f, 0.0f, scores.data(), len);
      maskAndRowSum(scores.data(), len, den.data());
      gemm(false, false, len, d, len, 1.0f, scores.data(), len, vc, d, 0.0f, num.data(), d);
      // Inter-chunk: num += fq S, den += fq z; then S += fk^T v, z += sum fk.
      if (t0 > 0) gemm(false, false, len, d, f, 1.0f, qf, f, state.data(), d, 1.0f, num.data(), d);
      gemm(true, false, f, d, len, 1.0f, kf, f, vc, d, 1.0f, state.data(), d);
      normalise(qf, kf, len, f, d, z.data(), den.data(), num.data(), eps, t.y + t0 * d);
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
  if (k.sizes() != q.sizes() || v.sizes() != q.sizes() || w.sizes() != torch::IntArrayRef{nh, d, d} ||
      b.sizes() != torch::IntArrayRef{nh, d})
    throw std::invalid_argument("fused Hedgehog kernel: q, k, v [B,H,T,D], W [H,D,D] and b [H,D] do not agree");
  if (d % 8 != 0) throw std::invalid_argument("fused Hedgehog kernel: head dim must be a multiple of 8");
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

namespace {
// u = W x + b clamped to +-kHedgehogClamp, then features [exp(u), 1 / exp(u)]: x [D], W [D, D]
// row-major, b [D] -> f [2D]
void hedgehogFeatures(const float* x, const float* w, const float* b, int64_t d, float* f) {
  const float c = static_cast<float>(kHedgehogClamp);
  for (int64_t i = 0; i < d; ++i) {
    const float* row = w + i * d;
    float u = b[i];
    for (int64_t j = 0; j < d; ++j) u += row[j] * x[j];
    const float e = std::exp(std::clamp(u, -c, c));
    f[i] = e;
    f[d + i] = 1.0f / e;
  }
}
}  // namespace

torch::Tensor fusedHedgehogStep(torch::Tensor& S, torch::Tensor& z, const torch::Tensor& qIn, const torch::Tensor& kIn,
                                const torch::Tensor& vIn, const torch::Tensor& weightIn, const torch::Tensor& biasIn,
                                double eps) {
  // q, k, v [B,H,D]; S [B,H,2D,D]; z [B,H,2D] -> y [B,H,D]
  TORCH_CHECK(qIn.dim() == 3 && qIn.scalar_type() == torch::kFloat && kIn.scalar_type() == torch::kFloat &&
                  vIn.scalar_type() == torch::kFloat && kIn.sizes() == qIn.sizes() && vIn.sizes() == qIn.sizes(),
              "fusedHedgehogStep: q, k, v must be float32 [B,H,D] of one shape");
  const int64_t B = qIn.size(0), H = qIn.size(1), D = qIn.size(2), F = 2 * D;
  TORCH_CHECK(S.is_contiguous() && z.is_contiguous() && S.scalar_type() == torch::kFloat &&
                  z.scalar_type() == torch::kFloat && S.sizes() == torch::IntArrayRef({B, H, F, D}) &&
                  z.sizes() == torch::IntArrayRef({B, H, F}),
              "fusedHedgehogStep: the state must be contiguous float32 S [B,H,2D,D] and z [B,H,2D] for q [B,H,D]");
  TORCH_CHECK(weightIn.sizes() == torch::IntArrayRef({H, D, D}) && biasIn.sizes() == torch::IntArrayRef({H, D}),
              "fusedHedgehogStep: weight [H,D,D] and bias [H,D] must match q's H heads of dim D");
  const auto q = qIn.contiguous(), k = kIn.contiguous(), v = vIn.contiguous();
  const auto weight = weightIn.detach().to(torch::kFloat).contiguous(),
             bias = biasIn.detach().to(torch::kFloat).contiguous();
  auto y = torch::empty({B, H, D}, q.options());
  float* sData = S.data_ptr<float>();
  float* zData = z.data_ptr<float>();
  const float *qData = q.data_ptr<float>(), *kData = k.data_ptr<float>(), *vData = v.data_ptr<float>();
  const float *wData = weight.data_ptr<float>(), *bData = bias.data_ptr<float>();
  float* yData = y.data_ptr<float>();
  const float epsF = static_cast<float>(eps);
  at::parallel_for(0, B * H, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> fq(static_cast<size_t>(F)), fk(static_cast<size_t>(F)), num(static_cast<size_t>(D));
    for (int64_t bh = begin; bh < end; ++bh) {
      const int64_t h = bh % H;
      const float* w = wData + h * D * D;
      const float* b = bData + h * D;
      hedgehogFeatures(qData + bh * D, w, b, D, fq.data());
      hedgehogFeatures(kData + bh * D, w, b, D, fk.data());
      const float* vv = vData + bh * D;
      float* s = sData + bh * F * D;
      float* zz = zData + bh * F;
      std::fill(num.begin(), num.end(), 0.0f);
      float den = 0.0f;
      for (int64_t f = 0; f < F; ++f) {
        float* row = s + f * D;
        const float kf = fk[size_t(f)], qf = fq[size_t(f)];
        for (int64_t d = 0; d < D; ++d) {
          row[d] += kf * vv[d];
          num[size_t(d)] += qf * row[d];
        }
        zz[f] += kf;
        den += qf * zz[f];
      }
      float* out = yData + bh * D;
      for (int64_t d = 0; d < D; ++d) out[d] = num[size_t(d)] / (den + epsF);
    }
  });
  return y;
}

}  // namespace hh::attn
