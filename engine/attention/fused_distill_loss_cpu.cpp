// The fused distillation loss on the CPU (see fused_distill_loss_cpu.h).
#include "engine/attention/fused_distill_loss_cpu.h"

#include <ATen/Parallel.h>
#include <torch/autograd.h>
#include <torch/types.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <vector>

#include "engine/attention/blas_kernels.h"
#include "engine/attention/vector_math.h"

namespace hh::attn {
namespace {

using vec::Floats8;

constexpr double kLogFloor = 1e-10;  // log(a + 1e-10), as jobs::distillationLoss
constexpr int kLossBlockRows = 64;   // query rows per block: two [64, T] fp32 buffers per thread

// What one (batch, head) reads: rows of [T, X] fp32, contiguous.
struct HeadInputs {
  const float *q, *k;    // [T, D]
  const float *fq, *fk;  // [T, F]
  const float* den;      // [T]
};

struct LossShape {
  int t = 0, d = 0, f = 0;
  bool causal = true;
  float scale = 1.0f;
  int stride = 0;  // of the block buffers' rows: T rounded up to 8
};

// Keys row i sees, and the keys a block of rows starting at i0 needs.
int keysOfRow(const LossShape& s, int i) {
  return s.causal ? i + 1 : s.t;
}
int keysOfBlock(const LossShape& s, int i0, int rows) {
  return s.causal ? i0 + rows : s.t;
}

// t [rows, keys] = scale q_block k^T and s [rows, keys] = fq_block fk^T, row stride s.stride.
void blockProducts(const HeadInputs& in, const LossShape& s, int i0, int rows, float* t, float* prod) {
  const int keys = keysOfBlock(s, i0, rows);
  blas::gemm<float>(false, true, rows, keys, s.d, s.scale, in.q + int64_t(i0) * s.d, s.d, in.k, s.d, 0.0f, t, s.stride);
  blas::gemm<float>(false, true, rows, keys, s.f, 1.0f, in.fq + int64_t(i0) * s.f, s.f, in.fk, s.f, 0.0f, prod,
                    s.stride);
}

struct RowTerms {
  float loss, coef, negEntropy, lse;
};

// One query row: t [n] its scaled scores, s [n] its feature products, den its normaliser. The
// buffers hold at least n rounded up to 8 floats; lanes past n are read and ignored.
__attribute__((target_clones("avx2", "default"))) RowTerms rowTerms(const float* t, const float* s, int n, float den) {
  const float m = vec::maxOf(t, n);
  const float floorDen = static_cast<float>(kLogFloor) * den, invDen = 1.0f / den;
  const Floats8 zero = vec::splat(0.0f);
  Floats8 z = zero, shifted = zero, logSum = zero, coefSum = zero;
  for (int j = 0; j < n; j += 8) {
    const vec::Ints8 valid = vec::lanesBelow(j, n);  // lanes past n hold stale values: never used
    const Floats8 x = valid ? vec::load(t + j) - m : zero, sj = valid ? vec::load(s + j) : vec::splat(1.0f);
    const Floats8 e = valid ? vec::exp8(x) : zero;
    z += e;
    shifted += e * x;
    logSum += e * vec::log8(sj * invDen + static_cast<float>(kLogFloor));
    coefSum += e * sj / (sj + floorDen);
  }
  const float total = vec::sum(z), logTotal = std::log(total);
  return {-vec::sum(logSum) / total, vec::sum(coefSum) / total, vec::sum(shifted) / total - logTotal, m + logTotal};
}

// One query row of the backward: G_j = g p_j / (s_j + 1e-10 den) for j < n, with p_j =
// exp(t_j - lse), written over s; zero for n <= j < keys. (g carries the sign and the mean.)
__attribute__((target_clones("avx2", "default"))) void rowGradient(const float* t, float* s, int n, int keys, float den,
                                                                   float lse, float g) {
  const float floorDen = static_cast<float>(kLogFloor) * den;
  for (int j = 0; j < n; j += 8) {
    const Floats8 sj = vec::load(s + j);
    const Floats8 grad = g * vec::exp8(vec::load(t + j) - lse) / (sj + floorDen);
    vec::store(s + j, vec::lanesBelow(j, n) ? grad : vec::splat(0.0f));
  }
  for (int j = (n + 7) / 8 * 8; j < keys; ++j) s[j] = 0.0f;
}

// Per row: loss, coef (sum_j p s / (s + 1e-10 den), for den's gradient), sum p log p, lse.
void headForward(const HeadInputs& in, const LossShape& s, float* t, float* prod, float* rowOut[4]) {
  for (int i0 = 0; i0 < s.t; i0 += kLossBlockRows) {
    const int rows = std::min(kLossBlockRows, s.t - i0);
    blockProducts(in, s, i0, rows, t, prod);
    for (int r = 0; r < rows; ++r) {
      const int i = i0 + r;
      const auto terms = rowTerms(t + int64_t(r) * s.stride, prod + int64_t(r) * s.stride, keysOfRow(s, i), in.den[i]);
      rowOut[0][i] = terms.loss;
      rowOut[1][i] = terms.coef;
      rowOut[2][i] = terms.negEntropy;
      rowOut[3][i] = terms.lse;
    }
  }
}

// gfq [T, F] = G fk and gfk [T, F] = G^T fq, G_ij = -g p_ij / (s_ij + 1e-10 den_i) over the
// valid pairs (den held fixed; its own gradient is the caller's).
void headBackward(const HeadInputs& in, const LossShape& s, const float* lse, float g, float* t, float* prod,
                  float* gfq, float* gfk) {
  std::fill(gfk, gfk + int64_t(s.t) * s.f, 0.0f);
  for (int i0 = 0; i0 < s.t; i0 += kLossBlockRows) {
    const int rows = std::min(kLossBlockRows, s.t - i0), keys = keysOfBlock(s, i0, rows);
    blockProducts(in, s, i0, rows, t, prod);
    for (int r = 0; r < rows; ++r) {
      const int i = i0 + r;
      rowGradient(t + int64_t(r) * s.stride, prod + int64_t(r) * s.stride, keysOfRow(s, i), keys, in.den[i], lse[i],
                  -g);
    }
    blas::gemm<float>(false, false, rows, s.f, keys, 1.0f, prod, s.stride, in.fk, s.f, 0.0f, gfq + int64_t(i0) * s.f,
                      s.f);
    blas::gemm<float>(true, false, keys, s.f, rows, 1.0f, prod, s.stride, in.fq + int64_t(i0) * s.f, s.f, 1.0f, gfk,
                      s.f);
  }
}

// The inputs as the kernels read them: fp32, contiguous.
struct Inputs {
  torch::Tensor q, k, fq, fk, den;
  LossShape shape;
  HeadInputs head(int64_t bh) const {
    const int64_t t = shape.t;
    return {q.data_ptr<float>() + bh * t * shape.d, k.data_ptr<float>() + bh * t * shape.d,
            fq.data_ptr<float>() + bh * t * shape.f, fk.data_ptr<float>() + bh * t * shape.f,
            den.data_ptr<float>() + bh * t};
  }
  int64_t heads() const { return q.size(0) * q.size(1); }
};

Inputs inputsOf(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& fq, const torch::Tensor& fk,
                const torch::Tensor& den, double scale, bool causal) {
  Inputs in{q.to(torch::kFloat).contiguous(),
            k.to(torch::kFloat).contiguous(),
            fq.to(torch::kFloat).contiguous(),
            fk.to(torch::kFloat).contiguous(),
            den.contiguous(),
            {}};
  in.shape.t = static_cast<int>(q.size(2));
  in.shape.d = static_cast<int>(q.size(3));
  in.shape.f = static_cast<int>(fq.size(3));
  in.shape.causal = causal;
  in.shape.scale = static_cast<float>(scale);
  in.shape.stride = (in.shape.t + 7) / 8 * 8;
  return in;
}

// Each task's two block buffers, [64, stride] fp32.
template <typename Body>
void forEachHead(const Inputs& in, const Body& body) {
  const blas::SingleThreaded oneThread;  // the tasks are the parallelism
  at::parallel_for(0, in.heads(), 1, [&](int64_t begin, int64_t end) {
    std::vector<float> t(size_t(kLossBlockRows) * in.shape.stride), prod(t.size());
    for (int64_t bh = begin; bh < end; ++bh) body(bh, t.data(), prod.data());
  });
}

// fq, fk [B,H,T,F] fp32 and den [B,H,T] with autograd; q, k [B,H,T,D] constants -> {crossEntropy, negEntropy}.
class FusedSoftCrossEntropy : public torch::autograd::Function<FusedSoftCrossEntropy> {
 public:
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& fq,
                                                const torch::Tensor& fk, const torch::Tensor& den,
                                                const torch::Tensor& q, const torch::Tensor& k, double scale,
                                                bool causal) {
    const auto in = inputsOf(q, k, fq, fk, den, scale, causal);
    auto rows = torch::empty({4, in.heads(), q.size(2)}, torch::kFloat);  // loss, coef, sum p log p, lse
    forEachHead(in, [&](int64_t bh, float* t, float* prod) {
      float* base = rows.data_ptr<float>() + bh * in.shape.t;
      const int64_t term = in.heads() * in.shape.t;
      float* out[4] = {base, base + term, base + 2 * term, base + 3 * term};
      headForward(in.head(bh), in.shape, t, prod, out);
    });
    const double count = double(q.size(0)) * double(q.size(2));
    auto crossEntropy = rows[0].sum() / count, negEntropy = rows[2].sum() / count;
    ctx->save_for_backward({in.fq, in.fk, in.den, in.q, in.k, rows[1], rows[3]});
    ctx->saved_data["scale"] = scale;
    ctx->saved_data["causal"] = causal;
    ctx->mark_non_differentiable({negEntropy});
    return {crossEntropy, negEntropy};
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto &coef = saved[5], &lse = saved[6];
    const auto in = inputsOf(saved[3], saved[4], saved[0], saved[1], saved[2], ctx->saved_data["scale"].toDouble(),
                             ctx->saved_data["causal"].toBool());
    const double count = double(in.q.size(0)) * double(in.q.size(2));
    const double g = grads[0].defined() ? grads[0].item<double>() / count : 0.0;
    auto gfq = torch::empty(in.fq.sizes(), torch::kFloat), gfk = torch::empty_like(gfq);
    forEachHead(in, [&](int64_t bh, float* t, float* prod) {
      const int64_t rowsOff = bh * in.shape.t, featOff = rowsOff * in.shape.f;
      headBackward(in.head(bh), in.shape, lse.data_ptr<float>() + rowsOff, static_cast<float>(g), t, prod,
                   gfq.data_ptr<float>() + featOff, gfk.data_ptr<float>() + featOff);
    });
    const auto gden = coef.view_as(in.den) / in.den * g;  // d loss / d den_i = g coef_i / den_i
    return {gfq,
            gfk,
            gden,
            torch::Tensor(),
            torch::Tensor(),
            torch::Tensor(),
            torch::Tensor()};
  }
};

[[noreturn]] void failLoss(const std::string& what) {
  throw std::invalid_argument("fused distillation loss (CPU): " + what);
}

}  // namespace

