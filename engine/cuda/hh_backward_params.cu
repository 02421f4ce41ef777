// Backward of causal Hedgehog linear attention, part 2: through the feature map's linear layer,
// and the entry point hedgehogCudaBackward (hedgehog_cuda.h).
// From gu (fp32 [B*H, T, D], the gradient w.r.t. u = x W^T + b, 0 outside the clamp):
//   gx = gu W                      gradInputKernel: grid (B*H, min(ceil(T/32), 65535), 2 = q|k)
//   gW_h = sum_{b,t} gu^T x        weightPartKernel: grid (H, D/32, S splits of the B*T rows);
//   gb_h = sum_{b,t} gu            partial sums per split in the workspace, then
//                                  weightReduceKernel adds the S partials in a fixed order
//                                  (deterministic, no atomics).
// Plain fp32 FMA: O(B T D^2), the same order as the feature map itself. With BackwardArgs::pipelined
// the bf16 case runs on tensor cores instead (hh_backward_params_mma.cu).
#include "engine/cuda/hh_cuda_common.cuh"
#include "engine/cuda/hh_cuda_kernels.h"

namespace hh::cuda::detail {

constexpr int kRowsPerTile = 32;

// gx rows [t0, t0+32) of one (b, h): gx[r][n] = sum_o gu[r][o] W[o][n]. Row tiles blockIdx.y,
// + gridDim.y, ... (grid.y is capped at 65535).
template <typename T, int D>
__global__ void __launch_bounds__(kThreads) gradInputKernel(BackwardArgs a, const float* guQ, const float* guK) {
  constexpr int G = kThreads / D, PER = kRowsPerTile / G;  // thread: column n, rows g + G p
  __shared__ float gu[kRowsPerTile][D];
  const int b = blockIdx.x / a.p.heads, h = blockIdx.x % a.p.heads;
  const float* src = (blockIdx.z ? guK : guQ) + size_t(blockIdx.x) * a.p.length * D;
  const Rows& dst = blockIdx.z ? a.gk : a.gq;
  const int n = threadIdx.x % D, g = threadIdx.x / D;
  const float* W = a.weight + size_t(h) * D * D;
  for (int64_t t0 = int64_t(blockIdx.y) * kRowsPerTile; t0 < a.p.length; t0 += int64_t(gridDim.y) * kRowsPerTile) {
    const int len = static_cast<int>(a.p.length - t0 < kRowsPerTile ? a.p.length - t0 : kRowsPerTile);
    __syncthreads();  // the previous tile's reads of gu are done
    for (int idx = threadIdx.x; idx < kRowsPerTile * D; idx += kThreads) {
      const int r = idx / D, c = idx % D;
      gu[r][c] = r < len ? src[(t0 + r) * D + c] : 0.0f;
    }
    __syncthreads();
    float acc[PER];
#pragma unroll
    for (int p = 0; p < PER; ++p) acc[p] = 0.0f;
    for (int o = 0; o < D; ++o) {
      const float w = W[o * D + n];
#pragma unroll
      for (int p = 0; p < PER; ++p) acc[p] = fmaf(gu[g + G * p][o], w, acc[p]);
    }
#pragma unroll
    for (int p = 0; p < PER; ++p)
      if (g + G * p < len) rowPtr<T>(dst, b, h, t0 + g + G * p)[n] = fromF<T>(acc[p]);
  }
}

// Rows of split s: [s * per, min(B*T, (s+1) * per)) of the (b, t) rows of head h.
inline __host__ __device__ int64_t rowsPerSplit(int64_t rows, int splits) { return (rows + splits - 1) / splits; }

// Partial gW[o0 .. o0+32)[:] and gb[o0 .. o0+32) of head h over one split, q and k together.
template <typename T, int D>
__global__ void __launch_bounds__(kThreads) weightPartKernel(BackwardArgs a, const float* guQ, const float* guK,
                                                             int splits, float* wPart, float* bPart) {
  constexpr int OB = 32, G = kThreads / D, PER = OB / G;  // thread: input column i, outputs og + G m
  __shared__ float gus[kRowsPerTile][OB + 1];
  __shared__ float xs[kRowsPerTile][D];
  const int h = blockIdx.x, o0 = blockIdx.y * OB, s = blockIdx.z, H = a.p.heads;
  const int64_t len = a.p.length, rows = int64_t(a.p.batch) * len, per = rowsPerSplit(rows, splits);
  const int64_t r0 = s * per, r1 = r0 + per < rows ? r0 + per : rows;
  const int i = threadIdx.x % D, og = threadIdx.x / D;
  float acc[PER], bacc = 0.0f;
#pragma unroll
  for (int m = 0; m < PER; ++m) acc[m] = 0.0f;
  for (int side = 0; side < 2; ++side) {
    const float* gu = side ? guK : guQ;
    const Rows& x = side ? a.k : a.q;
    for (int64_t base = r0; base < r1; base += kRowsPerTile) {
      __syncthreads();
      for (int idx = threadIdx.x; idx < kRowsPerTile * (OB + D); idx += kThreads) {
        const int r = idx / (OB + D), c = idx % (OB + D);
        const int64_t row = base + r;
        const bool valid = row < r1;
        const int b = valid ? int(row / len) : 0;
        const int64_t t = valid ? row % len : 0;
        if (c < OB)
          gus[r][c] = valid ? gu[((size_t(b) * H + h) * len + t) * D + o0 + c] : 0.0f;
        else
          xs[r][c - OB] = valid ? toF(rowPtr<const T>(x, b, h, t)[c - OB]) : 0.0f;
      }
      __syncthreads();
      for (int r = 0; r < kRowsPerTile; ++r) {
        const float xv = xs[r][i];
#pragma unroll
        for (int m = 0; m < PER; ++m) acc[m] = fmaf(gus[r][og + G * m], xv, acc[m]);
        if (threadIdx.x < OB) bacc += gus[r][threadIdx.x];
      }
    }
  }
  float* wOut = wPart + (size_t(s) * H + h) * D * D;
#pragma unroll
  for (int m = 0; m < PER; ++m) wOut[size_t(o0 + og + G * m) * D + i] = acc[m];
  if (threadIdx.x < OB) bPart[(size_t(s) * H + h) * D + o0 + threadIdx.x] = bacc;
}

// gW = sum_s wPart[s], gb = sum_s bPart[s], in order s = 0, 1, ...
__global__ void weightReduceKernel(const float* wPart, const float* bPart, int splits, int64_t wCount, int64_t bCount,
                                   float* gw, float* gb) {
  for (int64_t idx = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; idx < wCount + bCount;
       idx += int64_t(gridDim.x) * blockDim.x) {
    const bool isW = idx < wCount;
    const float* src = isW ? wPart + idx : bPart + (idx - wCount);
    const int64_t stride = isW ? wCount : bCount;
    float sum = 0.0f;
    for (int s = 0; s < splits; ++s) sum += src[s * stride];
    if (isW)
      gw[idx] = sum;
    else
      gb[idx - wCount] = sum;
  }
}

int splitsOf(const Problem& p) {
  const int64_t rows = int64_t(p.batch) * p.length;
  const int64_t s = (rows + 1023) / 1024;
  return static_cast<int>(s < 1 ? 1 : (s > 64 ? 64 : s));
}

struct Workspace {
  float *guQ, *guK, *wPart, *bPart;
  BackwardSegments segments;
  ChunkedBackwardSpace chunked;
  size_t bytes;
};

// After the scans' part of the workspace (from byte `offset`), the chunked scans' (chunked only):
// W as bf16, the forward and reverse segment states, the forward and reverse records.
size_t carveChunked(const Problem& p, int segments, char* base, size_t offset, ChunkedBackwardSpace& w) {
  auto up = [](size_t x) { return (x + 255) & ~size_t(255); };
  const size_t D = size_t(p.headDim), bh = size_t(p.batch) * p.heads, states = 2 * D * (D + 16);
  const size_t chunks = size_t((p.length + hedgehogCudaChunk(p.dtype) - 1) / hedgehogCudaChunk(p.dtype));
  const size_t weight = p.dtype == DType::BF16 ? up(size_t(p.heads) * D * D * 2) : 0;
  const size_t slots = segments > 1 ? up(bh * segments * states * sizeof(float)) : 0;
  const size_t records = up(bh * chunks * states * (p.dtype == DType::BF16 ? 2 : 4));
  if (base) {
    w.weight = base + offset;
    w.forwardSlots = reinterpret_cast<float*>(base + offset + weight);
    w.reverseSlots = reinterpret_cast<float*>(base + offset + weight + slots);
    w.forwardRecords = base + offset + weight + 2 * slots;
    w.reverseRecords = base + offset + weight + 2 * slots + records;
  }
  return offset + weight + 2 * slots + 2 * records;
}

// Offsets (bytes, 256-aligned) of gu(q), gu(k), the gW and gb partials and, with segments, the
// three scans' segment states, then (chunked) the chunked scans' part; base may be null (sizes only).
Workspace carve(const Problem& p, int segments, bool chunked, void* base) {
  const size_t D = size_t(p.headDim), bh = size_t(p.batch) * p.heads;
  const size_t gu = bh * p.length * D * sizeof(float);
  const size_t wp = size_t(splitsOf(p)) * p.heads * D * D * sizeof(float);
  const size_t bp = size_t(splitsOf(p)) * p.heads * D * sizeof(float);
  const int64_t dvSlot = int64_t(2 * D * D), dqkSlot = int64_t((D + 16) * 2 * D);
  const size_t dvBytes = segments > 1 ? bh * segments * dvSlot * sizeof(float) : 0;
  const size_t dqkBytes = segments > 1 ? bh * segments * dqkSlot * sizeof(float) : 0;
  auto up = [](size_t x) { return (x + 255) & ~size_t(255); };
  const size_t offK = up(gu), offW = 2 * up(gu), offB = offW + up(wp), offDv = offB + up(bp);
  const size_t offDq = offDv + up(dvBytes), offDk = offDq + up(dqkBytes);
  char* c = static_cast<char*>(base);
  Workspace w{};
  const int chunk = hedgehogCudaChunk(p.dtype);
  const int64_t chunksEach = ((p.length + chunk - 1) / chunk + segments - 1) / segments;
  w.segments.dv = {nullptr, segments, chunksEach, dvSlot};
  w.segments.dq = {nullptr, segments, chunksEach, dqkSlot};
  w.segments.dk = {nullptr, segments, chunksEach, dqkSlot};
  if (c) {
    w.guQ = reinterpret_cast<float*>(c);
    w.guK = reinterpret_cast<float*>(c + offK);
    w.wPart = reinterpret_cast<float*>(c + offW);
    w.bPart = reinterpret_cast<float*>(c + offB);
    if (segments > 1) {
      w.segments.dv.states = reinterpret_cast<float*>(c + offDv);
      w.segments.dq.states = reinterpret_cast<float*>(c + offDq);
      w.segments.dk.states = reinterpret_cast<float*>(c + offDk);
    }
  }
  w.bytes = offDk + up(dqkBytes);
  if (chunked) w.bytes = carveChunked(p, segments, c, w.bytes, w.chunked);
  return w;
}

template <typename T, int D>
cudaError_t launchParams(const BackwardArgs& a, const Workspace& w) {
  const unsigned bh = unsigned(a.p.batch) * unsigned(a.p.heads);
  const unsigned tiles = unsigned(std::min<int64_t>((a.p.length + kRowsPerTile - 1) / kRowsPerTile, 65535));
  const int splits = splitsOf(a.p);
  if (std::is_same<T, bf16>::value && a.pipelined) {
    const cudaError_t e = launchParamsMma(a, w.guQ, w.guK, splits, w.wPart, w.bPart);
    if (e != cudaSuccess) return e;
  } else {
    const auto gradInput = gradInputKernel<T, D>;
    const auto weightPart = weightPartKernel<T, D>;
    HH_LAUNCH(gradInput, dim3(bh, tiles, 2), kThreads, 0, a.p.stream, a, w.guQ, w.guK);
    HH_LAUNCH(weightPart, dim3(a.p.heads, D / 32, splits), kThreads, 0, a.p.stream, a, w.guQ, w.guK, splits, w.wPart,
              w.bPart);
  }
  const int64_t wCount = int64_t(a.p.heads) * D * D, bCount = int64_t(a.p.heads) * D;
  const int blocks = static_cast<int>(std::min<int64_t>((wCount + bCount + 255) / 256, 4096));
  HH_LAUNCH(weightReduceKernel, blocks, 256, 0, a.p.stream, w.wPart, w.bPart, splits, wCount, bCount, a.gweight,
            a.gbias);
  return cudaGetLastError();
}

}  // namespace hh::cuda::detail

