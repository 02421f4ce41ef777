// Softmax attention on the CPU without the [B,H,T,T] weights, for inference: per (batch, head), a
// block of 64 query rows at a time, their scores by BLAS into a buffer that stays in cache, each
// row's max and exp(t - max) on 8 floats at once, the values' product by BLAS, and the row sums
// divided out last. No autograd. Numerically softmaxAttention's computation (fp32 scores and sums,
// the scale 1 / sqrt(D)) to fp32 rounding; tests/engine/attention/test_fused_softmax_cpu.cpp
// checks it against fp64.
#pragma once
#include <ATen/core/Tensor.h>

namespace hh::attn {

// Whether fusedSoftmaxAttentionCpu takes these: [B, H, T, X] CPU tensors of fp32 or bf16, at least
// one key, no key mask, no gradient needed (grad mode off or no input requiring one), a build with
// a BLAS.
bool fusedSoftmaxAttentionCpuAccepts(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                     const at::Tensor& keyMask);

// q [B, H, Tq, D], k [B, H, Tk, D], v [B, H, Tk, Dv] -> [B, H, Tq, Dv] in v's dtype; causal needs
// Tq == Tk. Throws std::invalid_argument on what fusedSoftmaxAttentionCpuAccepts refuses.
at::Tensor fusedSoftmaxAttentionCpu(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool causal);

}  // namespace hh::attn
