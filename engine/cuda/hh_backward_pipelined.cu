// Pipelined backward scans (BackwardArgs::pipelined; hh_backward_scan.cu has the sequential ones
// and the algebra). The same three scans, grids and segments, arranged as the pipelined forward
// (hh_forward_pipelined.cu) against the latency the first GPU run measured:
//   - the map's rows a CTA needs (all of W for gv, its 32-row block for gphi) stay in shared
//     memory as bf16 for the CTA's life, with their biases;
//   - the next chunk's raw rows (q, k, v, gy, y as the scan needs them, and den) are fetched with
//     cp.async while this chunk is computed;
//   - one phase builds every operand of a chunk from those rows (features, [gy/den | gden],
//     [v | 1], gy/den, the state's operand copy), and each output tile is finished by the warp
//     that made it (gv written; gphi's e and 1/e tiles turned into gu): three block barriers a
//     chunk instead of ten or more.
// Shared memory: bf16 D=128 208 KiB (gv) and 188 KiB (gphi), more than an A100 gives a CTA; where
// it does not fit, the sequential scans run (launchBackwardScans). Not yet run on a GPU: checked
// under the CUDA emulation (tests/engine/cuda) and compiled for sm_80 and sm_90.
#include "engine/cuda/hh_backward.cuh"
#include "engine/cuda/hh_cuda_kernels.h"
#include "engine/cuda/hh_cuda_pipeline.cuh"
#include "engine/cuda/hh_cuda_scan.cuh"
#include "engine/cuda/hh_forward.cuh"

