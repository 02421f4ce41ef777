// The Torch side of the fused CUDA Hedgehog kernels (hedgehog_cuda.h): checks at::Tensor inputs,
// runs the kernels on the current CUDA stream, and wraps forward + backward in an autograd
// Function. Compiled only when the project is configured with HH_CUDA_KERNELS=ON and HH_CUDA=ON
// (HH_CUDA_KERNELS=1 is then defined for the attention library). First run on an H100 on
// 2026-11-26 (docs/gpu.md).
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>

namespace hh::cuda {

// Which fused kernels run: the ones measured on the first GPU run; the pipelined forward and
// backward scans with the map's bf16 gradients on tensor cores (ForwardArgs::pipelined,
// BackwardArgs::pipelined); or the chunk-parallel forward and backward scans (ForwardArgs::chunked,
// BackwardArgs::chunked) with that weight gradient. The last two have not yet run on a GPU.
enum class KernelSet { Measured, Pipelined, Chunked };

// HH_FUSED_CUDA_KERNELS in the environment (read once): "pipelined" or "chunked"; anything else or
// unset: Measured.
KernelSet requestedKernelSet();

// True when hedgehogCudaCausal / hedgehogCudaStep take these tensors: CUDA, fp32 or bf16 (q, k, v
// alike), v's head dim equal to q's, D in {32, 64, 128}, a device of compute capability >= 8.0.
bool hedgehogCudaAccepts(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v);

// Whether the chunked forward's B * H * blocks-per-head thread blocks (hedgehogCudaBlocksPerHead)
// reach the multiprocessor count of q's GPU: each block walks its head's chunks in sequence, so
// below that the GPU idles. q [B, H, T, D] on a GPU.
bool hedgehogCudaFillsDevice(const at::Tensor& q);

// Bytes q's GPU can still hand out: the driver's free memory plus what Torch's caching allocator
// holds unused.
int64_t deviceBytesAvailable(const at::Tensor& q);

// Whether the chunk-parallel kernels' workspaces (their per-chunk records: the forward's
// B*H*chunks*(2D*D elements + 2D floats), the backward's 2 B*H*chunks*2D*(D+16) elements and its
// gu; hedgehogCudaForwardWorkspace, hedgehogCudaBackwardWorkspace) each take at most half of what
// q's GPU can still hand out (or are under 256 MiB: not asked); where they do not,
// KernelSet::Chunked runs the pipelined kernels instead. q [B, H, T, D] on a GPU.
bool chunkedKernelsFit(const at::Tensor& q);

// q, k, v [B, H, T, D] (CUDA, fp32 or bf16, last dim contiguous or copied), weight [H, D, D],
// bias [H, D] (any floating dtype; used in fp32) -> y [B, H, T, D] in q's dtype, with autograd
// for all five inputs (the backward runs the fused backward kernels). chunkSize > 0 is only
// checked: the kernels use their own tile (hedgehogCudaChunk), the same result up to rounding.
// Throws std::invalid_argument on anything else. `kernels` picks the set (KernelSet).
at::Tensor hedgehogCudaCausal(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& weight,
                              const at::Tensor& bias, int64_t chunkSize, double eps,
                              KernelSet kernels = requestedKernelSet());

// One decode step: q, k, v [B, H, D] (CUDA, fp32 or bf16); S [B, H, 2D, D] and z [B, H, 2D]
// fp32 contiguous on the same device, updated in place. Returns y [B, H, D] in q's dtype. No autograd.
at::Tensor hedgehogCudaStep(at::Tensor& S, at::Tensor& z, const at::Tensor& q, const at::Tensor& k,
                            const at::Tensor& v, const at::Tensor& weight, const at::Tensor& bias, double eps);

}  // namespace hh::cuda
