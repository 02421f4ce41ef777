// Chunk-parallel backward scans (BackwardArgs::chunked, hedgehog_cuda.h): gv and the map-output
// gradients gu of q and k, which hh_backward_params*.cu turn into gq, gk, gW, gb.
//
// With L = phi(q), K = phi(k) [T, F], V' = [v | 1] and G' = [gy/den | gden] [T, D + 16] (zeros
// past column D), A_ij = G'_i . V'_j and P_ij = L_i . K_j for j <= i:
//   gphi(q)_i = sum_{j<=i} A_ij K_j    gphi(k)_j = sum_{i>=j} A_ij L_i    gv_j = sum_{i>=j} P_ij g_i
// Split at chunk c into what came before / comes after it and what lies inside it:
//   gphi(q) = G' S'_c^T + mask(A) K      S'_c = sum over earlier chunks of K^T V'   [F, D + 16]
//   gphi(k) = V' R'_c^T + mask(A)^T L    R'_c = sum over later chunks of L^T G'     [F, D + 16]
//   gv      = K R_c + mask(P)^T g        (R_c: R'_c's first D columns)
// Two state passes walk each head's chunks (forward for S', from the end for R'), 64 features at
// a time as the chunked forward's state pass does (hh_forward_chunked.cu), and write the state
// before each chunk to a per-chunk record; one chunk pass then does every chunk at once (grid
// B*H*chunks): A once, then per block of 64 features the map of q and k, gphi(q) and gphi(k) for
// those features (turned into gu as the other scans do) and their share of gv and P; last the
// masked P^T g. Records are kept in the input dtype: 2 B*H*chunks*2D*(D + 16) elements.
// Shared memory (bf16 D = 128): state passes 141 KB, chunk pass 197 KB; where the chunk pass does
// not fit the device, the pipelined scans run instead (chunkedBackwardFitsDevice). Not yet run on a
// GPU: checked under the CUDA emulation (tests/engine/cuda) and compiled for sm_80 and sm_90.
#include "engine/cuda/hh_backward.cuh"
#include "engine/cuda/hh_cuda_kernels.h"
#include "engine/cuda/hh_cuda_pipeline.cuh"
#include "engine/cuda/hh_cuda_scan.cuh"
#include "engine/cuda/hh_forward.cuh"

