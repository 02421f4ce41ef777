#include "engine/attention/chunked_product.h"

#include <torch/csrc/autograd/custom_function.h>

namespace hh::attn {

namespace {
// Exclusive prefix (or suffix) sum along dim 2 of [B, H, N, F, E]: chunk n sees chunks < n (> n).
torch::Tensor exclusiveScan(const torch::Tensor& perChunk, bool reverse) {
  const int64_t n = perChunk.size(2);
  auto out = torch::zeros_like(perChunk);
  if (n < 2) return out;
  if (!reverse) {
    out.narrow(2, 1, n - 1).copy_(perChunk.narrow(2, 0, n - 1).cumsum(2));
  } else {
    auto flipped = perChunk.narrow(2, 1, n - 1).flip({2}).cumsum(2).flip({2});
    out.narrow(2, 0, n - 1).copy_(flipped);
  }
  return out;
}

torch::Tensor padTime(const torch::Tensor& x, int64_t padded) {
  const int64_t t = x.size(2);
  if (padded == t) return x;
  return torch::constant_pad_nd(x, {0, 0, 0, padded - t}, 0.0);
}
}  // namespace

torch::Tensor chunkedLinearProduct(const torch::Tensor& a, const torch::Tensor& b, const torch::Tensor& c,
                                   int64_t chunkSize, bool antiCausal) {
  // a, b [B,H,T,F]; c [B,H,T,E] -> [B,H,T,E]
  torch::NoGradGuard noGrad;
  TORCH_CHECK(chunkSize > 0, "chunk size must be positive");
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

  // Inter-chunk: states of the chunks before (after) this one.
  if (n > 1) {
    const auto states = torch::matmul(bc.transpose(-1, -2), cc);  // [B,H,N,F,E]
    const auto carried = exclusiveScan(states, antiCausal);       // [B,H,N,F,E]
    out.add_(torch::matmul(ac, carried));
  }
  return out.reshape({bs, h, padded, e}).narrow(2, 0, t);
}

namespace {
torch::Tensor withOnes(const torch::Tensor& v) {
  // [B,H,T,D] -> [B,H,T,D+1]: the last column accumulates the normaliser.
  return torch::cat({v, torch::ones_like(v.narrow(-1, 0, 1))}, -1);
}

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
