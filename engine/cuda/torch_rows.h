// Torch tensors as the CUDA kernels' Rows views (hedgehog_cuda.h), for the Torch wrappers
// (hedgehog_cuda_torch.cpp, distill_loss_torch.cpp).
#pragma once
#include <ATen/core/Tensor.h>

#include "engine/cuda/hedgehog_cuda.h"

namespace hh::cuda {

// t with its last dim contiguous, as every Rows view needs (a copy only where it is not); the
// other strides pass through.
inline at::Tensor rowsContiguous(const at::Tensor& t) {
  return t.stride(-1) == 1 ? t : t.contiguous();
}

// [B, H, T, X] or [B, H, X] with stride(-1) == 1 as Rows.
inline Rows rowsOf(const at::Tensor& t) {
  Rows r;
  r.data = const_cast<void*>(t.data_ptr());
  r.sb = t.stride(0);
  r.sh = t.stride(1);
  r.st = t.dim() == 4 ? t.stride(2) : 0;
  return r;
}

}  // namespace hh::cuda