namespace hh::cuda {
using namespace detail;

size_t hedgehogCudaBackwardWorkspace(const Problem& p, int segments, bool chunked) {
  if (checkProblem(p) || segments < 1) return 0;
  return carve(p, segments, chunked, nullptr).bytes;
}

Status hedgehogCudaBackward(const BackwardArgs& a) {
  if (const char* bad = checkProblem(a.p)) return {cudaSuccess, bad};
  if (!a.q.data || !a.k.data || !a.v.data || !a.y.data || !a.gy.data || !a.den || !a.gq.data || !a.gk.data ||
      !a.gv.data || !a.weight || !a.bias || !a.gweight || !a.gbias || !a.workspace)
    return {cudaSuccess, "hedgehogCudaBackward: null pointer"};
  const int64_t chunks = (a.p.length + hedgehogCudaChunk(a.p.dtype) - 1) / hedgehogCudaChunk(a.p.dtype);
  if (a.segments < 1 || a.segments > chunks || a.segments > 65535)
    return {cudaSuccess, "hedgehogCudaBackward: segments must be 1 .. the number of chunks (at most 65535)"};
  const Workspace w = carve(a.p, a.segments, a.chunked, a.workspace);
  cudaError_t e = a.chunked && chunkedBackwardFitsDevice(a) ? launchChunkedBackward(a, w.guQ, w.guK, w.chunked)
                                                            : launchBackwardScans(a, w.guQ, w.guK, w.segments);
  if (e != cudaSuccess) return {e, nullptr};
  e = withKernelShape(a.p.dtype, a.p.headDim,
                      [&](auto t, auto d) { return launchParams<typename decltype(t)::type, decltype(d)::value>(a, w); });
  return {e, nullptr};
}

}  // namespace hh::cuda
