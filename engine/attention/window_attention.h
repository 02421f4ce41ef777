// Sliding-window + linear hybrid attention (the hedgehog_window kind, after LoLCATs): query i
// attends with softmax scores to the W most recent keys and through the feature map to every key
// before them, both terms under one normaliser, weighted by a learnable per-head mix gamma:
//
//   near(i) = { j : 0 <= i - j < W }          (bidirectional: |i - j| < W)
//   far(i)  = { j : i - j >= W }              (bidirectional: |i - j| >= W)
//   s_ij    = q_i.k_j / sqrt(D)               (the softmax score; other scales are folded into q)
//   a_ij    = gamma exp(s_ij)                 for j in near(i)
//           = (1 - gamma) phi(q_i).phi(k_j)   for j in far(i)
//   y_i     = sum_j a_ij v_j / (sum_j a_ij)
//
// So the far term stands in for exp(s_ij) itself, as the Hedgehog map is trained to (up to the
// scale gamma learns). Computed with both terms multiplied by exp(-c_i), c_i = max(0, max over
// near(i) of s_ij), which leaves y unchanged and keeps exp() finite; the guard eps is added to
// the shifted denominator (reference.h does the same).
// Padded keys drop out of both terms. Three forms, tested equal to the fp64 brute force in
// reference.h: quadratic (weights for inspection and distillation), chunked (training and prefill:
// the far term is a causal linear product on keys shifted by W, the near term a band of W keys per
// query block), recurrent (S, z over keys that left the window plus a ring buffer of the last W
// keys, values and key features: constant memory per token).
// Shapes: q, k, v [B,H,T,D]; fq, fk [B,H,T,F]; mix [H]; keyMask bool [B,T].
#pragma once
#include <ATen/core/Tensor.h>

#include "engine/attention/linear_attention.h"

namespace hh::attn {

struct WindowInputs {
  at::Tensor q, k;     // [B,H,T,D]; scores q.k / sqrt(D)
  at::Tensor fq, fk;   // [B,H,T,F] (padded keys' features zero)
  at::Tensor v;        // [B,H,T,D]
  at::Tensor mix;      // [H] in (0, 1): gamma, the window term's share
  at::Tensor keyMask;  // bool [B,T], true = real token; undefined = all real
};

struct WindowOptions {
  int64_t window = 64;     // W
  bool causal = true;
  int64_t chunkSize = 64;  // query block of the chunked form
  double eps = 1e-6;
};
WindowOptions windowOptions(const LinearAttentionConfig& config);

// The weights a_ij / (sum_j a_ij + eps): [B,H,T,T].
at::Tensor windowWeights(const WindowInputs& in, const WindowOptions& options);
// Outputs [B,H,T,D] by form.
at::Tensor windowQuadratic(const WindowInputs& in, const WindowOptions& options);
at::Tensor windowChunked(const WindowInputs& in, const WindowOptions& options);
// Causal; for tests. Steps token by token, keeping which ring slots hold padded keys (keyMask).
at::Tensor windowRecurrent(const WindowInputs& in, const WindowOptions& options);
at::Tensor windowAttention(AttentionForm form, const WindowInputs& in, const WindowOptions& options);

// Recurrent state of a window layer: S, z as the additive rule's, plus the ring buffer
// (ringKeys, ringValues [B,H,W,D], ringFeatures [B,H,W,F]); slot p % W holds token p.
RecurrentState initialWindowState(int64_t batch, int64_t heads, int64_t featureDim, int64_t headDim,
                                  const WindowOptions& options, at::ScalarType dtype, at::Device device);
// One token: in.q, k, v [B,H,1,D], fq, fk [B,H,1,F] -> [B,H,1,D]; the state advances by one.
// The state keeps no key mask, so in.keyMask must be undefined (decoding has no padding).
at::Tensor windowStep(RecurrentState& state, const WindowInputs& in, const WindowOptions& options);
// T tokens from `state` (the prompt): equal to T steps, the chunked form when the state is fresh.
// No key mask either (std::invalid_argument): a padded prompt has no place in one recurrent state.
at::Tensor windowPrefill(RecurrentState& state, const WindowInputs& in, const WindowOptions& options);

// Throws std::invalid_argument with a reason (shapes, W < 1, mix not [H]).
void validateWindowInputs(const WindowInputs& in, const WindowOptions& options);

}  // namespace hh::attn
