// The primitive under the chunked forms: an unnormalised causal (or anti-causal) linear product
//   causal:      O_i = sum_{j <= i} (A_i . B_j) C_j
//   anti-causal: O_i = sum_{j >= i} (A_i . B_j) C_j
// A, B [BT, H, T, F], C [BT, H, T, E] -> O [BT, H, T, E]. Computed chunk by chunk: the intra-chunk
// part as masked (chunk x chunk) products, the inter-chunk part through per-chunk states
// B_c^T C_c [.., N, F, E] summed over preceding (or following) chunks. No autograd graph is
// built; memory is O(T * (chunk + F * E / chunk)) per head, linear in T.
// The causal additive forward and its backward are four calls of this one function.
#pragma once
#include <ATen/core/Tensor.h>

namespace hh::attn {

at::Tensor chunkedLinearProduct(const at::Tensor& a, const at::Tensor& b, const at::Tensor& c,
                                   int64_t chunkSize, bool antiCausal);

// Causal additive linear attention with the normaliser, y = O[:, :D] / (O[:, D] + eps) where
// O = chunkedLinearProduct(fq, fk, [v, 1]). Differentiable in fq, fk and v through a custom
// backward that recomputes the chunk states (saves only fq, fk, v, y and the normaliser).
at::Tensor causalAdditiveChunked(const at::Tensor& fq, const at::Tensor& fk, const at::Tensor& v,
                                    int64_t chunkSize, double eps);

}  // namespace hh::attn
