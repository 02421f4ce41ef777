// Backward of causal Hedgehog linear attention, part 1: the three chunk scans (hedgehog_cuda.h).
//
// With gnum_i = gy_i / den_i, gden_i = -(gy_i . y_i) / den_i, s_ij = phi(q_i).phi(k_j) and
// G_ij = gnum_i . v_j + gden_i (j <= i):
//   gv_j      = sum_{i>=j} s_ij gnum_i              dvKernel: anti-causal, chunks in reverse
//   gphi(q_i) = sum_{j<=i} G_ij phi(k_j)           dqkKernel<IsQ = true>: causal
//   gphi(k_j) = sum_{i>=j} G_ij phi(q_i)           dqkKernel<IsQ = false>: anti-causal, reverse
// Each is a ChunkScan (hh_cuda_scan.cuh); G = [gnum | gden] [v | 1]^T is an L Lk^T product with
// K = D + 16 (one extra column, padded). Chunk states are recomputed, never stored.
// dqkKernel carries the state of one block of DB = 32 feature indices u (phi columns u and D + u)
// and turns gphi into gu = gphi[u] e - gphi[D+u] / e (0 where |u| >= 30) at once; gu goes to an
// fp32 workspace [B*H, T, D] that hh_backward_params.cu turns into gq, gk, gW, gb.
// Grids: dv (B*H, D/N) as the forward; dq, dk (B*H, D/32); times the segments (grid z). With
// segments, as the forward's: a pass sums each segment's state per scan (SumOnly), a scan over the
// segments turns the sums into starting states (the earlier segments' for the causal scan, the
// later ones' for the two reverse scans), then the scans run every segment at once.
// 256 threads each.
#include "engine/cuda/hh_backward.cuh"
#include "engine/cuda/hh_cuda_kernels.h"
#include "engine/cuda/hh_cuda_scan.cuh"
#include "engine/cuda/hh_forward.cuh"

