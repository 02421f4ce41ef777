// What the two forward kernels share (hh_forward.cu, the sequential one; hh_forward_pipelined.cu):
// their tiles, the split of each sequence into segments and what one thread block works on.
#pragma once
#include "engine/cuda/hh_cuda_common.cuh"

namespace hh::cuda::detail {

// Rows per chunk (C) and value columns per thread block (N): bf16 64 and 64 (tensor cores),
// fp32 32 and 32 (FMA); N no more than the head dim D.
template <typename T, int D>
struct ForwardTiles {
  static constexpr int C = sizeof(T) == 2 ? 64 : 32;
  static constexpr int N = (sizeof(T) == 2 ? 64 : 32) < D ? (sizeof(T) == 2 ? 64 : 32) : D;
};

// The segmented forward's workspace: per (b, h) and segment a [2D, D] state and a [2D] z, fp32.
struct Segments {
  float* S;  // [B*H][segments][2D][D]
  float* z;  // [B*H][segments][2D]
  int count;
  int64_t chunksEach;
};

__host__ __device__ inline Segments segmentsOf(const ForwardArgs& a, int chunk) {
  const int64_t chunks = (a.p.length + chunk - 1) / chunk;
  Segments g{nullptr, nullptr, a.segments, (chunks + a.segments - 1) / a.segments};
  if (a.segments > 1) {
    const size_t stateFloats = size_t(a.p.batch) * a.p.heads * a.segments * 2 * a.p.headDim * a.p.headDim;
    g.S = static_cast<float*>(a.workspace);
    g.z = g.S + stateFloats;
  }
  return g;
}

// What a forward block works on: head (b, h), value columns [n0, n0 + N), the chunks [c0, c1) of
// segment blockIdx.z and that segment's slot in the workspace; the head's map W, bias.
struct ForwardBlock {
  int b, h, n0, seg;
  int64_t c0, c1;
  size_t slot;
  Segments g;
  const float *W, *bias;
};

template <typename T, int D>
__device__ ForwardBlock forwardBlock(const ForwardArgs& a) {
  using Cfg = ForwardTiles<T, D>;
  ForwardBlock f;
  f.b = blockIdx.x / a.p.heads;
  f.h = blockIdx.x % a.p.heads;
  f.n0 = blockIdx.y * Cfg::N;
  f.seg = blockIdx.z;
  f.g = segmentsOf(a, Cfg::C);
  const int64_t chunks = (a.p.length + Cfg::C - 1) / Cfg::C;
  f.c0 = f.seg * f.g.chunksEach;
  f.c1 = f.c0 + f.g.chunksEach < chunks ? f.c0 + f.g.chunksEach : chunks;
  f.slot = size_t(blockIdx.x) * f.g.count + f.seg;
  f.W = a.weight + size_t(f.h) * D * D;
  f.bias = a.bias + size_t(f.h) * D;
  return f;
}

__device__ __forceinline__ int chunkLength(int64_t t0, int64_t length, int c) {
  return static_cast<int>(length - t0 < c ? length - t0 : c);
}


// Pass 2 of a split forward (hh_forward.cu): each segment's state sum in the workspace becomes the
// sum of the segments before it, its starting state.
cudaError_t launchSegmentPrefix(const ForwardArgs& a, int chunk);

}  // namespace hh::cuda::detail
