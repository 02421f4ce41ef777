// The pieces the pipelined kernels share (hh_forward_pipelined.cu, hh_backward_pipelined.cu):
// the fused feature map over raw rows already in shared memory, the masked chunk scores, and one
// 16 x 16 tile of a chunk's output. Unlike ChunkScan (hh_cuda_scan.cuh), nothing here syncs the
// block: each function is one phase between the kernel's own barriers, every warp working on
// whole tiles through its own stage [16][kStageLd] fp32.
#pragma once
#include "engine/cuda/hh_cuda_common.cuh"

namespace hh::cuda::detail {

// One input of the fused map: raw rows x [C][ldx] in shared memory, and where their features go.
template <typename T>
struct MapJob {
  const T* x;
  int ldx;
  T* dest;      // [C][ldd]: exp(u) at column n, 1 / exp(u) at column nU + n; null: not wanted
  int ldd;
  float* eOut;  // [C][nU] fp32: exp(u) where |u| < 30, else -exp(u) (the backward's d phi / d u); null: not wanted
};

// u = x W^T + bias for the jobs' rows r < len (features zero from row len on) and the nU map
// outputs whose rows of W start at W (ld ldw; bf16 in shared memory, or fp32 anywhere for the FMA
// tiles) and whose biases start at bias; u clamped to +-30 before exp. One warp per 16 x 16 tile
// of (job, row block, output block), for the first job or both (jobCount 1 or 2).
// The jobs come by value and are picked field by field: an array of them indexed by the tile
// would live in local memory.
template <typename T, int D, int C>
__device__ void mapTiles(const MapJob<T> first, const MapJob<T> second, int jobCount, const T* W, int ldw,
                         const float* bias, int nU, int len, float* stage) {
  using M = Mma<T>;
  const int tilesPerJob = (C / 16) * (nU / 16), outBlocks = nU / 16;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  for (int t = warp; t < jobCount * tilesPerJob; t += kWarps) {
    const bool two = t >= tilesPerJob;
    const MapJob<T> job{two ? second.x : first.x, two ? second.ldx : first.ldx, two ? second.dest : first.dest,
                        two ? second.ldd : first.ldd, two ? second.eOut : first.eOut};
    const int ti = (t % tilesPerJob) / outBlocks, tn = t % outBlocks;
    typename M::Acc acc;
    M::zero(acc);
    M::template mac<false, true>(acc, job.x + ti * 16 * job.ldx, job.ldx, W + tn * 16 * ldw, ldw, D);
    M::store(stage, kStageLd, acc);
    __syncwarp();
    for (int e = lane; e < 256; e += 32) {
      const int r = ti * 16 + (e >> 4), n = tn * 16 + (e & 15);
      const float u = stage[(e >> 4) * kStageLd + (e & 15)] + bias[n];
      const float ex = clampedFastExp(u);
      const bool valid = r < len;
      if (job.dest) {
        job.dest[r * job.ldd + n] = fromF<T>(valid ? ex : 0.0f);
        job.dest[r * job.ldd + nU + n] = fromF<T>(valid ? __frcp_rn(ex) : 0.0f);
      }
      if (job.eOut) job.eOut[r * nU + n] = signedFeature(u, ex);
    }
    __syncwarp();
  }
}

// The chunk mask: j <= i (causal) or j >= i (anti-causal), and the 16 x 16 tiles it keeps.
template <bool Causal>
__device__ __forceinline__ bool keeps(int i, int j) { return Causal ? j <= i : j >= i; }
template <bool Causal>
__device__ __forceinline__ bool keepsTile(int ti, int tj) { return Causal ? tj <= ti : tj >= ti; }

// PT = T(mask(L Lk^T)) on the tiles the mask keeps (the others are never read): L, Lk [C][ldk]
// with K columns, PT [C][ldc].
template <typename T, int C, int K, bool Causal>
__device__ void maskedScores(const T* L, const T* Lk, int ldk, T* PT, int ldc, float* stage) {
  using M = Mma<T>;
  constexpr int TC = C / 16;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  for (int t = warp; t < TC * TC; t += kWarps) {
    const int ti = t / TC, tj = t % TC;
    if (!keepsTile<Causal>(ti, tj)) continue;
    typename M::Acc acc;
    M::zero(acc);
    M::template mac<false, true>(acc, L + ti * 16 * ldk, ldk, Lk + tj * 16 * ldk, ldk, K);
    M::store(stage, kStageLd, acc);
    __syncwarp();
    for (int e = lane; e < 256; e += 32) {
      const int i = ti * 16 + (e >> 4), j = tj * 16 + (e & 15);
      PT[i * ldc + j] = fromF<T>(keeps<Causal>(i, j) ? stage[(e >> 4) * kStageLd + (e & 15)] : 0.0f);
    }
    __syncwarp();
  }
}

// acc += (PT Vals + L Sop) at row block ti, column block tn: PT [C][ldc] (maskedScores), Vals
// [C][ldv], L [C][ldk] with K columns, Sop [K][ldn] (the state before this chunk, as an operand).
template <typename T, int C, int K, bool Causal>
__device__ void chunkProduct(typename Mma<T>::Acc& acc, int ti, int tn, const T* PT, int ldc, const T* vals, int ldv,
                             const T* L, int ldk, const T* Sop, int ldn) {
  using M = Mma<T>;
  for (int tj = 0; tj < C / 16; ++tj)
    if (keepsTile<Causal>(ti, tj))
      M::template mac<false, false>(acc, PT + ti * 16 * ldc + tj * 16, ldc, vals + tj * 16 * ldv + tn * 16, ldv, 16);
  M::template mac<false, false>(acc, L + ti * 16 * ldk, ldk, Sop + tn * 16, ldn, K);
}

}  // namespace hh::cuda::detail
