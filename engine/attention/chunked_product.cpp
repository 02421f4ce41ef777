#include "engine/attention/chunked_product.h"

#include <ATen/Parallel.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/types.h>

#include "engine/attention/blas_kernels.h"
#include "engine/attention/form_helpers.h"

namespace hh::attn {

using detail::withOnes;

namespace {
torch::Tensor padTime(const torch::Tensor& x, int64_t padded) {
  const int64_t t = x.size(2);
  if (padded == t) return x;
  return torch::constant_pad_nd(x, {0, 0, 0, padded - t}, 0.0);
}
}  // namespace

namespace {
// Per (batch, head): chunks in order (reverse order when anti-causal), state [F, E] in cache,
// four BLAS products per chunk on rows read in place. -> out [B,H,T,E]
template <typename T>
torch::Tensor chunkedProductBlas(const torch::Tensor& aIn, const torch::Tensor& bIn, const torch::Tensor& cIn,
                                 int64_t chunkSize, bool antiCausal) {
  const auto a = aIn.contiguous(), b = bIn.contiguous(), c = cIn.contiguous();
  const int64_t heads = a.size(0) * a.size(1), t = a.size(2);
  const int f = static_cast<int>(a.size(3)), e = static_cast<int>(c.size(3));
  const int chunk = static_cast<int>(std::min<int64_t>(chunkSize, std::max<int64_t>(t, 1)));
  auto out = torch::empty({a.size(0), a.size(1), t, e}, c.options());
  const T *pa = a.data_ptr<T>(), *pb = b.data_ptr<T>(), *pc = c.data_ptr<T>();
  T* po = out.data_ptr<T>();
  blas::SingleThreaded oneThread;
  at::parallel_for(0, heads, 1, [&](int64_t begin, int64_t end) {
    std::vector<T> scores(static_cast<size_t>(chunk) * chunk), state(static_cast<size_t>(f) * e);
    for (int64_t h = begin; h < end; ++h) {
      std::fill(state.begin(), state.end(), T(0));
      const T *ah = pa + h * t * f, *bh = pb + h * t * f, *ch = pc + h * t * e;
      T* oh = po + h * t * e;
      const int64_t chunks = (t + chunk - 1) / chunk;
      for (int64_t s = 0; s < chunks; ++s) {
        const int64_t idx = antiCausal ? chunks - 1 - s : s;
        const int64_t t0 = idx * chunk;
        const int len = static_cast<int>(std::min<int64_t>(chunk, t - t0));
        blas::gemm<T>(false, true, len, len, f, T(1), ah + t0 * f, f, bh + t0 * f, f, T(0), scores.data(), len);
        for (int i = 0; i < len; ++i) {
          T* row = scores.data() + static_cast<int64_t>(i) * len;
          if (antiCausal) std::fill(row, row + i, T(0));
          else std::fill(row + i + 1, row + len, T(0));
        }
        blas::gemm<T>(false, false, len, e, len, T(1), scores.data(), len, ch + t0 * e, e, T(0), oh + t0 * e, e);
        if (s > 0)
          blas::gemm<T>(false, false, len, e, f, T(1), ah + t0 * f, f, state.data(), e, T(1), oh + t0 * e, e);
        blas::gemm<T>(true, false, f, e, len, T(1), bh + t0 * f, f, ch + t0 * e, e, T(1), state.data(), e);
      }
    }
  });
  return out;
}
}  // namespace

torch::Tensor chunkedLinearProduct(const torch::Tensor& a, const torch::Tensor& b, const torch::Tensor& c,
                                   int64_t chunkSize, bool antiCausal) {
  // a, b [B,H,T,F]; c [B,H,T,E] -> [B,H,T,E]
  at::NoGradGuard noGrad;
  TORCH_CHECK(chunkSize > 0, "chunk size must be positive");
  if (blas::available() && a.device().is_cpu() && a.size(2) > 0 && a.scalar_type() == b.scalar_type() &&
      a.scalar_type() == c.scalar_type()) {
    if (a.scalar_type() == torch::kFloat) return chunkedProductBlas<float>(a, b, c, chunkSize, antiCausal);
    if (a.scalar_type() == torch::kDouble) return chunkedProductBlas<double>(a, b, c, chunkSize, antiCausal);
  }
  const int64_t bs = a.size(0), h = a.size(1), t = a.size(2), f = a.size(3), e = c.size(3);
  const int64_t chunk = std::min(chunkSize, std::max<int64_t>(t, 1));
  const int64_t n = (t + chunk - 1) / chunk;
  const int64_t padded = n * chunk;
  const auto ac = padTime(a, padded).reshape({bs, h, n, chunk, f});  // [B,H,N,C,F]
  const auto bc = padTime(b, padded).reshape({bs, h, n, chunk, f});  // [B,H,N,C,F]
  const auto cc = padTime(c, padded).reshape({bs, h, n, chunk, e});  // [B,H,N,C,E]

  // Intra-chunk: masked (C x C) scores times the chunk's values.
  auto scores = torch::matmul(ac, bc.transpose(-1, -2));  // [B,H,N,C,C]
  auto mask = torch::ones({chunk, chunk}, scores.options());
  mask = antiCausal ? torch::triu(mask) : torch::tril(mask);
  scores.mul_(mask);
  auto out = torch::matmul(scores, cc);  // [B,H,N,C,E]

  // Inter-chunk: chunk n reads the summed states of the chunks before it (after it, anti-causal).
  // States are accumulated in place, one chunk at a time: a strided cumsum over dim 2 costs more.
  if (n > 1) {
    auto states = torch::matmul(bc.transpose(-1, -2), cc);  // [B,H,N,F,E]; states[n] = B_n^T C_n
    if (!antiCausal) {
      for (int64_t i = 1; i < n - 1; ++i) states.select(2, i).add_(states.select(2, i - 1));
      out.narrow(2, 1, n - 1).add_(torch::matmul(ac.narrow(2, 1, n - 1), states.narrow(2, 0, n - 1)));
    } else {
      for (int64_t i = n - 2; i > 0; --i) states.select(2, i).add_(states.select(2, i + 1));
      out.narrow(2, 0, n - 1).add_(torch::matmul(ac.narrow(2, 0, n - 1), states.narrow(2, 1, n - 1)));
    }
  }
  return out.reshape({bs, h, padded, e}).narrow(2, 0, t);
}

namespace {
struct CausalAdditiveFunction : public torch::autograd::Function<CausalAdditiveFunction> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& fq,
                               const torch::Tensor& fk, const torch::Tensor& v, int64_t chunkSize, double eps) {
    // fq, fk [B,H,T,F]; v [B,H,T,D] -> y [B,H,T,D]
    const int64_t d = v.size(-1);
    const auto o = chunkedLinearProduct(fq, fk, withOnes(v), chunkSize, /*antiCausal=*/false);  // [B,H,T,D+1]
    const auto den = o.narrow(-1, d, 1) + eps;                                                    // [B,H,T,1]
    auto y = o.narrow(-1, 0, d) / den;
    ctx->save_for_backward({fq, fk, v, y, den});
    ctx->saved_data["chunk"] = chunkSize;
    return y;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list gradOutputs) {
    const auto saved = ctx->get_saved_variables();
    const auto &fq = saved[0], &fk = saved[1], &v = saved[2], &y = saved[3], &den = saved[4];
    const int64_t chunk = ctx->saved_data["chunk"].toInt();
    const auto gy = gradOutputs[0].contiguous();  // [B,H,T,D]
    // y = num / den: d num = gy / den, d den = -sum_e(gy * y) / den.
    const auto gNum = gy / den;
    const auto gDen = -(gy * y).sum(-1, true) / den;
    const auto gO = torch::cat({gNum, gDen}, -1);  // [B,H,T,D+1]
    const auto vOnes = withOnes(v);
    // O_i = sum_{j<=i} (fq_i . fk_j) [v_j, 1]:
    //   d fq_i = sum_{j<=i} (gO_i . [v_j,1]) fk_j          (causal)
    //   d fk_j = sum_{i>=j} ([v_j,1] . gO_i) fq_i          (anti-causal)
    //   d [v_j,1] = sum_{i>=j} (fk_j . fq_i) gO_i          (anti-causal)
    auto gq = chunkedLinearProduct(gO, vOnes, fk, chunk, false);
    auto gk = chunkedLinearProduct(vOnes, gO, fq, chunk, true);
    auto gv = chunkedLinearProduct(fk, fq, gO, chunk, true).narrow(-1, 0, v.size(-1));
    return {gq, gk, gv, torch::Tensor(), torch::Tensor()};
  }
};
}  // namespace

torch::Tensor causalAdditiveChunked(const torch::Tensor& fq, const torch::Tensor& fk, const torch::Tensor& v,
                                    int64_t chunkSize, double eps) {
  return CausalAdditiveFunction::apply(fq, fk, v, chunkSize, eps);
}

}  // namespace hh::attn
