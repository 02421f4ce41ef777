// Pipelined forward of causal Hedgehog linear attention (ForwardArgs::pipelined, hedgehog_cuda.h).
//
// The sequential forward's algorithm, grid and segments (hh_forward.cu), rearranged for latency,
// which the first GPU run showed to be its limit: a 64-row chunk of B=8 H=32 D=128 took about
// 70 us of one multiprocessor for about 11 MFLOP of tile products (docs/performance_gpu.md). Here:
//   - the head's map stays in shared memory for the block's life (W as bf16, bias), instead of
//     being fetched from L2 and converted twice a chunk (fp32 reads W in place, as before);
//   - the next chunk's q, k and v are fetched with cp.async while this one is computed (q and k
//     have one buffer each, free once the features are made; v has two);
//   - phi(q) and phi(k) come out of one pass over both tiles (fast exp), and the state's operand
//     copy is refreshed in the same pass;
//   - scores are masked and rounded by the warp that made them (no fp32 score matrix), each row's
//     denominator is one warp reduction, and each output tile is divided and written by the warp
//     that made it: four block barriers a chunk instead of twelve.
// Per chunk (C rows, the block's N value columns of F = 2D features):
//   L = phi(q), Lk = phi(k)   PT = T(mask(L Lk^T))   den = rowsum(PT) + L z + eps
//   y = (PT v + L T(S)) / den   S += Lk^T v   z += colsum(Lk)
// Not yet run on a GPU: checked under the CUDA emulation (tests/engine/cuda) and compiled for sm_80
// and sm_90. Its shared memory (bf16 D=128: 209 KiB) exceeds an A100's 163 KiB; there the
// sequential forward runs instead (hedgehogCudaForward).
#include "engine/cuda/hh_cuda_kernels.h"
#include "engine/cuda/hh_cuda_pipeline.cuh"
#include "engine/cuda/hh_cuda_scan.cuh"
#include "engine/cuda/hh_forward.cuh"

namespace hh::cuda::detail {

template <typename T, int D>
struct PipelinedLayout : ForwardTiles<T, D> {
  using ForwardTiles<T, D>::C;
  using ForwardTiles<T, D>::N;
  static constexpr int K = 2 * D, PAD = padOf<T>();
  static constexpr int LDX = D + PAD, LDK = K + PAD, LDN = N + PAD, LDC = C + PAD;
  static constexpr int TC = C / 16, TD = D / 16, TN = N / 16;
  static constexpr bool kSharedW = sizeof(T) == 2;  // fp32: FMA reads W from global memory (L1)

  // Byte offsets into the dynamic shared memory.
  static constexpr size_t oW = 0;  // [D][LDX] T (bf16 only)
  static constexpr size_t oBias = oW + (kSharedW ? alignUp(size_t(D) * LDX * sizeof(T)) : 0);  // [D] f32
  static constexpr size_t oXq = oBias + alignUp(size_t(D) * sizeof(float));  // [C][LDX] T, raw q
  static constexpr size_t oXk = oXq + alignUp(size_t(C) * LDX * sizeof(T));  // [C][LDX] T, raw k
  static constexpr size_t kVBytes = alignUp(size_t(C) * LDN * sizeof(T));
  static constexpr size_t oV = oXk + alignUp(size_t(C) * LDX * sizeof(T));  // 2 x [C][LDN] T
  static constexpr size_t oL = oV + 2 * kVBytes;                               // [C][LDK] T, phi(q)
  static constexpr size_t oLk = oL + alignUp(size_t(C) * LDK * sizeof(T));     // [C][LDK] T, phi(k)
  static constexpr size_t oSop = oLk + alignUp(size_t(C) * LDK * sizeof(T));   // [K][LDN] T, T(S)
  static constexpr size_t oPT = oSop + alignUp(size_t(K) * LDN * sizeof(T));   // [C][LDC] T
  static constexpr size_t oStage = oPT + alignUp(size_t(C) * LDC * sizeof(T));
  static constexpr size_t oDen = oStage + alignUp(kStageBytes);                // [C] f32
  static constexpr size_t oZ = oDen + alignUp(size_t(C) * sizeof(float));      // [K] f32
  static constexpr size_t kBytes = oZ + alignUp(size_t(K) * sizeof(float));
};

// The block's shared memory, carved as PipelinedLayout says; `stage` is this warp's.
template <typename T, int D>
struct PipelinedSmem : PipelinedLayout<T, D> {
  using P = PipelinedLayout<T, D>;
  T *W, *Xq, *Xk, *V, *L, *Lk, *Sop, *PT;
  float *bias, *stage, *den, *z;

