// Chunk-parallel forward of causal Hedgehog linear attention (ForwardArgs::chunked, hedgehog_cuda.h).
//
// The sequential and pipelined forwards (hh_forward.cu, hh_forward_pipelined.cu) walk a head's
// chunks in one thread block, each chunk a chain of dependent tile products with barriers between
// them, one block per multiprocessor (their shared memory: 98-209 KB): the first GPU run measured
// that chain as the limit. Here the walk carries only what must be sequential, and everything else
// runs with every chunk at once:
//   1. state pass, grid (B*H * D/32 feature blocks, 1, segments): per chunk, the block's 64
//      features of phi(k) (map outputs u0 .. u0+31, each giving exp(u) and exp(-u)) and the state
//      rows they own, S[64, D] += phi(k)^T v, z[64] += colsum phi(k); before each update the state
//      as it stands is written out (S rounded to the input dtype, z fp32): the chunk's record.
//   2. output pass, grid (B*H * chunks, D/N): per chunk and N value columns, over the feature
//      blocks, scores += phi_b(q) phi_b(k)^T, num += phi_b(q) S_b, den += phi_b(q) . z_b (S_b, z_b
//      the chunk's record); then y = (mask(scores) v + num) / (rowsum(mask(scores)) + den + eps).
// Both passes keep their shared memory near 100 KB (two blocks per multiprocessor) and the state
// pass's per-chunk work is one map product and one state product. Where B*H*D/32 blocks would
// leave the GPU idle, the state pass splits each sequence into segments as the other forwards do
// (a sum pass, a prefix over segments, then the state pass from each segment's start).
// The same result as the other forwards up to rounding (the records are what they round S to).
// Workspace: the segment sums, a bf16 copy of W (bf16 only), and the records, B*H*chunks*(2D*D
// elements + 2D floats): linear in T, 4x the size of q at bf16 D=64 (hedgehogCudaForwardWorkspace).
// Not yet run on a GPU: checked under the CUDA emulation (tests/engine/cuda) and compiled for sm_80
// and sm_90.
#include "engine/cuda/hh_cuda_kernels.h"
#include "engine/cuda/hh_cuda_pipeline.cuh"
#include "engine/cuda/hh_cuda_scan.cuh"
#include "engine/cuda/hh_forward.cuh"

namespace hh::cuda::detail {

constexpr int kMapBlock = 32;                 // map outputs per feature block
constexpr int kFeatureBlock = 2 * kMapBlock;  // features per block: [exp(u), exp(-u)]

__host__ __device__ inline size_t align256(size_t x) {
  return (x + 255) & ~size_t(255);
}

// Where the chunked forward's workspace keeps what: the segment sums (as segmentsOf says, at the
// start), the map as the kernels read it, and the per-chunk records.
struct ChunkRecords {
  const void* W;  // bf16 [H][D][D] copy (bf16 inputs) or the fp32 weight itself
  void* S;        // [B*H][chunks][2D][D] input dtype: S before each chunk, feature-block order
  float* z;       // [B*H][chunks][2D] fp32
  int64_t chunks;
};

// Byte sizes of the workspace's parts, in order; the host and the kernels agree through this.
struct ChunkedSizes {
  size_t segments, weight, records, zs;
};
__host__ __device__ inline ChunkedSizes chunkedSizes(const Problem& p, int segments, int chunk) {
  const size_t bh = size_t(p.batch) * p.heads, d = p.headDim, f = 2 * d;
  const size_t chunks = size_t((p.length + chunk - 1) / chunk), elem = p.dtype == DType::BF16 ? 2 : 4;
  return {segments > 1 ? align256(bh * segments * (f * d + f) * sizeof(float)) : 0,
          p.dtype == DType::BF16 ? align256(size_t(p.heads) * d * d * 2) : 0, align256(bh * chunks * f * d * elem),
          align256(bh * chunks * f * sizeof(float))};
}

__host__ __device__ inline ChunkRecords recordsOf(const ForwardArgs& a, int chunk) {
  const ChunkedSizes z = chunkedSizes(a.p, a.segments, chunk);
  unsigned char* base = static_cast<unsigned char*>(a.workspace) + z.segments;
  const void* W = a.p.dtype == DType::BF16 ? static_cast<const void*>(base) : static_cast<const void*>(a.weight);
  return {W, base + z.weight, reinterpret_cast<float*>(base + z.weight + z.records), (a.p.length + chunk - 1) / chunk};
}

template <typename T, int D>
struct ChunkedTiles : ForwardTiles<T, D> {
  using ForwardTiles<T, D>::C;
  using ForwardTiles<T, D>::N;
  static constexpr int F = 2 * D, FB = kFeatureBlock, BLOCKS = D / kMapBlock, PAD = padOf<T>();
  static constexpr int LDX = D + PAD, LDF = FB + PAD, LDN = N + PAD, LDC = C + PAD;
  static constexpr int TC = C / 16, TN = N / 16;
};

// The state pass's shared memory: raw k and v (two buffers each: the next chunk's arrive while
// this one is computed), the block's features of k, the warps' stages, z of the block's features.
template <typename T, int D>
struct StateSmem : ChunkedTiles<T, D> {
  using P = ChunkedTiles<T, D>;
  static constexpr size_t kXk = alignUp(size_t(P::C) * P::LDX * sizeof(T));
  static constexpr size_t oXk = 0, oV = 2 * kXk, oLk = oV + 2 * kXk;
  static constexpr size_t oStage = oLk + alignUp(size_t(P::C) * P::LDF * sizeof(T));
  static constexpr size_t oZ = oStage + alignUp(kStageBytes);
  static constexpr size_t kBytes = oZ + alignUp(size_t(P::FB) * sizeof(float));
  T *Xk, *V, *Lk;
  float *stage, *z;
  __device__ explicit StateSmem(unsigned char* m)
      : Xk(reinterpret_cast<T*>(m + oXk)),
        V(reinterpret_cast<T*>(m + oV)),
        Lk(reinterpret_cast<T*>(m + oLk)),
        stage(reinterpret_cast<float*>(m + oStage) + (threadIdx.x >> 5) * 16 * kStageLd),
        z(reinterpret_cast<float*>(m + oZ)) {}
  __device__ T* xk(int64_t i) const { return Xk + (i & 1) * (kXk / sizeof(T)); }
  __device__ T* v(int64_t i) const { return V + (i & 1) * (kXk / sizeof(T)); }  // [C][LDX]: all D columns
};

// bf16 copy of the fp32 map, once per call: the passes read W's tiles from it (through L2).
__global__ void weightToBf16Kernel(const float* W, bf16* out, int64_t count) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < count) out[i] = fromF<bf16>(W[i]);
}

