// Backward part 2 on tensor cores, bf16 only (BackwardArgs::pipelined; hh_backward_params.cu has
// the FMA kernels both dtypes otherwise take). From gu (fp32 [B*H, T, D], the workspace):
//   gx = T(gu) W                  gradInputMmaKernel: grid (B*H, row-tile groups, 2 = q|k);
//                                 W as bf16 in shared memory for the CTA's life
//   gW_h = sum_{b,t} T(gu)^T x    weightPartMmaKernel: grid (H, S splits of the B*T rows), the
//   gb_h = sum_{b,t} gu (fp32)    [D, D] partial in accumulator registers (StateTiles); the S
//                                 partials are added in a fixed order as before (deterministic)
// T(gu) is gu rounded to bf16 (the products of a bf16 autograd are rounded the same way), with fp32
// accumulation. These are 4 B T D^2 multiply-adds, as many as the feature map's own forward and
// backward: on an H100 the FMA kernels' fp32 rate is about a tenth of the bf16 tensor-core rate.
// Not yet run on a GPU: checked under the CUDA emulation (tests/engine/cuda).
#include "engine/cuda/hh_cuda_kernels.h"
#include "engine/cuda/hh_cuda_scan.cuh"

namespace hh::cuda::detail {

constexpr int kMmaRows = 64;  // rows of gu per tile

template <int D>
struct ParamsLayout {
  static constexpr int LD = D + padOf<bf16>();
  static constexpr int kVectorsPerRow = D / 4;                 // of four floats
  static constexpr int kGroups = kThreads / kVectorsPerRow;    // threads sharing a column group
  static_assert(kThreads % kVectorsPerRow == 0, "each thread keeps its four columns");
  static constexpr size_t oW = 0;                                            // [D][LD] bf16 (gx)
  static constexpr size_t oGu = oW + alignUp(size_t(D) * LD * sizeof(bf16));  // [64][LD] bf16
  static constexpr size_t oX = oGu + alignUp(size_t(kMmaRows) * LD * sizeof(bf16));  // [64][LD] bf16 (gW)
  static constexpr size_t oStage = oX + alignUp(size_t(kMmaRows) * LD * sizeof(bf16));
  static constexpr size_t oSums = oStage + alignUp(kStageBytes);  // [kGroups][D] f32 (gb)
  static constexpr size_t kBytes = oSums + alignUp(size_t(kGroups) * D * sizeof(float));
};

// Where row r of a 64-row tile of head h starts: the rows are (b, t) pairs numbered b * T + t.
struct RowSource {
  const float* gu;  // [B*H, T, D]
  const Rows* x;    // null: gu only
  int heads, h;
  int64_t length, first, end;  // rows [first, end) of this head's B*T
};

// Rows [first, first + 64) of gu, rounded to bf16, into dst [64][LD] (zero past end); each thread
// adds its four columns' fp32 values to colSums (when given). All of a thread's loads are in
// flight before its first store.
template <int D>
__device__ __forceinline__ void loadGuRows(bf16* dst, const RowSource& src, float* colSums) {
  using P = ParamsLayout<D>;
  constexpr int kPer = kMmaRows * P::kVectorsPerRow / kThreads;
  float4 held[kPer];
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    const int idx = threadIdx.x + i * kThreads, r = idx / P::kVectorsPerRow, c = (idx % P::kVectorsPerRow) * 4;
    const int64_t row = src.first + r;
    held[i] = float4{0.0f, 0.0f, 0.0f, 0.0f};
    if (row < src.end) {
      const int64_t b = row / src.length, t = row % src.length;
      copy16(&held[i], src.gu + ((b * src.heads + src.h) * src.length + t) * D + c);
    }
  }
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    const int idx = threadIdx.x + i * kThreads, r = idx / P::kVectorsPerRow, c = (idx % P::kVectorsPerRow) * 4;
    bf16* out = dst + r * P::LD + c;
    out[0] = fromF<bf16>(held[i].x);
    out[1] = fromF<bf16>(held[i].y);
    out[2] = fromF<bf16>(held[i].z);
    out[3] = fromF<bf16>(held[i].w);
    if (colSums) {
      colSums[0] += held[i].x;
      colSums[1] += held[i].y;
      colSums[2] += held[i].z;
      colSums[3] += held[i].w;
    }
  }
}

