// Forward of causal Hedgehog linear attention, feature map fused (hedgehog_cuda.h).
//
// Grid: x = b * H + h (one CTA per (batch, head) ...), y = value-column block of N columns
// (... times D / N: for D = 128 two (bf16) or four (fp32) CTAs per head, each recomputing the
// features and the chunk scores but carrying only its [F, N] slice of the state), z = segment of
// the sequence. 256 threads. Each CTA walks its segment's chunks in time order (ChunkScan,
// causal). With one segment the parallelism is B * H * D / N CTAs, which left an H100 mostly idle
// at small B * H (12 CTAs at B=1 H=12 D=64 on 132 SMs, docs/performance_gpu.md); with more, a
// first pass sums each segment's state (segmentSumKernel), a prefix gives every segment its
// starting state (segmentPrefixKernel), and the forward runs all segments at once.
// Per chunk: phi(q), phi(k) [C, 2D] from x W^T + b (tensor cores for bf16), the masked scores,
// num = P v + phi(q) S, den = rowsum(P) + phi(q) . z + eps, y = num / den; then S, z updated.
//   bf16: C = 64, N = 64, WMMA;  fp32: C = 32, N = 32, FMA.
#include "engine/cuda/hh_cuda_kernels.h"
#include "engine/cuda/hh_cuda_scan.cuh"
#include "engine/cuda/hh_forward.cuh"