// Pass 1 (Record = false: segment sums, grid z = segments - 1) and pass 3 (Record = true).
template <typename T, int D, bool Record>
__global__ void __launch_bounds__(kThreads, 2) chunkStateKernel(ForwardArgs a) {
  using P = ChunkedTiles<T, D>;
  HH_DYNAMIC_SHARED(smem);
  const StateSmem<T, D> s(smem);
  const int bh = blockIdx.x / P::BLOCKS, fb = blockIdx.x % P::BLOCKS, seg = blockIdx.z;
  const int b = bh / a.p.heads, h = bh % a.p.heads, u0 = fb * kMapBlock;
  const Segments g = segmentsOf(a, P::C);
  const ChunkRecords r = recordsOf(a, P::C);
  const int64_t c0 = seg * g.chunksEach, c1 = c0 + g.chunksEach < r.chunks ? c0 + g.chunksEach : r.chunks;
  const size_t slot = size_t(bh) * g.count + seg, rowsOff = size_t(fb) * P::FB;
  const T* W = static_cast<const T*>(r.W) + (size_t(h) * D + u0) * D;
  const float* bias = a.bias + size_t(h) * D + u0;
  StateTiles<T, P::FB, D> state;  // rows [fb * 64, fb * 64 + 64) of S
  const bool carried = Record && seg > 0;
  if (carried) state.load(g.S + slot * P::F * D + rowsOff * D, D);
  for (int f = threadIdx.x; f < P::FB; f += kThreads) s.z[f] = carried ? g.z[slot * P::F + rowsOff + f] : 0.0f;
  const auto fetch = [&](int64_t c) {
    const int len = chunkLength(c * P::C, a.p.length, P::C);
    loadTileAsync<T, P::C, D>(s.xk(c - c0), P::LDX, a.k, b, h, c * P::C, len, 0);
    loadTileAsync<T, P::C, D>(s.v(c - c0), P::LDX, a.v, b, h, c * P::C, len, 0);
  };
  if (c0 < c1) fetch(c0);
  for (int64_t c = c0; c < c1; ++c) {
    asyncWait();
    __syncthreads();  // chunk c is in; chunk c - 1 is done with Lk and its buffers
    if (c + 1 < c1) fetch(c + 1);
    const MapJob<T> k{s.xk(c - c0), P::LDX, s.Lk, P::LDF, nullptr};
    mapTiles<T, D, P::C>(k, k, 1, W, D, bias, kMapBlock, chunkLength(c * P::C, a.p.length, P::C), s.stage);
    if (Record) {
      const size_t at = (size_t(bh) * r.chunks + c) * P::F + rowsOff;
      state.toOperand(static_cast<T*>(r.S) + at * D, D, s.stage);
      for (int f = threadIdx.x; f < P::FB; f += kThreads) r.z[at + f] = s.z[f];
    }
    __syncthreads();  // Lk made; z recorded
    state.accumulate(s.Lk, P::LDF, s.v(c - c0), P::LDX, P::C);
    addColumnSums<T, P::C, P::FB>(s.z, s.Lk, P::LDF);
  }
  if (!Record) {  // the state is in registers and each z[f] was last written by this thread
    state.store(g.S + slot * P::F * D + rowsOff * D, D);
    for (int f = threadIdx.x; f < P::FB; f += kThreads) g.z[slot * P::F + rowsOff + f] = s.z[f];
  }
}