namespace hh::cuda::detail {

template <typename T, int D>
struct BackwardTiles {
  static constexpr int C = ForwardTiles<T, D>::C, F = 2 * D, FB = 2 * kBlockU, BLOCKS = D / kBlockU;
  static constexpr int KV = D + 16, PAD = padOf<T>(), LDX = D + PAD, LDKV = KV + PAD, LDF = FB + PAD, LDC = C + PAD;
  static constexpr int TC = C / 16;
  static constexpr size_t kRaw = alignUp(size_t(C) * LDX * sizeof(T));
  static constexpr size_t kOperand = alignUp(size_t(C) * LDKV * sizeof(T));
  static constexpr size_t kFeatures = alignUp(size_t(C) * LDF * sizeof(T));
};

// The state passes' shared memory: two buffers each of the raw rows (the next chunk's arrive while
// this one is computed): x (k or q), then v, or gy and y with den; the block's features; the
// operand V' or G'; the warps' stages.
template <typename T, int D>
struct StatePassSmem : BackwardTiles<T, D> {
  using P = BackwardTiles<T, D>;
  static constexpr size_t oRaw = 0;  // [3 kinds][2 buffers][C][LDX]
  static constexpr size_t oDen = oRaw + 6 * P::kRaw, oLf = oDen + 2 * alignUp(size_t(P::C) * sizeof(float));
  static constexpr size_t oVals = oLf + P::kFeatures, oStage = oVals + P::kOperand;
  static constexpr size_t kBytes = oStage + alignUp(kStageBytes);
  unsigned char* m;
  __device__ explicit StatePassSmem(unsigned char* smem) : m(smem) {}
  __device__ T* raw(int kind, int64_t i) const {
    return reinterpret_cast<T*>(m + oRaw + (2 * kind + (i & 1)) * P::kRaw);
  }
  __device__ float* den(int64_t i) const {
    return reinterpret_cast<float*>(m + oDen + (i & 1) * alignUp(size_t(P::C) * sizeof(float)));
  }
  __device__ T* lf() const { return reinterpret_cast<T*>(m + oLf); }
  __device__ T* vals() const { return reinterpret_cast<T*>(m + oVals); }
  __device__ float* stage() const { return reinterpret_cast<float*>(m + oStage) + (threadIdx.x >> 5) * 16 * kStageLd; }
};

// Forward (Reverse = false): S' over phi(k) and [v | 1], chunks in time order. Reverse: R' over
// phi(q) and [gy/den | gden], chunks from the end. Record = false: each segment's sum into its
// slot; true: the walk from the segment's start (its slot, after the scan over segments), writing
// each chunk's record. Grid (B*H * D/32, 1, segments).
template <typename T, int D, bool Reverse, bool Record>
__global__ void __launch_bounds__(kThreads, 1) backwardStateKernel(BackwardArgs a, ChunkedBackwardSpace w) {
  using P = BackwardTiles<T, D>;
  HH_DYNAMIC_SHARED(smem);
  const StatePassSmem<T, D> s{smem};
  const int bh = blockIdx.x / P::BLOCKS, fb = blockIdx.x % P::BLOCKS, b = bh / a.p.heads, h = bh % a.p.heads;
  const int64_t chunks = (a.p.length + P::C - 1) / P::C, each = (chunks + a.segments - 1) / a.segments;
  const int64_t c0 = blockIdx.z * each, c1 = c0 + each < chunks ? c0 + each : chunks, count = c1 > c0 ? c1 - c0 : 0;
  float* slot = (Reverse ? w.reverseSlots : w.forwardSlots) +
                ((size_t(bh) * a.segments + blockIdx.z) * P::F + size_t(fb) * P::FB) * P::KV;
  T* records = static_cast<T*>(Reverse ? w.reverseRecords : w.forwardRecords);
  const T* W = static_cast<const T*>(sizeof(T) == 2 ? w.weight : static_cast<const void*>(a.weight)) +
               (size_t(h) * D + fb * kBlockU) * D;
  const float* bias = a.bias + size_t(h) * D + fb * kBlockU;
  StateTiles<T, P::FB, P::KV> state;
  if (Record && a.segments > 1) state.load(slot, P::KV);
  const auto chunkAt = [&](int64_t i) { return Reverse ? c1 - 1 - i : c0 + i; };
  const auto fetch = [&](int64_t i) {
    const int64_t t0 = chunkAt(i) * P::C;
    const int len = chunkLen(t0, a.p.length, P::C);
    loadTileAsync<T, P::C, D>(s.raw(0, i), P::LDX, Reverse ? a.q : a.k, b, h, t0, len, 0);
    loadTileAsync<T, P::C, D>(s.raw(1, i), P::LDX, Reverse ? a.gy : a.v, b, h, t0, len, 0);
    if (Reverse) {
      loadTileAsync<T, P::C, D>(s.raw(2, i), P::LDX, a.y, b, h, t0, len, 0);
      fetchDen<P::C>(s.den(i), denRow(a, b, h), t0, len);
    }
  };
  if (count > 0) fetch(0);
  for (int64_t i = 0; i < count; ++i) {
    const int64_t c = chunkAt(i);
    const int len = chunkLen(c * P::C, a.p.length, P::C);
    asyncWait();
    __syncthreads();  // chunk i's rows are in; chunk i - 1 is done with the features and the operand
    if (i + 1 < count) fetch(i + 1);
    const MapJob<T> x{s.raw(0, i), P::LDX, s.lf(), P::LDF, nullptr};
    mapTiles<T, D, P::C>(x, x, 1, W, D, bias, kBlockU, len, s.stage());
    if (Reverse)
      gradOperand<T, D, P::C, P::KV>(s.vals(), P::LDKV, s.raw(1, i), s.raw(2, i), P::LDX, s.den(i), len);
    else
      valueOperand<T, D, P::C, P::KV>(s.vals(), P::LDKV, s.raw(1, i), P::LDX, len);
    if (Record)
      state.toOperand(records + ((size_t(bh) * chunks + c) * P::F + size_t(fb) * P::FB) * P::KV, P::KV, s.stage());
    __syncthreads();  // features and operand made
    state.accumulate(s.lf(), P::LDF, s.vals(), P::LDKV, P::C);
  }
  if (!Record) state.store(slot, P::KV);
}

// The chunk pass's shared memory: raw q, k, gy, y (the masked P^T later reuses gy's and y's), G', V', the
// masked A, one feature block of phi(q), phi(k) and their d phi / d u, that block's S' and R'
// records, the warps' stages, den.
template <typename T, int D>
struct ChunkPassSmem : BackwardTiles<T, D> {
  using P = BackwardTiles<T, D>;
  static constexpr size_t kA = alignUp(size_t(P::C) * P::LDC * sizeof(T));
  static constexpr size_t kE = alignUp(size_t(P::C) * kBlockU * sizeof(float));
  static constexpr size_t kRec = alignUp(size_t(P::FB) * P::LDKV * sizeof(T));
  static constexpr size_t oXq = 0, oXk = P::kRaw, oXgy = 2 * P::kRaw, oXy = 3 * P::kRaw, oG = 4 * P::kRaw;
  static constexpr size_t oV = oG + P::kOperand, oA = oV + P::kOperand, oLq = oA + kA, oLk = oLq + P::kFeatures;
  static constexpr size_t oEq = oLk + P::kFeatures, oEk = oEq + kE, oS = oEk + kE, oR = oS + kRec;
  static constexpr size_t oStage = oR + kRec, oDen = oStage + alignUp(kStageBytes);
  static constexpr size_t kBytes = oDen + alignUp(size_t(P::C) * sizeof(float));
  static_assert(kA <= 2 * P::kRaw, "P^T takes the raw rows of gy and y");
  unsigned char* m;
  __device__ explicit ChunkPassSmem(unsigned char* smem) : m(smem) {}
  template <typename X>
  __device__ X* at(size_t offset) const {
    return reinterpret_cast<X*>(m + offset);
  }
  __device__ float* stage() const { return at<float>(oStage) + (threadIdx.x >> 5) * 16 * kStageLd; }
};

// S' and R' rows of feature block fb of the chunk's records (rows of KV elements, 16-byte aligned
// in the workspace) into [FB][LDKV], by cp.async.
template <typename T, int D>
__device__ void fetchRecords(const ChunkPassSmem<T, D>& s, const ChunkedBackwardSpace& w, size_t at, int fb) {
  using P = BackwardTiles<T, D>;
  using S = ChunkPassSmem<T, D>;
  constexpr int V = 16 / static_cast<int>(sizeof(T)), VPR = P::KV / V;
  const size_t first = (at + size_t(fb) * P::FB) * P::KV;
  const T *fwd = static_cast<const T*>(w.forwardRecords) + first,
          *rev = static_cast<const T*>(w.reverseRecords) + first;
  T *fwdOut = s.template at<T>(S::oS), *revOut = s.template at<T>(S::oR);
  for (int idx = threadIdx.x; idx < P::FB * VPR; idx += kThreads) {
    const int r = idx / VPR, c = (idx % VPR) * V;
    copyAsync16(fwdOut + r * P::LDKV + c, fwd + r * P::KV + c);
    copyAsync16(revOut + r * P::LDKV + c, rev + r * P::KV + c);
  }
}

// gphi of one side for row block ti and map outputs [tu*16, +16) of the feature block (its exp(u)
// and exp(-u) columns), turned into gu: q (IsQ) = G' S'^T + A K; k = V' R'^T + A^T L.
template <typename T, int D, bool IsQ>
__device__ void gradFeatures(const ChunkPassSmem<T, D>& s, int ti, int tu, float* gu, int64_t t0, int len, int u0) {
  using P = BackwardTiles<T, D>;
  using S = ChunkPassSmem<T, D>;
  using M = Mma<T>;
  const T *op = s.template at<T>(IsQ ? S::oG : S::oV), *rec = s.template at<T>(IsQ ? S::oS : S::oR);
  const T *A = s.template at<T>(S::oA), *other = s.template at<T>(IsQ ? S::oLk : S::oLq);
  typename M::Acc out[2];
#pragma unroll
  for (int half = 0; half < 2; ++half) {  // exp(u) columns, then exp(-u)
    const int f0 = tu * 16 + half * kBlockU;
    M::zero(out[half]);
    M::template mac<false, true>(out[half], op + ti * 16 * P::LDKV, P::LDKV, rec + f0 * P::LDKV, P::LDKV, P::KV);
    for (int tj = 0; tj < P::TC; ++tj) {
      if (IsQ && tj <= ti)
        M::template mac<false, false>(out[half], A + ti * 16 * P::LDC + tj * 16, P::LDC, other + tj * 16 * P::LDF + f0,
                                      P::LDF, 16);
      if (!IsQ && tj >= ti)  // (A^T)_{ti, tj} = A_{tj, ti} transposed
        M::template mac<true, false>(out[half], A + tj * 16 * P::LDC + ti * 16, P::LDC, other + tj * 16 * P::LDF + f0,
                                     P::LDF, 16);
    }
  }
  gradFeatureTile<T, D, P::C>(out[0], out[1], ti, tu, s.template at<float>(IsQ ? S::oEq : S::oEk), s.stage(), gu, t0,
                              len, u0);
}

// The chunk's rows into shared memory by cp.async: raw q, k, gy, y; v into V' (its ones column
// comes later); den; and feature block 0's records.
template <typename T, int D>
__device__ void fetchChunk(const ChunkPassSmem<T, D>& s, const BackwardArgs& a, const ChunkedBackwardSpace& w, int b,
                           int h, int64_t t0, int len, size_t at) {
  using P = BackwardTiles<T, D>;
  using S = ChunkPassSmem<T, D>;
  loadTileAsync<T, P::C, D>(s.template at<T>(S::oXq), P::LDX, a.q, b, h, t0, len, 0);
  loadTileAsync<T, P::C, D>(s.template at<T>(S::oXk), P::LDX, a.k, b, h, t0, len, 0);
  loadTileAsync<T, P::C, D>(s.template at<T>(S::oXgy), P::LDX, a.gy, b, h, t0, len, 0);
  loadTileAsync<T, P::C, D>(s.template at<T>(S::oXy), P::LDX, a.y, b, h, t0, len, 0);
  loadTileAsync<T, P::C, D>(s.template at<T>(S::oV), P::LDKV, a.v, b, h, t0, len, 0);
  fetchDen<P::C>(s.template at<float>(S::oDen), denRow(a, b, h), t0, len);
  fetchRecords(s, w, at, 0);
}

// One feature block's share of gv (phi(k)_b R_b) and of P (phi(q)_b phi(k)_b^T, causal tiles).
template <typename T, int D, class Gv, class Phi>
__device__ void accumulateBlock(Gv& gv, Phi& phi, const ChunkPassSmem<T, D>& s) {
  using P = BackwardTiles<T, D>;
  using S = ChunkPassSmem<T, D>;
  using M = Mma<T>;
  const T *Lq = s.template at<T>(S::oLq), *Lk = s.template at<T>(S::oLk), *R = s.template at<T>(S::oR);
#pragma unroll
  for (int i = 0; i < Gv::kPerWarp; ++i) {
    const int t = Gv::tileOf(i), tj = t / (D / 16), tn = t % (D / 16);
    if (t < Gv::kTiles)
      M::template mac<false, false>(gv.tile[i], Lk + tj * 16 * P::LDF, P::LDF, R + tn * 16, P::LDKV, P::FB);
  }
#pragma unroll
  for (int i = 0; i < Phi::kPerWarp; ++i) {
    const int t = Phi::tileOf(i), ti = t / P::TC, tj = t % P::TC;
    if (t < Phi::kTiles && tj <= ti)
      M::template mac<false, true>(phi.tile[i], Lq + ti * 16 * P::LDF, P::LDF, Lk + tj * 16 * P::LDF, P::LDF, P::FB);
  }
}

// gv's rows: gv += mask(P)^T gy/den (PT over the raw rows of gy and y, free by now), written.
template <typename T, int D, class Gv, class Phi>
__device__ void finishGv(Gv& gv, const Phi& phi, const ChunkPassSmem<T, D>& s, const BackwardArgs& a, int b, int h,
                         int64_t t0, int len) {
  using P = BackwardTiles<T, D>;
  using S = ChunkPassSmem<T, D>;
  using M = Mma<T>;
  const int lane = threadIdx.x & 31;
  T *PT = s.template at<T>(S::oXgy), *G = s.template at<T>(S::oG);
  phi.toCausalOperand(PT, P::LDC, s.stage());
  __syncthreads();  // PT made
#pragma unroll
  for (int i = 0; i < Gv::kPerWarp; ++i) {
    const int t = Gv::tileOf(i), tj = t / (D / 16), tn = t % (D / 16);
    if (t >= Gv::kTiles || tj * 16 >= len) continue;
    for (int ti = tj; ti < P::TC; ++ti)  // (P^T)_{tj, ti} = P_{ti, tj} transposed
      M::template mac<true, false>(gv.tile[i], PT + ti * 16 * P::LDC + tj * 16, P::LDC, G + ti * 16 * P::LDKV + tn * 16,
                                   P::LDKV, 16);
    M::store(s.stage(), kStageLd, gv.tile[i]);
    __syncwarp();
    for (int e = lane; e < 256; e += 32) {
      const int r = tj * 16 + (e >> 4);
      if (r < len)
        rowPtr<T>(a.gv, b, h, t0 + r)[tn * 16 + (e & 15)] = fromF<T>(s.stage()[(e >> 4) * kStageLd + (e & 15)]);
    }
    __syncwarp();
  }
}

// Grid (B*H * chunks): every chunk at once.
template <typename T, int D>
__global__ void __launch_bounds__(kThreads, 1)
    backwardChunkKernel(BackwardArgs a, ChunkedBackwardSpace w, float* guQ, float* guK) {
  using P = BackwardTiles<T, D>;
  using S = ChunkPassSmem<T, D>;
  HH_DYNAMIC_SHARED(smem);
  const S s{smem};
  const int64_t chunks = (a.p.length + P::C - 1) / P::C, c = blockIdx.x % chunks, t0 = c * P::C;
  const int bh = int(blockIdx.x / chunks), b = bh / a.p.heads, h = bh % a.p.heads;
  const int len = chunkLen(t0, a.p.length, P::C), warp = threadIdx.x >> 5;
  T *G = s.template at<T>(S::oG), *V = s.template at<T>(S::oV);
  fetchChunk(s, a, w, b, h, t0, len, (size_t(bh) * chunks + c) * P::F);
  asyncWait();
  __syncthreads();  // the chunk's rows are in
  gradOperand<T, D, P::C, P::KV>(G, P::LDKV, s.template at<T>(S::oXgy), s.template at<T>(S::oXy), P::LDX,
                                 s.template at<float>(S::oDen), len);
  onesColumn<T, D, P::C, P::KV>(V, P::LDKV, len);
  __syncthreads();  // G', V' made
  maskedScores<T, P::C, P::KV, true>(G, V, P::LDKV, s.template at<T>(S::oA), P::LDC, s.stage());
  const T* W =
      static_cast<const T*>(sizeof(T) == 2 ? w.weight : static_cast<const void*>(a.weight)) + size_t(h) * D * D;
  float *gq = guQ + size_t(bh) * a.p.length * D, *gk = guK + size_t(bh) * a.p.length * D;
  StateTiles<T, P::C, D> gv;      // K R, then + mask(P)^T g
  StateTiles<T, P::C, P::C> phi;  // P = L K^T
  for (int fb = 0; fb < P::BLOCKS; ++fb) {
    const int u0 = fb * kBlockU;
    const MapJob<T> q{s.template at<T>(S::oXq), P::LDX, s.template at<T>(S::oLq), P::LDF, s.template at<float>(S::oEq)};
    const MapJob<T> k{s.template at<T>(S::oXk), P::LDX, s.template at<T>(S::oLk), P::LDF, s.template at<float>(S::oEk)};
    mapTiles<T, D, P::C>(q, k, 2, W + size_t(u0) * D, D, a.bias + size_t(h) * D + u0, kBlockU, len, s.stage());
    asyncWait();
    __syncthreads();                                            // this block's features and records are in; A made
    for (int job = warp; job < 2 * P::TC * 2; job += kWarps) {  // (side, row block, 16 map outputs)
      const int pair = job % (P::TC * 2), ti = pair / 2, tu = pair % 2;
      if (ti * 16 >= len) continue;
      if (job < P::TC * 2)
        gradFeatures<T, D, true>(s, ti, tu, gq, t0, len, u0);
      else
        gradFeatures<T, D, false>(s, ti, tu, gk, t0, len, u0);
    }
    accumulateBlock(gv, phi, s);
    __syncthreads();  // done with this block's features and records
    if (fb + 1 < P::BLOCKS) fetchRecords(s, w, (size_t(bh) * chunks + c) * P::F, fb + 1);
  }
  finishGv(gv, phi, s, a, b, h, t0, len);
}

template <typename T, int D, bool Reverse>
cudaError_t launchStatePasses(const BackwardArgs& a, const ChunkedBackwardSpace& w) {
  using P = BackwardTiles<T, D>;
  const auto sum = backwardStateKernel<T, D, Reverse, false>;
  const auto record = backwardStateKernel<T, D, Reverse, true>;
  const size_t bytes = StatePassSmem<T, D>::kBytes;
  cudaError_t e = cudaFuncSetAttribute(sum, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes));
  if (e == cudaSuccess) e = cudaFuncSetAttribute(record, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes));
  if (e != cudaSuccess) return e;
  const unsigned bh = unsigned(a.p.batch) * unsigned(a.p.heads), segments = unsigned(a.segments);
  if (segments > 1) {
    HH_LAUNCH(sum, dim3(bh * P::BLOCKS, 1, segments), kThreads, bytes, a.p.stream, a, w);
    e = launchSegmentScan(Reverse ? w.reverseSlots : w.forwardSlots, int(bh), a.segments, int64_t(P::F) * P::KV,
                          Reverse, a.p.stream);
    if (e != cudaSuccess) return e;
  }
  HH_LAUNCH(record, dim3(bh * P::BLOCKS, 1, segments), kThreads, bytes, a.p.stream, a, w);
  return cudaGetLastError();
}