namespace hh::cuda::detail {

template <typename T, int D>
struct ForwardCfg : ForwardTiles<T, D> {
  using ForwardTiles<T, D>::C;
  using ForwardTiles<T, D>::N;
  using Scan = ChunkScan<T, C, 2 * D, N, true>;
  using Feat = FeatureRows<T, D, C>;
  static_assert(Feat::scratchBytes(D) <= Scan::kScratchBytes, "feature scratch overflows");
};

// y rows of the chunk: den_i = rowsum_i + phi(q_i) . z + eps (z before this chunk), y = out / den.
template <typename T, class Scan>
__device__ void forwardEpilogue(Scan& s, const ForwardArgs& a, int b, int h, int64_t t0, int len, int n0) {
  constexpr int C = Scan::TC * 16, K = Scan::TK * 16, N = Scan::TN * 16;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const float* out = s.out32();
  for (int i = warp; i < len; i += kWarps) {
    float dot = 0.0f;
    for (int f = lane; f < K; f += 32) dot += toF(s.L[i * Scan::LDK + f]) * s.z[f];
    const float den = s.rowsum[i] + warpSum(dot) + a.p.eps;
    T* y = rowPtr<T>(a.y, b, h, t0 + i) + n0;
    for (int n = lane; n < N; n += 32) y[n] = fromF<T>(out[i * Scan::LDP + n] / den);
    if (a.den && blockIdx.y == 0 && lane == 0) a.den[(size_t(b) * a.p.heads + h) * a.p.length + t0 + i] = den;
  }
  __syncthreads();
  addColumnSums<T, C, K>(s.z, s.Lk, Scan::LDK);  // z += column sums of phi(k)
  __syncthreads();
}

// Pass 1 of a split forward: grid (B*H, D/N, segments - 1). Each block sums its segment's state
// block S[:, n0:n0+N] = sum phi(k)^T v and z = sum phi(k) over the segment's chunks, into the
// workspace (the last segment's sum is nobody's start, so it is not computed).
template <typename T, int D>
__global__ void __launch_bounds__(kThreads, 1) segmentSumKernel(ForwardArgs a) {
  using Cfg = ForwardCfg<T, D>;
  using Scan = typename Cfg::Scan;
  constexpr int F = 2 * D;
  HH_DYNAMIC_SHARED(smem);
  Scan s(smem);
  const ForwardBlock k = forwardBlock<T, D>(a);
  for (int f = threadIdx.x; f < F; f += kThreads) s.z[f] = 0.0f;
  for (int64_t c = k.c0; c < k.c1; ++c) {
    const int64_t t0 = c * Cfg::C;
    const int len = chunkLength(t0, a.p.length, Cfg::C);
    Cfg::Feat::run(s.scratch, s.stage, a.k, k.b, k.h, t0, len, k.W, k.bias, 0, D, s.Lk, Scan::LDK, 0, D, nullptr);
    loadTile<T, Cfg::C, Cfg::N>(s.V, Scan::LDN, a.v, k.b, k.h, t0, len, k.n0);
    __syncthreads();
    s.accumulate();
    addColumnSums<T, Cfg::C, F>(s.z, s.Lk, Scan::LDK);  // z += column sums of phi(k)
    __syncthreads();
  }
  s.storeState(k.g.S + k.slot * F * D + k.n0, D);
  if (blockIdx.y == 0)
    for (int f = threadIdx.x; f < F; f += kThreads) k.g.z[k.slot * F + f] = s.z[f];
}

// Pass 2: each segment's sum becomes the sum of the segments before it (its starting state), in
// place; grid (B*H, ceil((2D * D + 2D) / 256)), one element of S or z per thread.
__global__ void segmentPrefixKernel(float* S, float* z, int segments, int F, int D) {
  const int64_t sCount = int64_t(F) * D, e = int64_t(blockIdx.y) * blockDim.x + threadIdx.x;
  if (e >= sCount + F) return;
  float* base = e < sCount ? S + size_t(blockIdx.x) * segments * sCount + e : z + size_t(blockIdx.x) * segments * F + (e - sCount);
  const int64_t stride = e < sCount ? sCount : F;
  float running = 0.0f;
  for (int seg = 0; seg < segments; ++seg) {
    const float sum = seg + 1 < segments ? base[seg * stride] : 0.0f;  // the last was never summed
    base[seg * stride] = running;
    running += sum;
  }
}

// The forward proper: grid (B*H, D/N, segments). Each block walks its segment's chunks in time
// order from the segment's starting state (zero for the first).
template <typename T, int D>
__global__ void __launch_bounds__(kThreads, 1) forwardKernel(ForwardArgs a) {
  using Cfg = ForwardCfg<T, D>;
  using Scan = typename Cfg::Scan;
  constexpr int F = 2 * D;
  HH_DYNAMIC_SHARED(smem);
  Scan s(smem);
  const ForwardBlock k = forwardBlock<T, D>(a);
  if (k.seg > 0) {
    s.loadState(k.g.S + k.slot * F * D + k.n0, D);
    for (int f = threadIdx.x; f < F; f += kThreads) s.z[f] = k.g.z[k.slot * F + f];
  } else {
    for (int f = threadIdx.x; f < F; f += kThreads) s.z[f] = 0.0f;
  }
  for (int64_t c = k.c0; c < k.c1; ++c) {
    const int64_t t0 = c * Cfg::C;
    const int len = chunkLength(t0, a.p.length, Cfg::C);
    Cfg::Feat::run(s.scratch, s.stage, a.q, k.b, k.h, t0, len, k.W, k.bias, 0, D, s.L, Scan::LDK, 0, D, nullptr);
    Cfg::Feat::run(s.scratch, s.stage, a.k, k.b, k.h, t0, len, k.W, k.bias, 0, D, s.Lk, Scan::LDK, 0, D, nullptr);
    loadTile<T, Cfg::C, Cfg::N>(s.V, Scan::LDN, a.v, k.b, k.h, t0, len, k.n0);
    s.step();
    forwardEpilogue<T>(s, a, k.b, k.h, t0, len, k.n0);
  }
}

cudaError_t launchSegmentPrefix(const ForwardArgs& a, int chunk) {
  const Segments g = segmentsOf(a, chunk);
  const unsigned bh = unsigned(a.p.batch) * unsigned(a.p.heads), D = unsigned(a.p.headDim);
  const unsigned elements = 2 * D * D + 2 * D;
  HH_LAUNCH(segmentPrefixKernel, dim3(bh, (elements + 255) / 256), 256, 0, a.p.stream, g.S, g.z, a.segments, int(2 * D), int(D));
  return cudaGetLastError();
}

template <typename T, int D>
Status launchForward(const ForwardArgs& a) {
  using Cfg = ForwardCfg<T, D>;
  const auto forward = forwardKernel<T, D>;
  const auto segmentSum = segmentSumKernel<T, D>;
  const size_t bytes = Cfg::Scan::kBytes;
  cudaError_t e = cudaFuncSetAttribute(forward, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes));
  if (e == cudaSuccess) e = cudaFuncSetAttribute(segmentSum, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes));
  if (e != cudaSuccess) return {e, nullptr};
  const unsigned bh = unsigned(a.p.batch) * unsigned(a.p.heads), segments = unsigned(a.segments);
  if (segments > 1) {
    HH_LAUNCH(segmentSum, dim3(bh, D / Cfg::N, segments - 1), kThreads, bytes, a.p.stream, a);
    e = launchSegmentPrefix(a, Cfg::C);
    if (e != cudaSuccess) return {e, nullptr};
  }
  HH_LAUNCH(forward, dim3(bh, D / Cfg::N, segments), kThreads, bytes, a.p.stream, a);
  return {cudaGetLastError(), nullptr};
}

