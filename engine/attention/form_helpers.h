// Small tensor helpers shared by the linear-attention forms (internal to engine/attention).
#pragma once
#include <ATen/ATen.h>

#include <limits>

#include "engine/config/attention_types.h"

namespace hh::attn::detail {

// The score of a masked position: exp(kNegInf) = 0.
constexpr double kNegInf = -std::numeric_limits<double>::infinity();

// States and normalisers accumulate in fp64 for fp64 inputs and in fp32 otherwise (fp16/bf16
// would overflow the key-sum normaliser).
inline at::ScalarType accumulateType(const at::Tensor& t) {
  return t.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
}

// [B,H,T,D] -> [B,H,T,D+1]: the extra column of ones carries the normaliser through a product.
inline at::Tensor withOnes(const at::Tensor& v) {
  return at::cat({v, at::ones_like(v.narrow(-1, 0, 1))}, -1);
}

// Delta-rule features, normalised over the feature dim so that beta in (0,1) keeps the state
// bounded: delta L2-normalises (||phi|| = 1); delta_mao divides by the sum (phi >= 0, so
// ||phi||_2 <= ||phi||_1 = 1). [..., F] -> [..., F]
inline at::Tensor deltaNormalize(const at::Tensor& f, UpdateRule rule) {
  return rule == UpdateRule::DeltaMao ? f / (f.sum(-1, true) + 1e-6) : f / (f.norm(2, -1, true) + 1e-6);
}

}  // namespace hh::attn::detail
