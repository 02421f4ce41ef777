// Small tensor helpers shared by the linear-attention forms (internal to engine/attention).
#pragma once
#include <ATen/ATen.h>

namespace hh::attn::detail {

// States and normalisers accumulate in fp64 for fp64 inputs and in fp32 otherwise (fp16/bf16
// would overflow the key-sum normaliser).
inline at::ScalarType accumulateType(const at::Tensor& t) {
  return t.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
}

// [B,H,T,D] -> [B,H,T,D+1]: the extra column of ones carries the normaliser through a product.
inline at::Tensor withOnes(const at::Tensor& v) {
  return at::cat({v, at::ones_like(v.narrow(-1, 0, 1))}, -1);
}

// Delta-rule features: L2-normalised over the feature dim so that ||phi|| = 1 and beta in (0,1)
// keeps the state bounded. [..., F] -> [..., F]
inline at::Tensor deltaNormalize(const at::Tensor& f) { return f / (f.norm(2, -1, true) + 1e-6); }

}  // namespace hh::attn::detail