// The output pass's shared memory: raw q and k, v's N columns, one feature block of phi(q) and
// phi(k), the chunk's record of that block (two buffers: the next block's arrives meanwhile), the
// masked scores, the warps' stages and the denominators.
template <typename T, int D>
struct OutputSmem : ChunkedTiles<T, D> {
  using P = ChunkedTiles<T, D>;
  static constexpr size_t kX = alignUp(size_t(P::C) * P::LDX * sizeof(T));
  static constexpr size_t kF = alignUp(size_t(P::C) * P::LDF * sizeof(T));
  static constexpr size_t kS = alignUp(size_t(P::FB) * P::LDN * sizeof(T));
  static constexpr size_t kZ = alignUp(size_t(P::FB) * sizeof(float));
  static constexpr size_t oXq = 0, oXk = kX, oV = 2 * kX, oLq = oV + alignUp(size_t(P::C) * P::LDN * sizeof(T));
  static constexpr size_t oLk = oLq + kF, oS = oLk + kF, oZ = oS + 2 * kS, oPT = oZ + 2 * kZ;
  static constexpr size_t oStage = oPT + alignUp(size_t(P::C) * P::LDC * sizeof(T));
  static constexpr size_t oDen = oStage + alignUp(kStageBytes);
  static constexpr size_t kBytes = oDen + alignUp(size_t(P::C) * sizeof(float));
  T *Xq, *Xk, *V, *Lq, *Lk, *S, *PT;
  float *z, *stage, *den;
  __device__ explicit OutputSmem(unsigned char* m)
      : Xq(reinterpret_cast<T*>(m + oXq)),
        Xk(reinterpret_cast<T*>(m + oXk)),
        V(reinterpret_cast<T*>(m + oV)),
        Lq(reinterpret_cast<T*>(m + oLq)),
        Lk(reinterpret_cast<T*>(m + oLk)),
        S(reinterpret_cast<T*>(m + oS)),
        PT(reinterpret_cast<T*>(m + oPT)),
        z(reinterpret_cast<float*>(m + oZ)),
        stage(reinterpret_cast<float*>(m + oStage) + (threadIdx.x >> 5) * 16 * kStageLd),
        den(reinterpret_cast<float*>(m + oDen)) {}
  __device__ T* s(int fb) const { return S + (fb & 1) * (kS / sizeof(T)); }
  __device__ float* zb(int fb) const { return z + (fb & 1) * (kZ / sizeof(float)); }
};

// Issues the fetch of feature block fb of the chunk's record: S rows [fb*64, +64) x the block's
// N value columns, and z's 64 entries.
template <typename T, int D>
__device__ void fetchRecord(const OutputSmem<T, D>& s, const ChunkRecords& r, size_t at, int fb, int n0) {
  using P = ChunkedTiles<T, D>;
  Rows rec;  // the chunk's record as rows of D elements
  rec.data = static_cast<T*>(r.S) + at * D;
  rec.st = D;
  loadTileAsync<T, P::FB, P::N>(s.s(fb), P::LDN, rec, 0, 0, int64_t(fb) * P::FB, P::FB, n0);
  const float* z = r.z + at + size_t(fb) * P::FB;
  for (int i = threadIdx.x; i < P::FB / 4; i += kThreads) copyAsync16(s.zb(fb) + 4 * i, z + 4 * i);
}