// Rows [first, first + 64) of x (bf16 [B, H, T, D] view of head h) into dst [64][LD], zero past end.
template <int D>
__device__ void loadXRows(bf16* dst, const RowSource& src) {
  using P = ParamsLayout<D>;
  const Rows& x = *src.x;
  const bool vectors = ((reinterpret_cast<uintptr_t>(x.data) | uintptr_t((x.sb | x.sh | x.st) * int64_t(sizeof(bf16)))) & 15) == 0;
  const auto rowOf = [&](int r) -> const bf16* {
    const int64_t row = src.first + r;
    return row < src.end ? rowPtr<const bf16>(x, int(row / src.length), src.h, row % src.length) : nullptr;
  };
  if (vectors) {
    constexpr int kPerRow = D / 8, kPer = kMmaRows * kPerRow / kThreads;
    Vec16 held[kPer] = {};
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      const int idx = threadIdx.x + i * kThreads;
      if (const bf16* row = rowOf(idx / kPerRow)) copy16(&held[i], row + (idx % kPerRow) * 8);
    }
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      const int idx = threadIdx.x + i * kThreads;
      copy16(dst + (idx / kPerRow) * P::LD + (idx % kPerRow) * 8, &held[i]);
    }
    return;
  }
  for (int idx = threadIdx.x; idx < kMmaRows * D; idx += kThreads) {
    const bf16* row = rowOf(idx / D);
    dst[(idx / D) * P::LD + idx % D] = row ? row[idx % D] : fromF<bf16>(0.0f);
  }
}

// gx row tiles blockIdx.y, + gridDim.y, ... of head blockIdx.x, side blockIdx.z (0: q, 1: k).
template <int D>
__global__ void __launch_bounds__(kThreads) gradInputMmaKernel(BackwardArgs a, const float* guQ, const float* guK) {
  using P = ParamsLayout<D>;
  using M = Mma<bf16>;
  HH_DYNAMIC_SHARED(smem);
  bf16* W = reinterpret_cast<bf16*>(smem + P::oW);
  bf16* gu = reinterpret_cast<bf16*>(smem + P::oGu);
  float* stage = reinterpret_cast<float*>(smem + P::oStage) + (threadIdx.x >> 5) * 16 * kStageLd;
  const int b = blockIdx.x / a.p.heads, h = blockIdx.x % a.p.heads;
  const Rows& dst = blockIdx.z ? a.gk : a.gq;
  const float* Wg = a.weight + size_t(h) * D * D;
  loadWeightBf16<D>(W, P::LD, Wg);
  // This head's rows only: row b * T + t of the head's B*T is row t of batch item b.
  RowSource src{blockIdx.z ? guK : guQ, nullptr, a.p.heads, h, a.p.length, 0, 0};
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t tiles = (a.p.length + kMmaRows - 1) / kMmaRows;
  for (int64_t tile = blockIdx.y; tile < tiles; tile += gridDim.y) {
    const int64_t t0 = tile * kMmaRows;
    const int len = static_cast<int>(a.p.length - t0 < kMmaRows ? a.p.length - t0 : kMmaRows);
    src.first = int64_t(b) * a.p.length + t0;
    src.end = src.first + len;
    __syncthreads();  // W is in; the previous tile's reads of gu are done
    loadGuRows<D>(gu, src, nullptr);
    __syncthreads();
    for (int t = warp; t < (kMmaRows / 16) * (D / 16); t += kWarps) {
      const int ti = t / (D / 16), tn = t % (D / 16);
      typename M::Acc acc;
      M::zero(acc);
      M::mac<false, false>(acc, gu + ti * 16 * P::LD, P::LD, W + tn * 16, P::LD, D);
      M::store(stage, kStageLd, acc);
      __syncwarp();
      for (int e = lane; e < 256; e += 32) {
        const int r = ti * 16 + (e >> 4);
        if (r < len) rowPtr<bf16>(dst, b, h, t0 + r)[tn * 16 + (e & 15)] = fromF<bf16>(stage[(e >> 4) * kStageLd + (e & 15)]);
      }
      __syncwarp();
    }
  }
}