namespace hh::cuda::detail {

// Sizes shared by both scans: C rows a chunk, raw rows [C][LDX].
template <typename T, int D>
struct ScanTiles {
  static constexpr int C = ForwardTiles<T, D>::C, PAD = padOf<T>(), LDX = D + PAD, LDC = C + PAD;
  static constexpr bool kSharedW = sizeof(T) == 2;  // fp32: FMA reads W from global memory (L1)
  static constexpr size_t kRawBytes = alignUp(size_t(C) * LDX * sizeof(T));
};

// gv scan: L = phi(k), Lk = phi(q) (all 2D features), Vals = gy / den on the CTA's N columns.
template <typename T, int D>
struct DvLayout : ScanTiles<T, D> {
  using B = ScanTiles<T, D>;
  static constexpr int K = 2 * D, N = ForwardTiles<T, D>::N, LDK = K + B::PAD, LDN = N + B::PAD;
  static constexpr size_t oW = 0;                                                          // [D][LDX] bf16
  static constexpr size_t oBias = oW + (B::kSharedW ? alignUp(size_t(D) * B::LDX * sizeof(T)) : 0);  // [D] f32
  static constexpr size_t oXq = oBias + alignUp(size_t(D) * sizeof(float));
  static constexpr size_t oXk = oXq + B::kRawBytes;
  static constexpr size_t oGy = oXk + B::kRawBytes;                            // [C][LDN] raw gy columns
  static constexpr size_t oDen = oGy + alignUp(size_t(B::C) * LDN * sizeof(T));  // [C] f32
  static constexpr size_t oV = oDen + alignUp(size_t(B::C) * sizeof(float));
  static constexpr size_t oL = oV + alignUp(size_t(B::C) * LDN * sizeof(T));
  static constexpr size_t oLk = oL + alignUp(size_t(B::C) * LDK * sizeof(T));
  static constexpr size_t oSop = oLk + alignUp(size_t(B::C) * LDK * sizeof(T));
  static constexpr size_t oPT = oSop + alignUp(size_t(K) * LDN * sizeof(T));
  static constexpr size_t oStage = oPT + alignUp(size_t(B::C) * B::LDC * sizeof(T));
  static constexpr size_t kBytes = oStage + alignUp(kStageBytes);
};

// gphi scans: L, Lk = [gy/den | gden] and [v | 1] (K = D + 16), Vals = the CTA's 32-output block
// of phi (e then 1/e), eq = that block's d phi / d u on the other side.
template <typename T, int D>
struct DqkLayout : ScanTiles<T, D> {
  using B = ScanTiles<T, D>;
  static constexpr int K = D + 16, U = kBlockU, N = 2 * U, LDK = K + B::PAD, LDN = N + B::PAD;
  static constexpr size_t oW = 0;                                                          // [U][LDX] bf16
  static constexpr size_t oBias = oW + (B::kSharedW ? alignUp(size_t(U) * B::LDX * sizeof(T)) : 0);  // [U] f32
  static constexpr size_t oXq = oBias + alignUp(size_t(U) * sizeof(float));
  static constexpr size_t oXk = oXq + B::kRawBytes;
  static constexpr size_t oXv = oXk + B::kRawBytes;
  static constexpr size_t oXgy = oXv + B::kRawBytes;
  static constexpr size_t oXy = oXgy + B::kRawBytes;
  static constexpr size_t oDen = oXy + B::kRawBytes;
  static constexpr size_t oV = oDen + alignUp(size_t(B::C) * sizeof(float));
  static constexpr size_t oL = oV + alignUp(size_t(B::C) * LDN * sizeof(T));
  static constexpr size_t oLk = oL + alignUp(size_t(B::C) * LDK * sizeof(T));
  static constexpr size_t oSop = oLk + alignUp(size_t(B::C) * LDK * sizeof(T));
  static constexpr size_t oPT = oSop + alignUp(size_t(K) * LDN * sizeof(T));
  static constexpr size_t oStage = oPT + alignUp(size_t(B::C) * B::LDC * sizeof(T));
  static constexpr size_t oEq = oStage + alignUp(kStageBytes);  // [C][U] f32
  static constexpr size_t kBytes = oEq + alignUp(size_t(B::C) * U * sizeof(float));
};

template <typename P>
struct ScanSmem {
  unsigned char* m;
  template <typename X>
  __device__ X* at(size_t offset) const { return reinterpret_cast<X*>(m + offset); }
  __device__ float* stage() const { return at<float>(P::oStage) + (threadIdx.x >> 5) * 16 * kStageLd; }
};

// gv: anti-causal, chunks in reverse. SumOnly: the segment's state sum phi(q)^T gy/den into its
// slot; else the scan from the slot's starting state. Grid (B*H, D/N, segments).
template <typename T, int D, bool SumOnly>
__global__ void __launch_bounds__(kThreads, 1) dvPipelinedKernel(BackwardArgs a, ScanSegments g) {
  using P = DvLayout<T, D>;
  using M = Mma<T>;
  constexpr int C = P::C, N = P::N, K = P::K;
  HH_DYNAMIC_SHARED(smem);
  const ScanSmem<P> s{smem};
  T *Xq = s.template at<T>(P::oXq), *Xk = s.template at<T>(P::oXk), *Gy = s.template at<T>(P::oGy);
  T *V = s.template at<T>(P::oV), *L = s.template at<T>(P::oL), *Lk = s.template at<T>(P::oLk);
  T *Sop = s.template at<T>(P::oSop), *PT = s.template at<T>(P::oPT);
  float *den = s.template at<float>(P::oDen), *bias = s.template at<float>(P::oBias), *stage = s.stage();
  const int b = blockIdx.x / a.p.heads, h = blockIdx.x % a.p.heads, n0 = blockIdx.y * N;
  const float* Wg = a.weight + size_t(h) * D * D;
  const T* W;
  int ldw;
  if constexpr (P::kSharedW) {
    loadWeightBf16<D>(s.template at<T>(P::oW), P::LDX, Wg);
    W = s.template at<T>(P::oW);
    ldw = P::LDX;
  } else {
    W = Wg;
    ldw = D;
  }
  for (int n = threadIdx.x; n < D; n += kThreads) bias[n] = a.bias[size_t(h) * D + n];
  const SegmentRange r = segmentRange(g, (a.p.length + C - 1) / C, n0);
  StateTiles<T, K, N> state;
  if (!SumOnly && g.count > 1) state.load(r.state, D);
  const auto fetch = [&](int64_t c) {
    const int64_t t0 = c * C;
    const int len = chunkLen(t0, a.p.length, C);
    loadTileAsync<T, C, D>(Xq, P::LDX, a.q, b, h, t0, len, 0);
    if (!SumOnly) loadTileAsync<T, C, D>(Xk, P::LDX, a.k, b, h, t0, len, 0);
    loadTileAsync<T, C, N>(Gy, P::LDN, a.gy, b, h, t0, len, n0);
    fetchDen<C>(den, denRow(a, b, h), t0, len);
  };
  const int64_t count = r.c1 - r.c0;
  if (count > 0) fetch(r.c1 - 1);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  for (int64_t i = 0; i < count; ++i) {
    const int64_t t0 = (r.c1 - 1 - i) * C;
    const int len = chunkLen(t0, a.p.length, C);
    asyncWait();
    __syncthreads();  // this chunk's rows are in; the previous chunk is done with every operand
    const MapJob<T> q{Xq, P::LDX, Lk, P::LDK, nullptr}, k{Xk, P::LDX, L, P::LDK, nullptr};
    mapTiles<T, D, C>(q, k, SumOnly ? 1 : 2, W, ldw, bias, D, len, stage);
    for (int idx = threadIdx.x; idx < C * N; idx += kThreads) {  // Vals = gy / den (zero from len on)
      const int row = idx / N, n = idx % N;
      V[row * P::LDN + n] = fromF<T>(row < len ? toF(Gy[row * P::LDN + n]) / den[row] : 0.0f);
    }
    if (!SumOnly) state.toOperand(Sop, P::LDN, stage);
    __syncthreads();  // operands made; the raw rows are free
    if (i + 1 < count) fetch(r.c1 - 2 - i);
    if (!SumOnly) {
      maskedScores<T, C, K, false>(L, Lk, P::LDK, PT, P::LDC, stage);
      __syncthreads();
      for (int t = warp; t < (C / 16) * (N / 16); t += kWarps) {
        const int ti = t / (N / 16), tn = t % (N / 16);
        if (ti * 16 >= len) continue;
        typename M::Acc acc;
        M::zero(acc);
        chunkProduct<T, C, K, false>(acc, ti, tn, PT, P::LDC, V, P::LDN, L, P::LDK, Sop, P::LDN);
        M::store(stage, kStageLd, acc);
        __syncwarp();
        for (int e = lane; e < 256; e += 32) {
          const int row = ti * 16 + (e >> 4);
          if (row < len) rowPtr<T>(a.gv, b, h, t0 + row)[n0 + tn * 16 + (e & 15)] = fromF<T>(stage[(e >> 4) * kStageLd + (e & 15)]);
        }
        __syncwarp();
      }
    }
    state.accumulate(Lk, P::LDK, V, P::LDN, C);
  }
  if (SumOnly) state.store(r.state, D);
}

// gphi(q) (IsQ: causal, time order; L = [gnum | gden], Lk = [v | 1], Vals = phi(k) block, eq from
// q) and gphi(k) (anti-causal, reverse; the mirror). SumOnly: the segment's state sum. Grid
// (B*H, D/32, segments).
template <typename T, int D, bool IsQ, bool SumOnly>
__global__ void __launch_bounds__(kThreads, 1) dqkPipelinedKernel(BackwardArgs a, float* guOut, ScanSegments g) {
  using P = DqkLayout<T, D>;
  using M = Mma<T>;
  constexpr int C = P::C, N = P::N, K = P::K, U = P::U;
  constexpr bool kGrad = !SumOnly || !IsQ, kValue = !SumOnly || IsQ;  // which of L, Lk the pass needs
  HH_DYNAMIC_SHARED(smem);
  const ScanSmem<P> s{smem};
  T *Xq = s.template at<T>(P::oXq), *Xk = s.template at<T>(P::oXk), *Xv = s.template at<T>(P::oXv);
  T *Xgy = s.template at<T>(P::oXgy), *Xy = s.template at<T>(P::oXy), *V = s.template at<T>(P::oV);
  T *L = s.template at<T>(P::oL), *Lk = s.template at<T>(P::oLk), *Sop = s.template at<T>(P::oSop);
  T* PT = s.template at<T>(P::oPT);
  float *den = s.template at<float>(P::oDen), *bias = s.template at<float>(P::oBias);
  float *eq = s.template at<float>(P::oEq), *stage = s.stage();
  const int b = blockIdx.x / a.p.heads, h = blockIdx.x % a.p.heads, u0 = blockIdx.y * U;
  const float* Wg = a.weight + (size_t(h) * D + u0) * D;  // rows [u0, u0 + U)
  const T* W;
  int ldw;
  if constexpr (P::kSharedW) {
    loadWeightBf16<D>(s.template at<T>(P::oW), P::LDX, Wg, U);
    W = s.template at<T>(P::oW);
    ldw = P::LDX;
  } else {
    W = Wg;
    ldw = D;
  }
  for (int n = threadIdx.x; n < U; n += kThreads) bias[n] = a.bias[size_t(h) * D + u0 + n];
  float* gu = guOut + size_t(blockIdx.x) * a.p.length * D;
  const SegmentRange r = segmentRange(g, (a.p.length + C - 1) / C, blockIdx.y * N);
  StateTiles<T, K, N> state;
  if (!SumOnly && g.count > 1) state.load(r.state, 2 * D);
  T* featRaw = IsQ ? Xk : Xq;  // its phi block are the Vals
  T* gradRaw = IsQ ? Xq : Xk;  // its e block turns gphi into gu
  const auto chunkAt = [&](int64_t i) { return IsQ ? r.c0 + i : r.c1 - 1 - i; };
  const auto fetch = [&](int64_t c) {
    const int64_t t0 = c * C;
    const int len = chunkLen(t0, a.p.length, C);
    loadTileAsync<T, C, D>(featRaw, P::LDX, IsQ ? a.k : a.q, b, h, t0, len, 0);
    if (!SumOnly) loadTileAsync<T, C, D>(gradRaw, P::LDX, IsQ ? a.q : a.k, b, h, t0, len, 0);
    if (kValue) loadTileAsync<T, C, D>(Xv, P::LDX, a.v, b, h, t0, len, 0);
    if (kGrad) {
      loadTileAsync<T, C, D>(Xgy, P::LDX, a.gy, b, h, t0, len, 0);
      loadTileAsync<T, C, D>(Xy, P::LDX, a.y, b, h, t0, len, 0);
      fetchDen<C>(den, denRow(a, b, h), t0, len);
    }
  };
  const int64_t count = r.c1 - r.c0;
  if (count > 0) fetch(chunkAt(0));
  const int warp = threadIdx.x >> 5;
  for (int64_t i = 0; i < count; ++i) {
    const int64_t t0 = chunkAt(i) * C;
    const int len = chunkLen(t0, a.p.length, C);
    asyncWait();
    __syncthreads();  // this chunk's rows are in; the previous chunk is done with every operand
    const MapJob<T> feat{featRaw, P::LDX, V, P::LDN, nullptr}, grad{gradRaw, P::LDX, nullptr, 0, eq};
    mapTiles<T, D, C>(feat, grad, SumOnly ? 1 : 2, W, ldw, bias, U, len, stage);
    if (kGrad) gradOperand<T, D, C, K>(IsQ ? L : Lk, P::LDK, Xgy, Xy, P::LDX, den, len);
    if (kValue) valueOperand<T, D, C, K>(IsQ ? Lk : L, P::LDK, Xv, P::LDX, len);
    if (!SumOnly) state.toOperand(Sop, P::LDN, stage);
    __syncthreads();  // operands made; the raw rows are free
    if (i + 1 < count) fetch(chunkAt(i + 1));
    if (!SumOnly) {
      maskedScores<T, C, K, IsQ>(L, Lk, P::LDK, PT, P::LDC, stage);
      __syncthreads();
      for (int t = warp; t < (C / 16) * (U / 16); t += kWarps) {  // one warp per (row block, u block)
        const int ti = t / (U / 16), tu = t % (U / 16);
        if (ti * 16 >= len) continue;
        typename M::Acc outE, outInv;
        M::zero(outE);
        M::zero(outInv);
        chunkProduct<T, C, K, IsQ>(outE, ti, tu, PT, P::LDC, V, P::LDN, L, P::LDK, Sop, P::LDN);
        chunkProduct<T, C, K, IsQ>(outInv, ti, tu + U / 16, PT, P::LDC, V, P::LDN, L, P::LDK, Sop, P::LDN);
        gradFeatureTile<T, D, C>(outE, outInv, ti, tu, eq, stage, gu, t0, len, u0);
      }
    }
    state.accumulate(Lk, P::LDK, V, P::LDN, C);
  }
  if (SumOnly) state.store(r.state, 2 * D);
}

template <typename T, int D, bool SumOnly>
cudaError_t launchPass(const BackwardArgs& a, float* guQ, float* guK, const BackwardSegments& seg) {
  const unsigned bh = unsigned(a.p.batch) * unsigned(a.p.heads), z = unsigned(seg.dv.count);
  const size_t dvBytes = DvLayout<T, D>::kBytes, dqkBytes = DqkLayout<T, D>::kBytes;
  const auto dv = dvPipelinedKernel<T, D, SumOnly>;
  const auto dq = dqkPipelinedKernel<T, D, true, SumOnly>;
  const auto dk = dqkPipelinedKernel<T, D, false, SumOnly>;
  cudaError_t e = cudaFuncSetAttribute(dv, cudaFuncAttributeMaxDynamicSharedMemorySize, int(dvBytes));
  if (e == cudaSuccess) e = cudaFuncSetAttribute(dq, cudaFuncAttributeMaxDynamicSharedMemorySize, int(dqkBytes));
  if (e == cudaSuccess) e = cudaFuncSetAttribute(dk, cudaFuncAttributeMaxDynamicSharedMemorySize, int(dqkBytes));
  if (e != cudaSuccess) return e;
  HH_LAUNCH(dv, dim3(bh, D / DvLayout<T, D>::N, z), kThreads, dvBytes, a.p.stream, a, seg.dv);
  HH_LAUNCH(dq, dim3(bh, D / kBlockU, z), kThreads, dqkBytes, a.p.stream, a, guQ, seg.dq);
  HH_LAUNCH(dk, dim3(bh, D / kBlockU, z), kThreads, dqkBytes, a.p.stream, a, guK, seg.dk);
  return cudaGetLastError();
}

template <typename T, int D>
cudaError_t launchPass(const BackwardArgs& a, float* guQ, float* guK, const BackwardSegments& seg, bool sumOnly) {
  return sumOnly ? launchPass<T, D, true>(a, guQ, guK, seg) : launchPass<T, D, false>(a, guQ, guK, seg);
}

size_t pipelinedScanSmemBytes(DType dtype, int headDim) {
  return largerSharedMemory<DvLayout, DqkLayout>(dtype, headDim);
}

cudaError_t launchPipelinedScanPass(const BackwardArgs& a, float* guQ, float* guK, const BackwardSegments& seg,
                                    bool sumOnly) {
  return withKernelShape(a.p.dtype, a.p.headDim, [&](auto t, auto d) {
    return launchPass<typename decltype(t)::type, decltype(d)::value>(a, guQ, guK, seg, sumOnly);
  });
}

}  // namespace hh::cuda::detail
