// What the two sets of backward scan kernels share (hh_backward_scan.cu, the sequential ones;
// hh_backward_pipelined.cu): the feature block of the gphi scans, rows of a chunk, the forward's
// denominators, and the split of each sequence into segments.
#pragma once
#include "engine/cuda/hh_cuda_common.cuh"
#include "engine/cuda/hh_cuda_kernels.h"

namespace hh::cuda::detail {

constexpr int kBlockU = 32;  // DB: feature indices u per gphi(q) / gphi(k) CTA

__device__ __forceinline__ int chunkLen(int64_t t0, int64_t length, int c) {
  return static_cast<int>(length - t0 < c ? length - t0 : c);
}
__device__ __forceinline__ const float* denRow(const BackwardArgs& a, int b, int h) {
  return a.den + (size_t(b) * a.p.heads + h) * a.p.length;
}

// The tail of the [v | 1] operand: columns [D, K) of dst [C][ld], 1 in column D below row len,
// zero elsewhere.
template <typename T, int D, int C, int K>
__device__ void onesColumn(T* dst, int ld, int len) {
  for (int idx = threadIdx.x; idx < C * (K - D); idx += kThreads) {
    const int r = idx / (K - D), c = idx % (K - D);
    dst[r * ld + D + c] = fromF<T>(r < len && c == 0 ? 1.0f : 0.0f);
  }
}

// The chunks [c0, c1) of segment blockIdx.z, and its state slot at the block's columns.
struct SegmentRange {
  int64_t c0, c1;
  float* state;
};
__device__ __forceinline__ SegmentRange segmentRange(const ScanSegments& g, int64_t chunks, int columnOffset) {
  SegmentRange r;
  r.c0 = int64_t(blockIdx.z) * g.chunksEach;
  r.c1 = r.c0 + g.chunksEach < chunks ? r.c0 + g.chunksEach : chunks;
  r.state = g.states ? g.states + (size_t(blockIdx.x) * g.count + blockIdx.z) * g.slotFloats + columnOffset : nullptr;
  return r;
}

}  // namespace hh::cuda::detail