// Partial gW [D, D] and gb [D] of head blockIdx.x over split blockIdx.y of its B*T rows, q and k
// sides together, into wPart / bPart [split][H][...] (weightReduceKernel adds the splits).
template <int D>
__global__ void __launch_bounds__(kThreads, 1) weightPartMmaKernel(BackwardArgs a, const float* guQ, const float* guK,
                                                                int splits, float* wPart, float* bPart) {
  using P = ParamsLayout<D>;
  HH_DYNAMIC_SHARED(smem);
  bf16* gu = reinterpret_cast<bf16*>(smem + P::oGu);
  bf16* x = reinterpret_cast<bf16*>(smem + P::oX);
  float* sums = reinterpret_cast<float*>(smem + P::oSums);
  const int h = blockIdx.x, s = blockIdx.y, H = a.p.heads;
  const int64_t rows = int64_t(a.p.batch) * a.p.length, per = (rows + splits - 1) / splits;
  const int64_t r0 = s * per, r1 = r0 + per < rows ? r0 + per : rows;
  StateTiles<bf16, D, D> state;  // sum T(gu)^T x
  float colSums[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  for (int side = 0; side < 2; ++side) {
    RowSource src{side ? guK : guQ, side ? &a.k : &a.q, H, h, a.p.length, r0, r1};
    for (; src.first < r1; src.first += kMmaRows) {
      __syncthreads();  // the previous tile's products are done
      loadGuRows<D>(gu, src, colSums);
      loadXRows<D>(x, src);
      __syncthreads();
      state.accumulate(gu, P::LD, x, P::LD, kMmaRows);
    }
  }
  state.store(wPart + (size_t(s) * H + h) * D * D, D);
  const int group = threadIdx.x / P::kVectorsPerRow, c = (threadIdx.x % P::kVectorsPerRow) * 4;
  for (int j = 0; j < 4; ++j) sums[group * D + c + j] = colSums[j];
  __syncthreads();
  for (int d = threadIdx.x; d < D; d += kThreads) {
    float sum = 0.0f;
    for (int g = 0; g < P::kGroups; ++g) sum += sums[g * D + d];
    bPart[(size_t(s) * H + h) * D + d] = sum;
  }
}

template <int D>
cudaError_t launch(const BackwardArgs& a, const float* guQ, const float* guK, int splits, float* wPart, float* bPart) {
  const size_t bytes = ParamsLayout<D>::kBytes;
  const auto gradInput = gradInputMmaKernel<D>;
  const auto weightPart = weightPartMmaKernel<D>;
  cudaError_t e = cudaFuncSetAttribute(gradInput, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes));
  if (e == cudaSuccess) e = cudaFuncSetAttribute(weightPart, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes));
  if (e != cudaSuccess) return e;
  const unsigned bh = unsigned(a.p.batch) * unsigned(a.p.heads);
  // Row-tile groups per head: each CTA converts W once, so a few tiles each rather than one.
  const int64_t tiles = (a.p.length + kMmaRows - 1) / kMmaRows;
  const unsigned groups = unsigned(std::max<int64_t>(1, std::min<int64_t>((tiles + 3) / 4, 65535)));
  HH_LAUNCH(gradInput, dim3(bh, groups, 2), kThreads, bytes, a.p.stream, a, guQ, guK);
  HH_LAUNCH(weightPart, dim3(a.p.heads, splits), kThreads, bytes, a.p.stream, a, guQ, guK, splits, wPart, bPart);
  return cudaGetLastError();
}

cudaError_t launchParamsMma(const BackwardArgs& a, const float* guQ, const float* guK, int splits, float* wPart,
                            float* bPart) {
  return withKernelShape(a.p.dtype, a.p.headDim,
                         [&](auto, auto d) { return launch<decltype(d)::value>(a, guQ, guK, splits, wPart, bPart); });
}

}  // namespace hh::cuda::detail
