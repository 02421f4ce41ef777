// Internal declarations shared by the Hedgehog CUDA translation units (not part of the API).
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "engine/cuda/hedgehog_cuda.h"

namespace hh::cuda::detail {

// Whether a block of the current device may opt in to `bytes` of dynamic shared memory (false
// where the device cannot be queried) (hh_forward.cu).
bool fitsDeviceSharedMemory(size_t bytes);

// Dynamic shared memory per CTA of the forward (and the backward's largest) kernel.
size_t forwardSmemBytes(DType dtype, int headDim);
size_t backwardSmemBytes(DType dtype, int headDim);

// The pipelined forward (hh_forward_pipelined.cu): its shared memory per CTA, and the launch of
// its passes for arguments hedgehogCudaForward has checked.
size_t pipelinedForwardSmemBytes(DType dtype, int headDim);
Status launchPipelinedForward(const ForwardArgs& a);

// The chunk-parallel forward (hh_forward_chunked.cu): its larger pass's shared memory per CTA, its
// workspace, and the launch of its passes for arguments hedgehogCudaForward has checked.
size_t chunkedForwardSmemBytes(DType dtype, int headDim);
size_t chunkedForwardWorkspace(const Problem& p, int segments);
Status launchChunkedForward(const ForwardArgs& a);

// Backward part 2 on tensor cores, bf16 only (hh_backward_params_mma.cu): gx into gq, gk and the
// gW, gb partials per split, as the FMA kernels of hh_backward_params.cu write them.
cudaError_t launchParamsMma(const BackwardArgs& a, const float* guQ, const float* guK, int splits, float* wPart,
                            float* bPart);

// One scan's segment states in the backward's workspace: [B*H][count][K][columns] fp32, a slot of
// slotFloats = K * columns per (b, h) and segment; null with one segment.
struct ScanSegments {
  float* states = nullptr;
  int count = 1;
  int64_t chunksEach = 0;
  int64_t slotFloats = 0;
};
struct BackwardSegments {
  ScanSegments dv, dq, dk;  // dv [2D][D]; dq, dk [D + 16][2D]
};

// The pipelined scans (hh_backward_pipelined.cu): their largest shared memory per CTA, and one
// pass of all three (the segment sums when sumOnly, else the scans proper).
size_t pipelinedScanSmemBytes(DType dtype, int headDim);
cudaError_t launchPipelinedScanPass(const BackwardArgs& a, float* guQ, float* guK, const BackwardSegments& segments,
                                    bool sumOnly);

// The chunk-parallel backward's part of the workspace (hh_backward_chunked.cu): a bf16 copy of W
// (bf16 inputs), each segment's forward and reverse states (fp32, with segments) and each chunk's
// (records, input dtype), all [B*H][segments or chunks][2D][D + 16].
struct ChunkedBackwardSpace {
  void* weight = nullptr;
  float *forwardSlots = nullptr, *reverseSlots = nullptr;
  void *forwardRecords = nullptr, *reverseRecords = nullptr;
};
// Its shared memory, whether that fits the current device, and its launch: gv, and gu of q and k
// as launchBackwardScans writes them.
size_t chunkedBackwardSmemBytes(DType dtype, int headDim);
bool chunkedBackwardFitsDevice(const BackwardArgs& a);
cudaError_t launchChunkedBackward(const BackwardArgs& a, float* guQ, float* guK, const ChunkedBackwardSpace& w);

// W [count] fp32 -> out [count] bf16 (hh_forward_chunked.cu).
cudaError_t launchWeightToBf16(const float* W, void* out, int64_t count, cudaStream_t stream);

// Each of the B*H heads' `segments` slots of slotFloats floats (states[bh][segment][slotFloats])
// becomes the sum of the slots before it (or after it, reverse), in place (hh_backward_scan.cu).
cudaError_t launchSegmentScan(float* states, int heads, int segments, int64_t slotFloats, bool reverse,
                              cudaStream_t stream);

// Backward part 1 (hh_backward_scan.cu): writes gv and the feature gradients gu of q and k,
// each fp32 [B*H, T, D] contiguous. Part 2 (hh_backward_params.cu) turns gu into gq, gk, gW, gb.
cudaError_t launchBackwardScans(const BackwardArgs& a, float* guQ, float* guK, const BackwardSegments& segments);

// nullptr when the sizes are usable, else why not.
inline const char* checkProblem(const Problem& p) {
  if (p.batch < 1 || p.heads < 1 || p.length < 1) return "hedgehog CUDA: B, H and T must be positive";
  if (p.headDim != 32 && p.headDim != 64 && p.headDim != 128) return "hedgehog CUDA: head dim must be 32, 64 or 128";
  if (static_cast<long long>(p.batch) * p.heads > 0x7fffffffLL) return "hedgehog CUDA: B * H too large";
  if (!(p.eps >= 0.0f)) return "hedgehog CUDA: eps must be >= 0";
  return nullptr;
}

}  // namespace hh::cuda::detail
