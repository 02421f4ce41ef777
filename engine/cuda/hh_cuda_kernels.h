// Internal declarations shared by the Hedgehog CUDA translation units (not part of the API).
#pragma once
#include <algorithm>
#include <cstddef>

#include "engine/cuda/hedgehog_cuda.h"

namespace hh::cuda::detail {

// Dynamic shared memory per CTA of the forward (and the backward's largest) kernel.
size_t forwardSmemBytes(DType dtype, int headDim);
size_t backwardSmemBytes(DType dtype, int headDim);

// Backward part 1 (hh_backward_scan.cu): writes gv and the feature gradients gu of q and k,
// each fp32 [B*H, T, D] contiguous. Part 2 (hh_backward_params.cu) turns gu into gq, gk, gW, gb.
cudaError_t launchBackwardScans(const BackwardArgs& a, float* guQ, float* guK);

// nullptr when the sizes are usable, else why not.
inline const char* checkProblem(const Problem& p) {
  if (p.batch < 1 || p.heads < 1 || p.length < 1) return "hedgehog CUDA: B, H and T must be positive";
  if (p.headDim != 64 && p.headDim != 128) return "hedgehog CUDA: head dim must be 64 or 128";
  if (static_cast<long long>(p.batch) * p.heads > 0x7fffffffLL) return "hedgehog CUDA: B * H too large";
  if (!(p.eps >= 0.0f)) return "hedgehog CUDA: eps must be >= 0";
  return nullptr;
}

}  // namespace hh::cuda::detail
