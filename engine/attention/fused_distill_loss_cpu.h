// Stage 1's loss (Hedgehog distillation) on the CPU without the T x T weights: the soft
// cross-entropy between the teacher's softmax weights and the student's linear-attention weights,
// computed from q, k and the student's features a block of query rows at a time.
//
// Per (batch b, head h) and query row i, with the teacher's weights p and the student's a,
//   p_ij = softmax_j(scale q_i . k_j)               over j <= i (causal) or all j
//   a_ij = s_ij / den_i,  s_ij = fq_i . fk_j,         den_i = sum_j s_ij + eps
//   crossEntropy = -sum_{b,h,i,j} p_ij log(a_ij + 1e-10) / (B T)
//   negEntropy   =  sum_{b,h,i,j} p_ij log p_ij / (B T)          (the KL's constant part)
// Each block of 64 query rows gets its scores and feature products by BLAS into buffers that stay
// in cache; one pass over each row then makes its maximum, and a second its sums (exp and log on
// 8 floats at once). The backward recomputes both from the row's log-sum-exp and forms
// G = -g p / (s + 1e-10 den) in place, then gfq = G fk and gfk += G^T fq by BLAS. Memory: linear
// in T. The same terms as the materialised weights give (jobs::distillationLoss), to fp32
// rounding; tests/engine/attention/test_fused_distill_loss_cpu.cpp checks it against fp64.
#pragma once
#include <ATen/core/Tensor.h>

namespace hh::attn {

// Whether this build has it (a BLAS was found at configure time).
bool fusedDistillLossCpuAvailable();

// Whether fusedDistillLossCpu takes these: q [B, H, T, D] and fq [B, H, T, F] on the CPU, q fp32 or
// bf16, in a build with a BLAS (computed in fp32 either way).
bool fusedDistillLossCpuAccepts(const at::Tensor& q, const at::Tensor& fq);

struct DistillLossTerms {
  at::Tensor crossEntropy;  // scalar fp32, with autograd to fq and fk (den's dependence included)
  at::Tensor negEntropy;    // scalar fp32, a constant
};

// q, k [B, H, T, D] the teacher's (no gradient); fq, fk [B, H, T, F] the student's features.
// Throws std::invalid_argument on what fusedDistillLossCpuAccepts refuses or on shapes that disagree.
DistillLossTerms fusedDistillLossCpu(const at::Tensor& q, const at::Tensor& k, const at::Tensor& fq,
                                     const at::Tensor& fk, double scale, double eps, bool causal);

}  // namespace hh::attn
