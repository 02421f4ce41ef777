// Forward of causal Hedgehog linear attention, feature map fused (hedgehog_cuda.h).
//
// Grid: x = b * H + h (one CTA per (batch, head) ...), y = value-column block of N columns
// (... times D / N: for D = 128 two (bf16) or four (fp32) CTAs per head, each recomputing the
// features and the chunk scores but carrying only its [F, N] slice of the state). 256 threads.
// Each CTA walks its chunks in time order (ChunkScan, causal), so the parallelism is B * H * D / N
// CTAs: at B * H below about 2 x the SM count (264 on an H100) the GPU is not filled; splitting
// the time axis (chunk states first, then a pass over chunks) is the known next step.
// Per chunk: phi(q), phi(k) [C, 2D] from x W^T + b (tensor cores for bf16), the masked scores,
// num = P v + phi(q) S, den = rowsum(P) + phi(q) . z + eps, y = num / den; then S, z updated.
//   bf16: C = 64, N = 64, WMMA;  fp32: C = 32, N = 32, FMA.
#include "engine/cuda/hh_cuda_scan.cuh"
#include "engine/cuda/hh_cuda_kernels.h"

namespace hh::cuda::detail {

template <typename T, int D>
struct ForwardCfg {
  static constexpr int C = sizeof(T) == 2 ? 64 : 32;
  static constexpr int N = sizeof(T) == 2 ? 64 : 32;
  using Scan = ChunkScan<T, C, 2 * D, N, true>;
  using Feat = FeatureRows<T, D, C>;
  static_assert(Feat::scratchBytes(D) <= Scan::kScratchBytes, "feature scratch overflows");
};

// Rows [C) x columns [n0, n0+N) of a [B,H,T,D] view into dst [C][ld] T, zero from row len on.
template <typename T, int C, int N>
__device__ void loadRows(T* dst, int ld, const Rows& x, int b, int h, int64_t t0, int len, int n0) {
  for (int idx = threadIdx.x; idx < C * N; idx += kThreads) {
    const int r = idx / N, c = idx % N;
    dst[r * ld + c] = r < len ? rowPtr<const T>(x, b, h, t0 + r)[n0 + c] : fromF<T>(0.0f);
  }
}

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
  for (int f = threadIdx.x; f < K; f += kThreads) {  // z += column sums of phi(k) (rows >= len are 0)
    float sum = 0.0f;
    for (int r = 0; r < C; ++r) sum += toF(s.Lk[r * Scan::LDK + f]);
    s.z[f] += sum;
  }
  __syncthreads();
}

template <typename T, int D>
__global__ void __launch_bounds__(kThreads, 1) forwardKernel(ForwardArgs a) {
  using Cfg = ForwardCfg<T, D>;
  using Scan = typename Cfg::Scan;
  extern __shared__ __align__(128) unsigned char smem[];
  Scan s(smem);
  const int b = blockIdx.x / a.p.heads, h = blockIdx.x % a.p.heads, n0 = blockIdx.y * Cfg::N;
  const float* W = a.weight + size_t(h) * D * D;
  const float* bias = a.bias + size_t(h) * D;
  for (int f = threadIdx.x; f < 2 * D; f += kThreads) s.z[f] = 0.0f;
  for (int64_t t0 = 0; t0 < a.p.length; t0 += Cfg::C) {
    const int len = static_cast<int>(a.p.length - t0 < Cfg::C ? a.p.length - t0 : Cfg::C);
    Cfg::Feat::run(s.scratch, s.stage, a.q, b, h, t0, len, W, bias, 0, D, s.L, Scan::LDK, 0, D, nullptr);
    Cfg::Feat::run(s.scratch, s.stage, a.k, b, h, t0, len, W, bias, 0, D, s.Lk, Scan::LDK, 0, D, nullptr);
    loadRows<T, Cfg::C, Cfg::N>(s.V, Scan::LDN, a.v, b, h, t0, len, n0);
    s.step();
    forwardEpilogue<T>(s, a, b, h, t0, len, n0);
  }
}

template <typename T, int D>
Status launchForward(const ForwardArgs& a) {
  using Cfg = ForwardCfg<T, D>;
  const auto kernel = forwardKernel<T, D>;
  const size_t bytes = Cfg::Scan::kBytes;
  cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes));
  if (e != cudaSuccess) return {e, nullptr};
  const dim3 grid(unsigned(a.p.batch) * unsigned(a.p.heads), D / Cfg::N);
  kernel<<<grid, kThreads, bytes, a.p.stream>>>(a);
  return {cudaGetLastError(), nullptr};
}

size_t forwardSmemBytes(DType dtype, int headDim) {
  if (dtype == DType::BF16) return headDim == 64 ? ForwardCfg<bf16, 64>::Scan::kBytes : ForwardCfg<bf16, 128>::Scan::kBytes;
  return headDim == 64 ? ForwardCfg<float, 64>::Scan::kBytes : ForwardCfg<float, 128>::Scan::kBytes;
}

}  // namespace hh::cuda::detail

namespace hh::cuda {
using namespace detail;

int hedgehogCudaChunk(DType dtype) { return dtype == DType::BF16 ? 64 : 32; }

int hedgehogCudaBlocksPerHead(DType dtype, int headDim) {
  return headDim / (dtype == DType::BF16 ? ForwardCfg<bf16, 64>::N : ForwardCfg<float, 64>::N);
}

bool hedgehogCudaSupports(DType dtype, int headDim, int device) {
  if (headDim != 64 && headDim != 128) return false;
  int major = 0, optin = 0;  // attribute queries are cheap (cudaGetDeviceProperties is not)
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess) return false;
  if (cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device) != cudaSuccess) return false;
  if (major < 8) return false;
  const size_t need = std::max(forwardSmemBytes(dtype, headDim), backwardSmemBytes(dtype, headDim));
  return need <= size_t(optin);
}

Status hedgehogCudaForward(const ForwardArgs& a) {
  if (const char* bad = checkProblem(a.p)) return {cudaSuccess, bad};
  if (!a.q.data || !a.k.data || !a.v.data || !a.y.data || !a.weight || !a.bias)
    return {cudaSuccess, "hedgehogCudaForward: null pointer"};
  if (a.p.dtype == DType::BF16)
    return a.p.headDim == 64 ? launchForward<bf16, 64>(a) : launchForward<bf16, 128>(a);
  return a.p.headDim == 64 ? launchForward<float, 64>(a) : launchForward<float, 128>(a);
}

}  // namespace hh::cuda
