// What the backward scan kernels share (hh_backward_scan.cu, the sequential ones;
// hh_backward_pipelined.cu; hh_backward_chunked.cu): the feature block of the gphi scans, rows of a
// chunk, the forward's denominators, the operands [gy/den | gden] and [v | 1], the turn of gphi
// into gu, and the split of each sequence into segments.
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

// den of the chunk's rows into dst [C] by cp.async (1 past len: never divided by, never used).
template <int C>
__device__ void fetchDen(float* dst, const float* den, int64_t t0, int len) {
  for (int r = threadIdx.x; r < C; r += kThreads) {
    if (r < len)
      copyAsync4(dst + r, den + t0 + r);
    else
      dst[r] = 1.0f;
  }
}

// dst [C][ldk]: columns [0, D) = gy / den, column D = -(gy . y) / den, zeros up to K; from the raw
// gy, y rows [C][ldx] (zero from row len on). One warp per row.
template <typename T, int D, int C, int K>
__device__ void gradOperand(T* dst, int ldk, const T* gy, const T* y, int ldx, const float* den, int len) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  for (int r = warp; r < C; r += kWarps) {
    const float inv = r < len ? 1.0f / den[r] : 0.0f;
    float dot = 0.0f;
    for (int c = lane; c < D; c += 32) {
      const float g = toF(gy[r * ldx + c]);
      dot += g * toF(y[r * ldx + c]);
      dst[r * ldk + c] = fromF<T>(g * inv);
    }
    dot = warpSum(dot);
    for (int c = D + lane; c < K; c += 32) dst[r * ldk + c] = fromF<T>(c == D ? -dot * inv : 0.0f);
  }
}

// dst [C][ldk]: columns [0, D) = v (raw rows [C][ldx], zero from row len on), column D = 1 below
// len, zeros up to K.
template <typename T, int D, int C, int K>
__device__ void valueOperand(T* dst, int ldk, const T* v, int ldx, int len) {
  constexpr int V = 16 / static_cast<int>(sizeof(T));
  for (int idx = threadIdx.x; idx < C * (D / V); idx += kThreads) {
    const int r = idx / (D / V), c = (idx % (D / V)) * V;
    copy16(dst + r * ldk + c, v + r * ldx + c);
  }
  onesColumn<T, D, C, K>(dst, ldk, len);
}

// gu tile (ti, tu) of the CTA's 32-output block from its e and 1/e output tiles:
// gu = out_e e - out_inv / e where |u| < 30 (eq > 0), else 0.
template <typename T, int D, int C>
__device__ void gradFeatureTile(const typename Mma<T>::Acc& outE, const typename Mma<T>::Acc& outInv, int ti, int tu,
                                const float* eq, float* stage, float* gu, int64_t t0, int len, int u0) {
  using M = Mma<T>;
  const int lane = threadIdx.x & 31;
  float e[8];
  M::store(stage, kStageLd, outE);
  __syncwarp();
#pragma unroll
  for (int k = 0; k < 8; ++k) e[k] = stage[((lane + 32 * k) >> 4) * kStageLd + ((lane + 32 * k) & 15)];
  __syncwarp();
  M::store(stage, kStageLd, outInv);
  __syncwarp();
#pragma unroll
  for (int k = 0; k < 8; ++k) {
    const int idx = lane + 32 * k, row = ti * 16 + (idx >> 4), n = tu * 16 + (idx & 15);
    if (row >= len) continue;
    const float es = eq[row * kBlockU + n], ex = fabsf(es);
    const float inv = stage[(idx >> 4) * kStageLd + (idx & 15)];
    gu[(t0 + row) * D + u0 + n] = throughClamp(es, e[k] * ex - inv / ex);
  }
  __syncwarp();
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
