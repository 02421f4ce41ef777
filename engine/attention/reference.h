// fp64 brute-force references for linear attention, written straight from the definitions in
// docs/design.md with scalar loops; they share no code with the quadratic/chunked/recurrent forms.
// Used by the tests and by `hedgehog parity`. Inputs are converted to float64 on the CPU.
//   fq, fk [B,H,T,F]; v [B,H,T,D]; gates as RuleInputs; returns [B,H,T,D] float64.
#pragma once
#include <ATen/core/Tensor.h>

#include "engine/attention/linear_attention.h"
#include "engine/attention/window_attention.h"

namespace hh::attn {

at::Tensor referenceLinearAttention(const at::Tensor& fq, const at::Tensor& fk, const at::Tensor& v,
                                       const RuleInputs& gates, const RuleOptions& options);

// Reference weights [B,H,T,T] float64 for the additive and gated rules (normalised scores).
at::Tensor referenceLinearWeights(const at::Tensor& fq, const at::Tensor& fk, const RuleInputs& gates,
                                     const RuleOptions& options);

// Reference softmax attention output [B,H,T,D] float64, scores q.k / sqrt(D).
at::Tensor referenceSoftmaxAttention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                        bool causal);

// Reference window-hybrid output [B,H,T,D] float64, from the definition in window_attention.h:
// per query the window max, the near and far sums, one normaliser.
at::Tensor referenceWindowAttention(const WindowInputs& in, const WindowOptions& options);

}  // namespace hh::attn
