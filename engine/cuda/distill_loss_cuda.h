// A fused CUDA kernel for stage 1's loss (Hedgehog distillation), Torch-free and Qt-free.
//
// Per (batch b, head h) and query row i, with the teacher's weights p and the student's a,
//   p_ij = softmax_j(scale * q_i . k_j)            over j <= i (causal) or all j
//   a_ij = s_ij / den_i,  s_ij = fq_i . fk_j,       den_i = sum_j s_ij + eps (given)
//   loss_i = -sum_j p_ij log(a_ij + floor)        (soft cross-entropy, floor 1e-10)
// without ever holding a T x T matrix in global memory: tiles of q k^T and fq fk^T are made on
// tensor cores (bf16) or by FMA (fp32) in shared memory, p by an online softmax, and the sums are
// reduced as they go (memory linear in T). The backward recomputes both tiles from the forward's
// row statistics, as FlashAttention's does. The normaliser den is an input: its gradient,
// coef_i / den_i with coef_i = sum_j p_ij s_ij / (s_ij + floor den_i), is the caller's to pass on
// (den is a cheap function of fq and fk: fq_i . cumsum(fk)_i + eps).
//
// Conventions: "rows" tensors as hedgehog_cuda.h's ([B, H, T, X] in the given dtype, last dim
// contiguous, any other strides); per-row arrays [B, H, T] fp32 contiguous; everything on the
// current device, asynchronous on `stream`. Not yet run on a GPU.
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "engine/cuda/hedgehog_cuda.h"

namespace hh::cuda {

struct DistillLossProblem {
  int batch = 0, heads = 0;
  int64_t length = 0;        // T >= 1
  int headDim = 0;           // D of q, k: 32, 64 or 128
  int features = 0;          // F of fq, fk: 2 D (the Hedgehog map's [exp(u), exp(-u)])
  DType dtype = DType::F32;  // q, k, fq, fk
  bool causal = true;
  float scale = 1.0f;    // of q . k in the teacher's softmax (1 / sqrt(D))
  float floor = 1e-10f;  // inside the log
  cudaStream_t stream = nullptr;
};

// Whether the kernels take this shape on `device`: D in {32, 64, 128}, F = 2 D, compute
// capability 8.0 or newer with enough shared memory per block.
bool distillLossCudaSupports(DType dtype, int headDim, int features, int device);

struct DistillLossArgs {
  DistillLossProblem p;
  Rows q, k;             // [B, H, T, D] dtype: the teacher's (scaled by `scale` inside)
  Rows fq, fk;           // [B, H, T, F] dtype: the student's features
  const float* den;      // [B, H, T]: sum_j s_ij + eps
  float* rowLoss;        // [B, H, T], written: -sum_j p_ij log(a_ij + floor)
  float* rowCoef;        // [B, H, T], written: sum_j p_ij s_ij / (s_ij + floor den_i)
  float* rowNegEntropy;  // [B, H, T], written: sum_j p_ij log p_ij (the KL's constant part)
  float* rowLse;         // [B, H, T], written: log sum_j exp(scale q_i . k_j), for the backward
};
Status distillLossCudaForward(const DistillLossArgs& a);

struct DistillLossBackwardArgs {
  DistillLossProblem p;
  Rows q, k, fq, fk;        // as the forward's
  const float* den;         // [B, H, T], as the forward's
  const float* rowLse;      // [B, H, T], the forward's
  const float* gradScale;   // one float on the device: the loss's gradient
  float multiplier = 1.0f;  // times *gradScale: the gradient of each loss_i
  float* gfq = nullptr;     // [B, H, T, F] fp32 contiguous, written: d loss / d fq (den held fixed)
  float* gfk = nullptr;     // [B, H, T, F] fp32 contiguous, written: d loss / d fk (den held fixed)
};
Status distillLossCudaBackward(const DistillLossBackwardArgs& a);

}  // namespace hh::cuda