namespace hh::cuda::detail {

template <typename T, int D>
struct DvCfg {
  static constexpr int C = ForwardTiles<T, D>::C;
  static constexpr int N = ForwardTiles<T, D>::N;
  using Scan = ChunkScan<T, C, 2 * D, N, false>;
  using Feat = FeatureRows<T, D, C>;
  static_assert(Feat::scratchBytes(D) <= Scan::kScratchBytes, "feature scratch overflows");
};

template <typename T, int D, bool IsQ>
struct DqkCfg {
  static constexpr int C = sizeof(T) == 2 ? 64 : 32;
  static constexpr int K = D + 16, N = 2 * kBlockU;
  using Scan = ChunkScan<T, C, K, N, IsQ, kBlockU>;
  using Feat = FeatureRows<T, D, C>;
  static_assert(Feat::scratchBytes(kBlockU) <= Scan::kScratchBytes, "feature scratch overflows");
  static_assert(size_t(C) * (D + padOf<T>()) * sizeof(T) <= Scan::kScratchBytes, "gradRows' y tile overflows");
};

// dst [C][ld]: columns [0, D) = gy / den, column D = -(gy . y) / den, then zeros up to K;
// rows >= len all zero. gy arrives in dst and y in `scratch` ([C][D + pad] T) by 16-byte tile
// loads, then one warp per row; syncs the block on exit (the chunk step reuses the scratch).
template <typename T, int D, int C, int K>
__device__ void gradRows(T* dst, int ld, unsigned char* scratch, const BackwardArgs& a, int b, int h, int64_t t0,
                         int len) {
  constexpr int LDY = D + padOf<T>();
  T* y = reinterpret_cast<T*>(scratch);
  loadTile<T, C, D>(dst, ld, a.gy, b, h, t0, len, 0);
  loadTile<T, C, D>(y, LDY, a.y, b, h, t0, len, 0);
  __syncthreads();
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const float* den = denRow(a, b, h);
  for (int r = warp; r < C; r += kWarps) {
    T* out = dst + r * ld;
    const float inv = r < len ? 1.0f / den[t0 + r] : 0.0f;
    float dot = 0.0f;
    for (int c = lane; c < D; c += 32) {
      const float g = toF(out[c]);
      dot += g * toF(y[r * LDY + c]);
      out[c] = fromF<T>(g * inv);
    }
    dot = warpSum(dot);
    for (int c = D + lane; c < K; c += 32) out[c] = fromF<T>(c == D ? -dot * inv : 0.0f);
  }
  __syncthreads();
}

// dst [C][ld]: columns [0, D) = v (16-byte tile loads), column D = 1, then zeros up to K; rows
// >= len zero.
template <typename T, int D, int C, int K>
__device__ void valueRows(T* dst, int ld, const BackwardArgs& a, int b, int h, int64_t t0, int len) {
  loadTile<T, C, D>(dst, ld, a.v, b, h, t0, len, 0);
  onesColumn<T, D, C, K>(dst, ld, len);
}

// SumOnly: the segment's state sum (phi(q)^T gy/den over its chunks) into its slot; else the scan
// proper, from the slot's starting state (the later segments' sum) when there are segments.
template <typename T, int D, bool SumOnly>
__global__ void __launch_bounds__(kThreads, 1) dvKernel(BackwardArgs a, ScanSegments g) {
  using Cfg = DvCfg<T, D>;
  using Scan = typename Cfg::Scan;
  constexpr int C = Cfg::C, N = Cfg::N;
  HH_DYNAMIC_SHARED(smem);
  Scan s(smem);
  const int b = blockIdx.x / a.p.heads, h = blockIdx.x % a.p.heads, n0 = blockIdx.y * N;
  const float* W = a.weight + size_t(h) * D * D;
  const float* bias = a.bias + size_t(h) * D;
  const float* den = denRow(a, b, h);
  const SegmentRange r = segmentRange(g, (a.p.length + C - 1) / C, n0);
  if (!SumOnly && g.count > 1) s.loadState(r.state, D);
  for (int64_t c = r.c1 - 1; c >= r.c0; --c) {
    const int64_t t0 = c * C;
    const int len = chunkLen(t0, a.p.length, C);
    if (!SumOnly) Cfg::Feat::run(s.scratch, s.stage, a.k, b, h, t0, len, W, bias, 0, D, s.L, Scan::LDK, 0, D, nullptr);
    Cfg::Feat::run(s.scratch, s.stage, a.q, b, h, t0, len, W, bias, 0, D, s.Lk, Scan::LDK, 0, D, nullptr);
    loadTile<T, C, N>(s.V, Scan::LDN, a.gy, b, h, t0, len, n0);  // Vals = gy / den
    __syncthreads();
    for (int idx = threadIdx.x; idx < len * N; idx += kThreads) {
      const int row = idx / N, n = idx % N;
      s.V[row * Scan::LDN + n] = fromF<T>(toF(s.V[row * Scan::LDN + n]) / den[t0 + row]);
    }
    if (SumOnly) {
      __syncthreads();
      s.accumulate();
      __syncthreads();
      continue;
    }
    s.step();
    const float* out = s.out32();
    for (int idx = threadIdx.x; idx < len * N; idx += kThreads) {
      const int row = idx / N, n = idx % N;
      rowPtr<T>(a.gv, b, h, t0 + row)[n0 + n] = fromF<T>(out[row * Scan::LDP + n]);
    }
    __syncthreads();
  }
  if (SumOnly) s.storeState(r.state, D);
}

// gu[i][u0 + n] = gphi[i][n] e - gphi[i][DB + n] / e where |u| < 30, else 0 (eq holds +-e).
template <class Scan>
__device__ void gradFeatureEpilogue(const Scan& s, float* gu, int64_t t0, int len, int d, int u0) {
  const float* out = s.out32();
  for (int idx = threadIdx.x; idx < len * kBlockU; idx += kThreads) {
    const int i = idx / kBlockU, n = idx % kBlockU;
    const float es = s.eq[i * kBlockU + n], e = fabsf(es);
    const float g = throughClamp(es, out[i * Scan::LDP + n] * e - out[i * Scan::LDP + kBlockU + n] / e);
    gu[(t0 + i) * d + u0 + n] = g;
  }
  __syncthreads();
}

// IsQ: L = [gnum|gden], Lk = [v|1], Vals = phi(k) block, eq = e(q) block; causal, time order.
// else: L = [v|1], Lk = [gnum|gden], Vals = phi(q) block, eq = e(k) block; anti-causal, reverse.
// SumOnly: the segment's state sum (Lk^T Vals) into its slot, as dvKernel's.
template <typename T, int D, bool IsQ, bool SumOnly>
__global__ void __launch_bounds__(kThreads, 1) dqkKernel(BackwardArgs a, float* guOut, ScanSegments g) {
  using Cfg = DqkCfg<T, D, IsQ>;
  using Scan = typename Cfg::Scan;
  constexpr int C = Cfg::C, K = Cfg::K;
  HH_DYNAMIC_SHARED(smem);
  Scan s(smem);
  const int b = blockIdx.x / a.p.heads, h = blockIdx.x % a.p.heads, u0 = blockIdx.y * kBlockU;
  const float* W = a.weight + size_t(h) * D * D;
  const float* bias = a.bias + size_t(h) * D;
  float* gu = guOut + size_t(blockIdx.x) * a.p.length * D;
  const SegmentRange r = segmentRange(g, (a.p.length + C - 1) / C, blockIdx.y * Cfg::N);
  if (!SumOnly && g.count > 1) s.loadState(r.state, 2 * D);
  for (int64_t i = 0; i < r.c1 - r.c0; ++i) {
    const int64_t t0 = (IsQ ? r.c0 + i : r.c1 - 1 - i) * C;
    const int len = chunkLen(t0, a.p.length, C);
    const Rows& featSide = IsQ ? a.k : a.q;  // its phi block are the Vals
    const Rows& gradSide = IsQ ? a.q : a.k;  // its e block converts gphi into gu
    Cfg::Feat::run(s.scratch, s.stage, featSide, b, h, t0, len, W, bias, u0, kBlockU, s.V, Scan::LDN, 0, kBlockU,
                   nullptr);
    if (!SumOnly)
      Cfg::Feat::run(s.scratch, s.stage, gradSide, b, h, t0, len, W, bias, u0, kBlockU, nullptr, 0, 0, 0, s.eq);
    if (!SumOnly || !IsQ) gradRows<T, D, C, K>(IsQ ? s.L : s.Lk, Scan::LDK, s.scratch, a, b, h, t0, len);
    if (!SumOnly || IsQ) valueRows<T, D, C, K>(IsQ ? s.Lk : s.L, Scan::LDK, a, b, h, t0, len);
    if (SumOnly) {
      __syncthreads();
      s.accumulate();
      __syncthreads();
      continue;
    }
    s.step();
    gradFeatureEpilogue(s, gu, t0, len, D, u0);
  }
  if (SumOnly) s.storeState(r.state, 2 * D);
}

// Each segment's sum becomes the sum of the segments before it (causal scans) or after it
// (reverse scans), in place: its starting state. Grid (B*H, ceil(slot / 256)), one float of the
// slot per thread.
__global__ void segmentScanKernel(float* states, int segments, int64_t slotFloats, bool reverse) {
  const int64_t e = int64_t(blockIdx.y) * blockDim.x + threadIdx.x;
  if (e >= slotFloats) return;
  float* base = states + size_t(blockIdx.x) * segments * slotFloats + e;
  float running = 0.0f;
  for (int i = 0; i < segments; ++i) {
    float* slot = base + size_t(reverse ? segments - 1 - i : i) * slotFloats;
    const float sum = *slot;
    *slot = running;
    running += sum;
  }
}

cudaError_t launchSegmentScan(float* states, int heads, int segments, int64_t slotFloats, bool reverse,
                              cudaStream_t stream) {
  HH_LAUNCH(segmentScanKernel, dim3(unsigned(heads), unsigned((slotFloats + 255) / 256)), 256, 0, stream, states,
            segments, slotFloats, reverse);
  return cudaGetLastError();
}

template <class Kernel>
cudaError_t prepare(Kernel kernel, size_t bytes) {
  return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes));
}