bool fitsDeviceSharedMemory(size_t bytes) {
  int device = 0, optin = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device) != cudaSuccess)
    return false;
  return bytes <= size_t(optin);
}

size_t forwardSmemBytes(DType dtype, int headDim) {
  return withKernelShape(dtype, headDim, [](auto t, auto d) {
    return ForwardCfg<typename decltype(t)::type, decltype(d)::value>::Scan::kBytes;
  });
}

}  // namespace hh::cuda::detail

namespace hh::cuda {
using namespace detail;

int hedgehogCudaChunk(DType dtype) { return dtype == DType::BF16 ? 64 : 32; }

int hedgehogCudaBlocksPerHead(DType dtype, int headDim) {
  if (headDim != 32 && headDim != 64 && headDim != 128) return 1;
  return withKernelShape(dtype, headDim, [](auto t, auto d) {
    return decltype(d)::value / ForwardTiles<typename decltype(t)::type, decltype(d)::value>::N;
  });
}

bool hedgehogCudaSupports(DType dtype, int headDim, int device) {
  if (headDim != 32 && headDim != 64 && headDim != 128) return false;
  int major = 0, optin = 0;  // attribute queries are cheap (cudaGetDeviceProperties is not)
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess) return false;
  if (cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device) != cudaSuccess) return false;
  if (major < 8) return false;
  const size_t need = std::max({forwardSmemBytes(dtype, headDim), backwardSmemBytes(dtype, headDim),
                                chunkedForwardSmemBytes(dtype, headDim)});
  return need <= size_t(optin);
}

int hedgehogCudaSegments(const Problem& p, int device, bool chunked) {
  int multiprocessors = 0;
  if (checkProblem(p) || cudaDeviceGetAttribute(&multiprocessors, cudaDevAttrMultiProcessorCount, device) != cudaSuccess)
    return 1;
  // blocks per head of the pass that walks the chunks: value-column blocks, or the chunked
  // forward's state pass, one per 32 map outputs
  const int perHead = chunked ? p.headDim / 32 : hedgehogCudaBlocksPerHead(p.dtype, p.headDim);
  const int64_t blocks = int64_t(p.batch) * p.heads * perHead;
  const int64_t chunks = (p.length + hedgehogCudaChunk(p.dtype) - 1) / hedgehogCudaChunk(p.dtype);
  const int64_t wanted = (2 * int64_t(multiprocessors) + blocks - 1) / blocks;
  return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>({wanted, chunks / 4, 65535})));
}

size_t hedgehogCudaForwardWorkspace(const Problem& p, int segments, bool chunked) {
  if (checkProblem(p) || segments < 1) return 0;
  if (chunked) return chunkedForwardWorkspace(p, segments);
  if (segments == 1) return 0;
  const size_t F = 2 * size_t(p.headDim);
  return size_t(p.batch) * p.heads * segments * (F * p.headDim + F) * sizeof(float);
}

Status hedgehogCudaForward(const ForwardArgs& a) {
  if (const char* bad = checkProblem(a.p)) return {cudaSuccess, bad};
  if (!a.q.data || !a.k.data || !a.v.data || !a.y.data || !a.weight || !a.bias)
    return {cudaSuccess, "hedgehogCudaForward: null pointer"};
  const int64_t chunks = (a.p.length + hedgehogCudaChunk(a.p.dtype) - 1) / hedgehogCudaChunk(a.p.dtype);
  if (a.segments < 1 || a.segments > chunks || a.segments > 65535)
    return {cudaSuccess, "hedgehogCudaForward: segments must be 1 .. the number of chunks (at most 65535)"};
  if (a.segments > 1 && !a.workspace) return {cudaSuccess, "hedgehogCudaForward: a split forward needs its workspace"};
  if (a.chunked) {
    if (!a.workspace) return {cudaSuccess, "hedgehogCudaForward: the chunked forward needs its workspace"};
    return launchChunkedForward(a);
  }
  if (a.pipelined && fitsDeviceSharedMemory(pipelinedForwardSmemBytes(a.p.dtype, a.p.headDim)))
    return launchPipelinedForward(a);
  return withKernelShape(a.p.dtype, a.p.headDim,
                         [&](auto t, auto d) { return launchForward<typename decltype(t)::type, decltype(d)::value>(a); });
}

}  // namespace hh::cuda