  __device__ explicit PipelinedSmem(unsigned char* m)
      : W(reinterpret_cast<T*>(m + P::oW)), Xq(reinterpret_cast<T*>(m + P::oXq)), Xk(reinterpret_cast<T*>(m + P::oXk)),
        V(reinterpret_cast<T*>(m + P::oV)), L(reinterpret_cast<T*>(m + P::oL)), Lk(reinterpret_cast<T*>(m + P::oLk)),
        Sop(reinterpret_cast<T*>(m + P::oSop)), PT(reinterpret_cast<T*>(m + P::oPT)),
        bias(reinterpret_cast<float*>(m + P::oBias)),
        stage(reinterpret_cast<float*>(m + P::oStage) + (threadIdx.x >> 5) * 16 * kStageLd),
        den(reinterpret_cast<float*>(m + P::oDen)), z(reinterpret_cast<float*>(m + P::oZ)) {}

  // v of the chunk numbered i within the block's segment.
  __device__ T* vBuffer(int64_t i) const { return V + (i & 1) * (P::kVBytes / sizeof(T)); }
};

// The head's bias, and W as bf16 [D][LDX] (bf16 only), into shared memory.
template <typename T, int D>
__device__ void loadMap(const PipelinedSmem<T, D>& s, const ForwardBlock& k) {
  for (int n = threadIdx.x; n < D; n += kThreads) s.bias[n] = k.bias[n];
  if constexpr (PipelinedLayout<T, D>::kSharedW) loadWeightBf16<D>(s.W, PipelinedLayout<T, D>::LDX, k.W);
}

// Issues the fetch of chunk c (the block's i-th): raw q (unless SumOnly) and k rows, and v's
// columns [n0, n0 + N) into buffer i % 2.
template <typename T, int D, bool SumOnly>
__device__ void prefetch(const PipelinedSmem<T, D>& s, const ForwardArgs& a, const ForwardBlock& k, int64_t c) {
  using P = PipelinedLayout<T, D>;
  const int64_t t0 = c * P::C;
  const int len = chunkLength(t0, a.p.length, P::C);
  if (!SumOnly) loadTileAsync<T, P::C, D>(s.Xq, P::LDX, a.q, k.b, k.h, t0, len, 0);
  loadTileAsync<T, P::C, D>(s.Xk, P::LDX, a.k, k.b, k.h, t0, len, 0);
  loadTileAsync<T, P::C, P::N>(s.vBuffer(c - k.c0), P::LDN, a.v, k.b, k.h, t0, len, k.n0);
}

// Lk = phi(raw k) and (unless SumOnly) L = phi(raw q), rows >= len zero.
template <typename T, int D, bool SumOnly>
__device__ void features(const PipelinedSmem<T, D>& s, const float* Wglobal, int len) {
  using P = PipelinedLayout<T, D>;
  const MapJob<T> k{s.Xk, P::LDX, s.Lk, P::LDK, nullptr}, q{s.Xq, P::LDX, s.L, P::LDK, nullptr};
  if constexpr (P::kSharedW)
    mapTiles<T, D, P::C>(k, q, SumOnly ? 1 : 2, s.W, P::LDX, s.bias, D, len, s.stage);
  else
    mapTiles<T, D, P::C>(k, q, SumOnly ? 1 : 2, Wglobal, D, s.bias, D, len, s.stage);
}

// den_i = sum_{j<=i} PT_ij + phi(q_i) . z + eps for the chunk's rows (z before this chunk), into
// shared memory and (block column 0) the caller's den.
template <typename T, int D>
__device__ void denominators(const PipelinedSmem<T, D>& s, const ForwardArgs& a, const ForwardBlock& k, int64_t t0,
                             int len) {
  using P = PipelinedLayout<T, D>;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  for (int i = warp; i < len; i += kWarps) {
    float sum = 0.0f;
    for (int j = lane; j <= i; j += 32) sum += toF(s.PT[i * P::LDC + j]);
    for (int f = lane; f < P::K; f += 32) sum += toF(s.L[i * P::LDK + f]) * s.z[f];
    const float den = warpSum(sum) + a.p.eps;
    if (lane == 0) {
      s.den[i] = den;
      if (a.den && blockIdx.y == 0) a.den[(size_t(k.b) * a.p.heads + k.h) * a.p.length + t0 + i] = den;
    }
  }
}

// y tiles = (PT v + L T(S)) / den, each written by the warp that made it.
template <typename T, int D>
__device__ void outputs(const PipelinedSmem<T, D>& s, const T* V, const ForwardArgs& a, const ForwardBlock& k,
                        int64_t t0, int len) {
  using P = PipelinedLayout<T, D>;
  using M = Mma<T>;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  for (int t = warp; t < P::TC * P::TN; t += kWarps) {
    const int ti = t / P::TN, tn = t % P::TN;
    if (ti * 16 >= len) continue;
    typename M::Acc acc;
    M::zero(acc);
    chunkProduct<T, P::C, P::K, true>(acc, ti, tn, s.PT, P::LDC, V, P::LDN, s.L, P::LDK, s.Sop, P::LDN);
    M::store(s.stage, kStageLd, acc);
    __syncwarp();
    for (int e = lane; e < 256; e += 32) {
      const int r = ti * 16 + (e >> 4);
      if (r < len)
        rowPtr<T>(a.y, k.b, k.h, t0 + r)[k.n0 + tn * 16 + (e & 15)] =
            fromF<T>(s.stage[(e >> 4) * kStageLd + (e & 15)] / s.den[r]);
    }
    __syncwarp();
  }
}

// Grid (B*H, D/N, segments) as the sequential forward's. SumOnly: the first pass of a split forward
// (segments but the last: their state sums into the workspace); else the forward proper, from the
// segment's starting state.
template <typename T, int D, bool SumOnly>
__global__ void __launch_bounds__(kThreads, 1) pipelinedForwardKernel(ForwardArgs a) {
  using P = PipelinedLayout<T, D>;
  constexpr int F = 2 * D;
  HH_DYNAMIC_SHARED(smem);
  const PipelinedSmem<T, D> s(smem);
  const ForwardBlock k = forwardBlock<T, D>(a);
  StateTiles<T, F, P::N> state;
  loadMap(s, k);
  const bool carried = !SumOnly && k.seg > 0;
  if (carried) state.load(k.g.S + k.slot * F * D + k.n0, D);
  for (int f = threadIdx.x; f < F; f += kThreads) s.z[f] = carried ? k.g.z[k.slot * F + f] : 0.0f;
  if (k.c0 < k.c1) prefetch<T, D, SumOnly>(s, a, k, k.c0);
  for (int64_t c = k.c0; c < k.c1; ++c) {
    const int64_t t0 = c * P::C;
    const int len = chunkLength(t0, a.p.length, P::C);
    asyncWait();
    __syncthreads();  // chunk c's raw rows are in; chunk c - 1 is done with L, Lk, Sop, PT
    features<T, D, SumOnly>(s, k.W, len);
    if (!SumOnly) state.toOperand(s.Sop, P::LDN, s.stage);
    __syncthreads();  // features and T(S) made; the raw q, k buffers are free
    const T* V = s.vBuffer(c - k.c0);
    if (c + 1 < k.c1) prefetch<T, D, SumOnly>(s, a, k, c + 1);
    if (!SumOnly) {
      maskedScores<T, P::C, P::K, true>(s.L, s.Lk, P::LDK, s.PT, P::LDC, s.stage);
      __syncthreads();
      denominators(s, a, k, t0, len);
      __syncthreads();  // den made from z before this chunk's update below
      outputs(s, V, a, k, t0, len);
    }
    state.accumulate(s.Lk, P::LDK, V, P::LDN, P::C);
    addColumnSums<T, P::C, P::K>(s.z, s.Lk, P::LDK);
  }
  if (SumOnly) {
    state.store(k.g.S + k.slot * F * D + k.n0, D);
    if (blockIdx.y == 0)
      for (int f = threadIdx.x; f < F; f += kThreads) k.g.z[k.slot * F + f] = s.z[f];
  }
}

template <typename T, int D>
Status launch(const ForwardArgs& a) {
  const auto forward = pipelinedForwardKernel<T, D, false>;
  const auto segmentSum = pipelinedForwardKernel<T, D, true>;
  const size_t bytes = PipelinedLayout<T, D>::kBytes;
  cudaError_t e = cudaFuncSetAttribute(forward, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes));
  if (e == cudaSuccess) e = cudaFuncSetAttribute(segmentSum, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes));
  if (e != cudaSuccess) return {e, nullptr};
  const unsigned bh = unsigned(a.p.batch) * unsigned(a.p.heads), columnBlocks = D / ForwardTiles<T, D>::N;
  if (a.segments > 1) {
    HH_LAUNCH(segmentSum, dim3(bh, columnBlocks, unsigned(a.segments) - 1), kThreads, bytes, a.p.stream, a);
    e = launchSegmentPrefix(a, ForwardTiles<T, D>::C);
    if (e != cudaSuccess) return {e, nullptr};
  }
  HH_LAUNCH(forward, dim3(bh, columnBlocks, unsigned(a.segments)), kThreads, bytes, a.p.stream, a);
  return {cudaGetLastError(), nullptr};
}

size_t pipelinedForwardSmemBytes(DType dtype, int headDim) {
  return withKernelShape(dtype, headDim, [](auto t, auto d) {
    return PipelinedLayout<typename decltype(t)::type, decltype(d)::value>::kBytes;
  });
}

Status launchPipelinedForward(const ForwardArgs& a) {
  return withKernelShape(a.p.dtype, a.p.headDim,
                         [&](auto t, auto d) { return launch<typename decltype(t)::type, decltype(d)::value>(a); });
}

}  // namespace hh::cuda::detail