template <typename T, int D, bool SumOnly>
cudaError_t launchScanPass(const BackwardArgs& a, float* guQ, float* guK, const BackwardSegments& seg) {
  const unsigned bh = unsigned(a.p.batch) * unsigned(a.p.heads), z = unsigned(seg.dv.count);
  const size_t dvBytes = DvCfg<T, D>::Scan::kBytes;
  const size_t dqBytes = DqkCfg<T, D, true>::Scan::kBytes, dkBytes = DqkCfg<T, D, false>::Scan::kBytes;
  const auto dv = dvKernel<T, D, SumOnly>;
  const auto dq = dqkKernel<T, D, true, SumOnly>;
  const auto dk = dqkKernel<T, D, false, SumOnly>;
  cudaError_t e;
  if ((e = prepare(dv, dvBytes)) != cudaSuccess) return e;
  HH_LAUNCH(dv, dim3(bh, D / DvCfg<T, D>::N, z), kThreads, dvBytes, a.p.stream, a, seg.dv);
  if ((e = prepare(dq, dqBytes)) != cudaSuccess) return e;
  HH_LAUNCH(dq, dim3(bh, D / kBlockU, z), kThreads, dqBytes, a.p.stream, a, guQ, seg.dq);
  if ((e = prepare(dk, dkBytes)) != cudaSuccess) return e;
  HH_LAUNCH(dk, dim3(bh, D / kBlockU, z), kThreads, dkBytes, a.p.stream, a, guK, seg.dk);
  return cudaGetLastError();
}