// One feature block's share of a chunk's output: scores += L_b Lk_b^T (causal tiles), num +=
// L_b S_b, and this lane's part of L_b . z_b for rows warp + 8 m (after the block's features and
// record are in shared memory).
template <typename T, int D, class Scores, class Num>
__device__ void accumulateBlock(Scores& scores, Num& num, float* denPart, const OutputSmem<T, D>& s, int fb) {
  using P = ChunkedTiles<T, D>;
  using M = Mma<T>;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
#pragma unroll
  for (int i = 0; i < Scores::kPerWarp; ++i) {
    const int t = Scores::tileOf(i), ti = t / P::TC, tj = t % P::TC;
    if (t < Scores::kTiles && keepsTile<true>(ti, tj))
      M::template mac<false, true>(scores.tile[i], s.Lq + ti * 16 * P::LDF, P::LDF, s.Lk + tj * 16 * P::LDF, P::LDF,
                                   P::FB);
  }
#pragma unroll
  for (int i = 0; i < Num::kPerWarp; ++i) {
    const int t = Num::tileOf(i);
    if (t < Num::kTiles)
      M::template mac<false, false>(num.tile[i], s.Lq + (t / P::TN) * 16 * P::LDF, P::LDF, s.s(fb) + (t % P::TN) * 16,
                                    P::LDN, P::FB);
  }
#pragma unroll
  for (int m = 0; m < P::C / kWarps; ++m)
    for (int f = lane; f < P::FB; f += 32) denPart[m] += toF(s.Lq[(warp + m * kWarps) * P::LDF + f]) * s.zb(fb)[f];
}

// The chunk's rows from its accumulators: PT = T(mask(scores)), den = rowsum(PT) + L . z + eps,
// y = (PT v + num) / den.
template <typename T, int D, class Scores, class Num>
__device__ void finishChunk(const Scores& scores, Num& num, const float* denPart, const OutputSmem<T, D>& s,
                            const ForwardArgs& a, int bh, int64_t t0, int len, int n0) {
  using P = ChunkedTiles<T, D>;
  using M = Mma<T>;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, b = bh / a.p.heads, h = bh % a.p.heads;
  scores.toCausalOperand(s.PT, P::LDC, s.stage);
  __syncthreads();  // PT made
#pragma unroll
  for (int m = 0; m < P::C / kWarps; ++m) {
    const int i = warp + m * kWarps;
    float sum = denPart[m];
    for (int j = lane; j <= i; j += 32) sum += toF(s.PT[i * P::LDC + j]);
    const float den = warpSum(sum) + a.p.eps;
    if (lane == 0 && i < len) {
      s.den[i] = den;
      if (a.den && blockIdx.y == 0) a.den[size_t(bh) * a.p.length + t0 + i] = den;
    }
  }
  __syncthreads();  // den made
#pragma unroll
  for (int i = 0; i < Num::kPerWarp; ++i) {
    const int t = Num::tileOf(i), ti = t / P::TN, tn = t % P::TN;
    if (t >= Num::kTiles || ti * 16 >= len) continue;
    for (int tj = 0; tj <= ti; ++tj)
      M::template mac<false, false>(num.tile[i], s.PT + ti * 16 * P::LDC + tj * 16, P::LDC,
                                    s.V + tj * 16 * P::LDN + tn * 16, P::LDN, 16);
    M::store(s.stage, kStageLd, num.tile[i]);
    __syncwarp();
    for (int e = lane; e < 256; e += 32) {
      const int row = ti * 16 + (e >> 4);
      if (row < len)
        rowPtr<T>(a.y, b, h, t0 + row)[n0 + tn * 16 + (e & 15)] =
            fromF<T>(s.stage[(e >> 4) * kStageLd + (e & 15)] / s.den[row]);
    }
    __syncwarp();
  }
}