bool fusedDistillLossCpuAvailable() {
  return blas::available();
}

bool fusedDistillLossCpuAccepts(const at::Tensor& q, const at::Tensor& fq) {
  return blas::available() && q.dim() == 4 && fq.dim() == 4 && q.device().is_cpu() && fq.device().is_cpu() &&
         (q.scalar_type() == at::kFloat || q.scalar_type() == at::kBFloat16) &&
         (fq.scalar_type() == at::kFloat || fq.scalar_type() == at::kBFloat16);
}

DistillLossTerms fusedDistillLossCpu(const at::Tensor& q, const at::Tensor& k, const at::Tensor& fq,
                                     const at::Tensor& fk, double scale, double eps, bool causal) {
  if (!fusedDistillLossCpuAccepts(q, fq)) failLoss("needs fp32 or bf16 [B, H, T, X] CPU tensors and a BLAS");
  if (k.sizes() != q.sizes() || fk.sizes() != fq.sizes() || fq.sizes().slice(0, 3) != q.sizes().slice(0, 3))
    failLoss("q, k [B, H, T, D] and fq, fk [B, H, T, F] must agree in B, H and T");
  if (q.size(2) > (int64_t(1) << 24) || q.size(3) > 65536 || fq.size(3) > 65536) failLoss("a dimension is too large");
  // den_i = sum_{j <= i} fq_i . fk_j + eps = fq_i . cumsum(fk)_i + eps, in fp32: its gradient flows by autograd.
  const auto fq32 = fq.to(torch::kFloat), fk32 = fk.to(torch::kFloat);
  const auto fkSums = causal ? fk32.cumsum(2) : fk32.sum(2, true);
  const auto den = (fq32 * fkSums).sum(-1) + eps;  // [B,H,T]
  // The fp32 features go in: autograd's cast hands their gradients back in the features' dtype.
  const auto out = FusedSoftCrossEntropy::apply(fq32, fk32, den, q.detach(), k.detach(), scale, causal);
  return {out[0], out[1]};
}

}  // namespace hh::attn