// Whether the pipelined scans were asked for and fit the current device's shared memory.
bool takePipelinedScans(const BackwardArgs& a) {
  return a.pipelined && fitsDeviceSharedMemory(pipelinedScanSmemBytes(a.p.dtype, a.p.headDim));
}

template <typename T, int D>
cudaError_t launchScans(const BackwardArgs& a, float* guQ, float* guK, const BackwardSegments& seg) {
  const bool pipelined = takePipelinedScans(a);
  const auto pass = [&](bool sumOnly) {
    if (pipelined) return launchPipelinedScanPass(a, guQ, guK, seg, sumOnly);
    return sumOnly ? launchScanPass<T, D, true>(a, guQ, guK, seg) : launchScanPass<T, D, false>(a, guQ, guK, seg);
  };
  if (seg.dv.count > 1) {
    const cudaError_t e = pass(true);
    if (e != cudaSuccess) return e;
    const int bh = a.p.batch * a.p.heads;
    const ScanSegments* scans[] = {&seg.dv, &seg.dq, &seg.dk};
    const bool reverse[] = {true, false, true};  // dv and dk walk their chunks from the end
    for (int i = 0; i < 3; ++i) {
      const cudaError_t e =
          launchSegmentScan(scans[i]->states, bh, scans[i]->count, scans[i]->slotFloats, reverse[i], a.p.stream);
      if (e != cudaSuccess) return e;
    }
  }
  return pass(false);
}

cudaError_t launchBackwardScans(const BackwardArgs& a, float* guQ, float* guK, const BackwardSegments& seg) {
  return withKernelShape(a.p.dtype, a.p.headDim, [&](auto t, auto d) {
    return launchScans<typename decltype(t)::type, decltype(d)::value>(a, guQ, guK, seg);
  });
}

template <typename T, int D>
size_t scanBytes() {
  return std::max({DvCfg<T, D>::Scan::kBytes, DqkCfg<T, D, true>::Scan::kBytes, DqkCfg<T, D, false>::Scan::kBytes});
}

size_t backwardSmemBytes(DType dtype, int headDim) {
  return withKernelShape(dtype, headDim,
                         [](auto t, auto d) { return scanBytes<typename decltype(t)::type, decltype(d)::value>(); });
}

}  // namespace hh::cuda::detail
