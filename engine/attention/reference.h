// fp64 brute-force references for linear attention, written straight from the definitions in
// DESIGN.md with scalar loops; they share no code with the quadratic/chunked/recurrent forms.
// Used by the tests and by `hedgehog parity`. Inputs are converted to float64 on the CPU.
//   fq, fk [B,H,T,F]; v [B,H,T,D]; gates as RuleInputs; returns [B,H,T,D] float64.
#pragma once
#include <torch/torch.h>

#include "engine/attention/linear_attention.h"

namespace hh::attn {

torch::Tensor referenceLinearAttention(const torch::Tensor& fq, const torch::Tensor& fk, const torch::Tensor& v,
                                       const RuleInputs& gates, const RuleOptions& options);

// Reference weights [B,H,T,T] float64 for the additive and gated rules (normalised scores).
torch::Tensor referenceLinearWeights(const torch::Tensor& fq, const torch::Tensor& fk, const RuleInputs& gates,
                                     const RuleOptions& options);

// Reference softmax attention output [B,H,T,D] float64, scores q.k / sqrt(D).
torch::Tensor referenceSoftmaxAttention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                        bool causal);

}  // namespace hh::attn