template <typename T, int D>
cudaError_t launchChunked(const BackwardArgs& a, float* guQ, float* guK, const ChunkedBackwardSpace& w) {
  if constexpr (sizeof(T) == 2) {
    const cudaError_t e = launchWeightToBf16(a.weight, w.weight, int64_t(a.p.heads) * D * D, a.p.stream);
    if (e != cudaSuccess) return e;
  }
  cudaError_t e = launchStatePasses<T, D, false>(a, w);
  if (e == cudaSuccess) e = launchStatePasses<T, D, true>(a, w);
  if (e != cudaSuccess) return e;
  const auto chunk = backwardChunkKernel<T, D>;
  const size_t bytes = ChunkPassSmem<T, D>::kBytes;
  e = cudaFuncSetAttribute(chunk, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes));
  if (e != cudaSuccess) return e;
  const int64_t chunks = (a.p.length + BackwardTiles<T, D>::C - 1) / BackwardTiles<T, D>::C;
  HH_LAUNCH(chunk, dim3(unsigned(int64_t(a.p.batch) * a.p.heads * chunks)), kThreads, bytes, a.p.stream, a, w, guQ,
            guK);
  return cudaGetLastError();
}

size_t chunkedBackwardSmemBytes(DType dtype, int headDim) {
  return largerSharedMemory<StatePassSmem, ChunkPassSmem>(dtype, headDim);
}

bool chunkedBackwardFitsDevice(const BackwardArgs& a) {
  return fitsDeviceSharedMemory(chunkedBackwardSmemBytes(a.p.dtype, a.p.headDim));
}

cudaError_t launchChunkedBackward(const BackwardArgs& a, float* guQ, float* guK, const ChunkedBackwardSpace& w) {
  return withKernelShape(a.p.dtype, a.p.headDim, [&](auto t, auto d) {
    return launchChunked<typename decltype(t)::type, decltype(d)::value>(a, guQ, guK, w);
  });
}

}  // namespace hh::cuda::detail
