// The Torch side of the fused distillation-loss kernel (distill_loss_cuda.h): checks at::Tensor
// inputs, runs the kernels on the current CUDA stream and wraps them in an autograd Function.
// Compiled into the engine when it is configured with HH_CUDA_KERNELS=ON and HH_CUDA=ON, and into
// the emulated CUDA suite (HH_CUDA_EMULATION: CPU tensors, the kernels run by the host emulation).
// Not yet run on a GPU.
#pragma once
#include <ATen/core/Tensor.h>

namespace hh::cuda {

// Whether fusedDistillLoss takes these: q [B, H, T, D] and fq [B, H, T, 2D] on a CUDA device
// (the CPU under the emulation), q fp32 or bf16, D in {32, 64, 128}, a device the kernels fit.
bool fusedDistillLossAccepts(const at::Tensor& q, const at::Tensor& fq);

struct FusedDistillLoss {
  at::Tensor crossEntropy;  // scalar fp32, with autograd to fq and fk
  at::Tensor negEntropy;    // scalar fp32, a constant
};

// One layer's mask-free stage-1 terms (engine/jobs/distillation_loss.cpp) without the T x T
// weights: crossEntropy = -sum_{b,h,i,j} p_ij log(a_ij + 1e-10) / (B T) and negEntropy =
// sum p_ij log p_ij / (B T), where p = softmax(scale q k^T) and a = fq fk^T / (row sums + eps),
// both over j <= i when causal. q, k [B, H, T, D] are the teacher's (no gradient); fq, fk
// [B, H, T, 2D] the student's features, used in q's dtype. Throws std::invalid_argument on what
// fusedDistillLossAccepts refuses.
FusedDistillLoss fusedDistillLoss(const at::Tensor& q, const at::Tensor& k, const at::Tensor& fq, const at::Tensor& fk,
                                  double scale, double eps, bool causal);

}  // namespace hh::cuda
