// One recurrent decode step of Hedgehog linear attention (hedgehogCudaStep, hedgehog_cuda.h):
//   phi(q), phi(k) [F = 2D] from u = W x + b; S += phi(k) v^T; z += phi(k);
//   y = phi(q)^T S / (phi(q) . z + eps)            (S [F, D], z [F] fp32, updated in place)
// Grid: one CTA of 256 threads per (batch, head). Memory-bound: S is read and written once
// (F * D * 4 bytes = 128 KB per head at D = 128); W is read once per CTA (L2-resident across the
// batch). Thread t updates column n = t % D of S for the rows f = t / D + G i (G = 256 / D), so a
// warp touches 32 consecutive floats of a row: coalesced.
#include "engine/cuda/hh_cuda_common.cuh"
#include "engine/cuda/hh_cuda_kernels.h"

namespace hh::cuda::detail {

template <typename T, int D>
__global__ void __launch_bounds__(kThreads) stepKernel(StepArgs a) {
  constexpr int F = 2 * D, G = kThreads / D;
  __shared__ float xq[D], xk[D], xv[D], fq[F], fk[F], part[kThreads], denPart[kWarps];
  const int b = blockIdx.x / a.p.heads, h = blockIdx.x % a.p.heads;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  for (int d = threadIdx.x; d < D; d += kThreads) {
    xq[d] = toF(rowPtr<const T>(a.q, b, h, 0)[d]);
    xk[d] = toF(rowPtr<const T>(a.k, b, h, 0)[d]);
    xv[d] = toF(rowPtr<const T>(a.v, b, h, 0)[d]);
  }
  __syncthreads();
  // Features: warp w computes u_o for o = w, w + 8, ...; lanes split the D inputs (coalesced rows of
  // W). The warp's D / 8 rows of W are loaded into registers first, all in flight at once, rather
  // than one row's latency after another.
  const float* W = a.weight + size_t(h) * D * D;
  constexpr int kOutputs = D / kWarps, kPerLane = D / 32;
  float w[kOutputs][kPerLane];
#pragma unroll
  for (int i = 0; i < kOutputs; ++i)
#pragma unroll
    for (int j = 0; j < kPerLane; ++j) w[i][j] = W[(warp + i * kWarps) * D + lane + 32 * j];
#pragma unroll
  for (int i = 0; i < kOutputs; ++i) {
    const int o = warp + i * kWarps;
    float sq = 0.0f, sk = 0.0f;
#pragma unroll
    for (int j = 0; j < kPerLane; ++j) {
      sq = fmaf(w[i][j], xq[lane + 32 * j], sq);
      sk = fmaf(w[i][j], xk[lane + 32 * j], sk);
    }
    sq = warpSum(sq) + a.bias[size_t(h) * D + o];
    sk = warpSum(sk) + a.bias[size_t(h) * D + o];
    if (lane == 0) {
      const float eq = clampedExp(sq), ek = clampedExp(sk);
      fq[o] = eq;
      fq[D + o] = 1.0f / eq;
      fk[o] = ek;
      fk[D + o] = 1.0f / ek;
    }
  }
  __syncthreads();
  // z += phi(k); den = phi(q) . z (new z) + eps
  float* z = a.z + size_t(blockIdx.x) * F;
  float dot = 0.0f;
  for (int f = threadIdx.x; f < F; f += kThreads) {
    const float zn = z[f] + fk[f];
    z[f] = zn;
    dot = fmaf(fq[f], zn, dot);
  }
  dot = warpSum(dot);
  if (lane == 0) denPart[warp] = dot;
  // S += phi(k) v^T, numerator partials per row group
  float* S = a.S + size_t(blockIdx.x) * F * D;
  const int n = threadIdx.x % D, g = threadIdx.x / D;
  float num = 0.0f;
  for (int f = g; f < F; f += G) {
    const float s = fmaf(fk[f], xv[n], S[size_t(f) * D + n]);
    S[size_t(f) * D + n] = s;
    num = fmaf(fq[f], s, num);
  }
  part[threadIdx.x] = num;
  __syncthreads();
  if (threadIdx.x < D) {
    float den = a.p.eps, total = 0.0f;
    for (int w = 0; w < kWarps; ++w) den += denPart[w];
    for (int gg = 0; gg < G; ++gg) total += part[gg * D + threadIdx.x];
    rowPtr<T>(a.y, b, h, 0)[threadIdx.x] = fromF<T>(total / den);
  }
}

template <typename T, int D>
cudaError_t launchStep(const StepArgs& a) {
  const auto kernel = stepKernel<T, D>;
  HH_LAUNCH(kernel, unsigned(a.p.batch) * unsigned(a.p.heads), kThreads, 0, a.p.stream, a);
  return cudaGetLastError();
}

}  // namespace hh::cuda::detail

namespace hh::cuda {
using namespace detail;

Status hedgehogCudaStep(const StepArgs& a) {
  Problem p = a.p;
  p.length = 1;
  if (const char* bad = checkProblem(p)) return {cudaSuccess, bad};
  if (!a.q.data || !a.k.data || !a.v.data || !a.y.data || !a.S || !a.z || !a.weight || !a.bias)
    return {cudaSuccess, "hedgehogCudaStep: null pointer"};
  const cudaError_t e = withKernelShape(
      a.p.dtype, a.p.headDim, [&](auto t, auto d) { return launchStep<typename decltype(t)::type, decltype(d)::value>(a); });
  return {e, nullptr};
}

}  // namespace hh::cuda