// Pass 4: grid (B*H * chunks, D/N), every chunk at once.
template <typename T, int D>
__global__ void __launch_bounds__(kThreads, 2) chunkOutputKernel(ForwardArgs a) {
  using P = ChunkedTiles<T, D>;
  HH_DYNAMIC_SHARED(smem);
  const OutputSmem<T, D> s(smem);
  const ChunkRecords r = recordsOf(a, P::C);
  const int bh = int(blockIdx.x / r.chunks), b = bh / a.p.heads, h = bh % a.p.heads, n0 = blockIdx.y * P::N;
  const int64_t c = blockIdx.x % r.chunks, t0 = c * P::C;
  const int len = chunkLength(t0, a.p.length, P::C);
  const size_t at = (size_t(bh) * r.chunks + c) * P::F;
  loadTileAsync<T, P::C, D>(s.Xq, P::LDX, a.q, b, h, t0, len, 0);
  loadTileAsync<T, P::C, D>(s.Xk, P::LDX, a.k, b, h, t0, len, 0);
  loadTileAsync<T, P::C, P::N>(s.V, P::LDN, a.v, b, h, t0, len, n0);
  fetchRecord(s, r, at, 0, n0);
  StateTiles<T, P::C, P::C> scores;   // L Lk^T, tiles the mask drops left at zero
  StateTiles<T, P::C, P::N> num;      // L S
  float denPart[P::C / kWarps] = {};  // this lane's share of L . z for rows warp + 8 m
  for (int fb = 0; fb < P::BLOCKS; ++fb) {
    asyncWait();
    __syncthreads();  // block fb's record (and the raw rows) are in; block fb - 1's products are done
    if (fb + 1 < P::BLOCKS) fetchRecord(s, r, at, fb + 1, n0);
    const T* W = static_cast<const T*>(r.W) + (size_t(h) * D + fb * kMapBlock) * D;
    const MapJob<T> q{s.Xq, P::LDX, s.Lq, P::LDF, nullptr}, k{s.Xk, P::LDX, s.Lk, P::LDF, nullptr};
    mapTiles<T, D, P::C>(q, k, 2, W, D, a.bias + size_t(h) * D + fb * kMapBlock, kMapBlock, len, s.stage);
    __syncthreads();  // this block's features are made
    accumulateBlock(scores, num, denPart, s, fb);
  }
  finishChunk(scores, num, denPart, s, a, bh, t0, len, n0);
}

template <typename T, int D>
Status launchChunked(const ForwardArgs& a) {
  using P = ChunkedTiles<T, D>;
  const auto segmentSum = chunkStateKernel<T, D, false>;
  const auto record = chunkStateKernel<T, D, true>;
  const auto output = chunkOutputKernel<T, D>;
  const size_t stateBytes = StateSmem<T, D>::kBytes, outputBytes = OutputSmem<T, D>::kBytes;
  cudaError_t e = cudaFuncSetAttribute(segmentSum, cudaFuncAttributeMaxDynamicSharedMemorySize, int(stateBytes));
  if (e == cudaSuccess) e = cudaFuncSetAttribute(record, cudaFuncAttributeMaxDynamicSharedMemorySize, int(stateBytes));
  if (e == cudaSuccess) e = cudaFuncSetAttribute(output, cudaFuncAttributeMaxDynamicSharedMemorySize, int(outputBytes));
  if (e != cudaSuccess) return {e, nullptr};
  const ChunkRecords r = recordsOf(a, P::C);
  if constexpr (sizeof(T) == 2) {
    e = launchWeightToBf16(a.weight, const_cast<void*>(r.W), int64_t(a.p.heads) * D * D, a.p.stream);
    if (e != cudaSuccess) return {e, nullptr};
  }
  const unsigned blocks = unsigned(a.p.batch) * unsigned(a.p.heads) * P::BLOCKS;
  if (a.segments > 1) {
    HH_LAUNCH(segmentSum, dim3(blocks, 1, unsigned(a.segments) - 1), kThreads, stateBytes, a.p.stream, a);
    e = launchSegmentPrefix(a, P::C);
    if (e != cudaSuccess) return {e, nullptr};
  }
  HH_LAUNCH(record, dim3(blocks, 1, unsigned(a.segments)), kThreads, stateBytes, a.p.stream, a);
  const unsigned chunkBlocks = unsigned(int64_t(a.p.batch) * a.p.heads * r.chunks);
  HH_LAUNCH(output, dim3(chunkBlocks, D / P::N), kThreads, outputBytes, a.p.stream, a);
  return {cudaGetLastError(), nullptr};
}

cudaError_t launchWeightToBf16(const float* W, void* out, int64_t count, cudaStream_t stream) {
  HH_LAUNCH(weightToBf16Kernel, dim3(unsigned((count + 255) / 256)), 256, 0, stream, W, static_cast<bf16*>(out), count);
  return cudaGetLastError();
}

size_t chunkedForwardSmemBytes(DType dtype, int headDim) {
  return largerSharedMemory<StateSmem, OutputSmem>(dtype, headDim);
}

size_t chunkedForwardWorkspace(const Problem& p, int segments) {
  const ChunkedSizes z = chunkedSizes(p, segments, hedgehogCudaChunk(p.dtype));
  return z.segments + z.weight + z.records + z.zs;
}

Status launchChunkedForward(const ForwardArgs& a) {
  return withKernelShape(a.p.dtype, a.p.headDim, [&](auto t, auto d) {
    return launchChunked<typename decltype(t)::type, decltype(d)::value>(a);
  });
}

}  // namespace hh::cuda::detail
