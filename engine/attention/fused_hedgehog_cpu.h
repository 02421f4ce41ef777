// Fused CPU forward of the inference/prefill hot path: Hedgehog features + causal additive
// linear attention, float32, no autograd. One task per (batch, head), chunks in sequence, every
// intermediate (features, chunk scores, state) in cache; the small products go straight to BLAS
// sgemm. Numerically the same computation as FeatureMap(hedgehog) + linearChunked (tested equal
// within fp32 rounding); the generic path remains the reference and the training path.
#pragma once
#include <ATen/core/Tensor.h>

namespace hh::attn {

// True when this build can run the fused kernel (a BLAS with sgemm_ was found at configure time).
bool fusedHedgehogAvailable();

// q, k, v [B, H, T, D] float32 on the CPU; weight [H, D, D], bias [H, D] (the Hedgehog MLP).
// Returns y [B, H, T, D]. Throws std::invalid_argument on unsupported inputs.
at::Tensor fusedHedgehogCausalForward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                         const at::Tensor& weight, const at::Tensor& bias, int64_t chunkSize,
                                         double eps);

// One recurrent step of the same computation (decoding): q, k, v [B, H, D] float32 CPU (one
// token); S [B, H, 2D, D] and z [B, H, 2D] float32 contiguous, updated in place. Returns y [B, H, D].
// Plain loops per (batch, head): the D x D feature products, the rank-1 state update and the
// read-out touch the state once, where the generic step makes ~20 small Torch calls.
at::Tensor fusedHedgehogStep(at::Tensor& S, at::Tensor& z, const at::Tensor& q, const at::Tensor& k,
                                const at::Tensor& v, const at::Tensor& weight, const at::Tensor& bias,
                                double eps);

}  // namespace hh::attn
