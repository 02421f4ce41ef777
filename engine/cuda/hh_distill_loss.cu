// The fused distillation loss (distill_loss_cuda.h): a forward pass over row tiles with an online
// softmax, and two backward passes that recompute the score tiles, one over row tiles (the
// gradient of fq) and one over column tiles (of fk), so that no pass needs atomics.
//
// Every pass runs one thread block (8 warps) per (batch, head, tile of C rows or columns), C = 64
// in bf16 and 32 in fp32, and walks the other operand's tiles in order: scores t = q k^T and
// s = fq fk^T of the C x C tile pair on tensor cores (Mma), into fp32 shared memory, then an
// elementwise pass over the pair's valid entries. Causal blocks skip the tiles above the diagonal.
#include <cmath>

#include "engine/cuda/distill_loss_cuda.h"
#include "engine/cuda/hh_cuda_common.cuh"
#include "engine/cuda/hh_cuda_kernels.h"

namespace hh::cuda::detail {
namespace {

// Shared memory of the three passes: the row tile's q and fq, the column tile's k and fk, the
// tile pair's scores t and s (fp32); then, for the backward passes only, each row's den and lse
// (kRowFloats per row), the gradient tile G in the operand dtype and each warp's staging tile.
template <typename T, int D>
struct LossLayout {
  static constexpr int F = 2 * D;
  static constexpr int C = std::is_same<T, bf16>::value ? 64 : 32;  // rows (and columns) per tile
  static constexpr int LDD = D + padOf<T>(), LDF = F + padOf<T>(), LDS = C + 4, LDG = C + padOf<T>();
  static constexpr int kRowFloats = 2;
  static constexpr size_t kQ = 0;
  static constexpr size_t kFq = alignUp(kQ + size_t(C) * LDD * sizeof(T));
  static constexpr size_t kK = alignUp(kFq + size_t(C) * LDF * sizeof(T));
  static constexpr size_t kFk = alignUp(kK + size_t(C) * LDD * sizeof(T));
  static constexpr size_t kT = alignUp(kFk + size_t(C) * LDF * sizeof(T));
  static constexpr size_t kS = alignUp(kT + size_t(C) * LDS * sizeof(float));
  static constexpr size_t kRows = alignUp(kS + size_t(C) * LDS * sizeof(float));
  static constexpr size_t kG = alignUp(kRows + size_t(kRowFloats) * C * sizeof(float));
  static constexpr size_t kStage = alignUp(kG + size_t(C) * LDG * sizeof(T));
  static constexpr size_t kForwardBytes = kRows;
  static constexpr size_t kBytes = kStage + kStageBytes;  // the backward passes'
  // Accumulator tiles per warp of a [C][F] gradient.
  static constexpr int kAccPerWarp = (C / 16) * (F / 16) / kWarps;
  static_assert((C / 16) * (F / 16) % kWarps == 0, "whole accumulator tiles per warp");
};

template <typename T, int D>
struct LossTiles {
  using L = LossLayout<T, D>;
  T *q, *fq, *k, *fk, *g;
  float *t, *s, *rows, *stage;
  __device__ explicit LossTiles(unsigned char* smem)
      : q(reinterpret_cast<T*>(smem + L::kQ)),
        fq(reinterpret_cast<T*>(smem + L::kFq)),
        k(reinterpret_cast<T*>(smem + L::kK)),
        fk(reinterpret_cast<T*>(smem + L::kFk)),
        g(reinterpret_cast<T*>(smem + L::kG)),
        t(reinterpret_cast<float*>(smem + L::kT)),
        s(reinterpret_cast<float*>(smem + L::kS)),
        rows(reinterpret_cast<float*>(smem + L::kRows)),
        stage(reinterpret_cast<float*>(smem + L::kStage)) {}
};

__device__ __forceinline__ bool pairValid(const DistillLossProblem& p, int64_t i, int64_t j) {
  return i < p.length && j < p.length && (!p.causal || j <= i);
}

// loadTileAsync in pieces of at most 128 columns (what its fallback for unaligned rows takes).
template <typename T, int C, int NCOLS>
__device__ void loadWideAsync(T* dst, int ld, const Rows& x, int b, int h, int64_t t0, int len) {
  constexpr int W = NCOLS < 128 ? NCOLS : 128;
  static_assert(NCOLS % W == 0, "whole pieces");
#pragma unroll
  for (int c0 = 0; c0 < NCOLS; c0 += W) loadTileAsync<T, C, W>(dst + c0, ld, x, b, h, t0, len, c0);
}

// Rows t0 .. t0 + C of head (b, h) of x [.., D] and fx [.., F] into a tile pair, zero past T;
// asynchronous: the caller waits (asyncWait) and syncs.
template <typename T, int D>
__device__ void loadRows(T* x, T* fx, const Rows& rx, const Rows& rf, int b, int h, int64_t t0, int64_t length) {
  using L = LossLayout<T, D>;
  const int len = static_cast<int>(length - t0 < L::C ? length - t0 : L::C);
  loadWideAsync<T, L::C, D>(x, L::LDD, rx, b, h, t0, len);
  loadWideAsync<T, L::C, L::F>(fx, L::LDF, rf, b, h, t0, len);
}

// t = q k^T and s = fq fk^T of the loaded tile pair, fp32 [C][LDS]. With skipUpper (the causal
// diagonal pair) the 16 x 16 tiles above the diagonal are not computed: no valid pair is there.
template <typename T, int D>
__device__ void scoreTiles(const LossTiles<T, D>& m, bool skipUpper) {
  using L = LossLayout<T, D>;
  using M = Mma<T>;
  constexpr int N = L::C / 16;
  for (int tile = threadIdx.x / 32; tile < N * N; tile += kWarps) {
    const int r = tile / N, c = tile % N;
    if (skipUpper && c > r) continue;
    typename M::Acc acc;
    M::zero(acc);
    M::template mac<false, true>(acc, m.q + r * 16 * L::LDD, L::LDD, m.k + c * 16 * L::LDD, L::LDD, D);
    M::store(m.t + r * 16 * L::LDS + c * 16, L::LDS, acc);
    M::zero(acc);
    M::template mac<false, true>(acc, m.fq + r * 16 * L::LDF, L::LDF, m.fk + c * 16 * L::LDF, L::LDF, L::F);
    M::store(m.s + r * 16 * L::LDS + c * 16, L::LDS, acc);
  }
}

// A row's running statistics in the forward, held by each of the row's lanes alike: the max m of
// scale t so far, l = sum e, sum e log(a + floor), sum e s / (s + floor den) and sum e (scale t -
// m), with e = exp(scale t - m); rescaled when m grows. den and its log are the row's constants.
struct RowState {
  float m = -INFINITY, l = 0.0f, logSum = 0.0f, coefSum = 0.0f, shiftSum = 0.0f;
  float flooredDen = 0.0f, logDen = 0.0f;
};

// Threads per row in the forward's reduction (all C rows at once), and the sum or max over them:
// xor shuffles within the row's group of consecutive lanes.
template <int C>
constexpr int kLanesPerRow = kThreads / C;
template <int Lanes, bool Max>
__device__ __forceinline__ float groupReduce(float x) {
#pragma unroll
  for (int o = Lanes / 2; o > 0; o >>= 1) {
    const float y = __shfl_xor_sync(0xffffffffu, x, o);
    x = Max ? fmaxf(x, y) : x + y;
  }
  return x;
}

// One tile pair into the row's state: this thread's columns c = sub, sub + Lanes, ... (so that the
// lanes of a warp read distinct banks). Every thread takes part in the shuffles; rows past T and
// tiles without a key for the row leave the state as it was.
template <typename T, int D>
__device__ void reduceRow(RowState& st, const LossTiles<T, D>& m, const DistillLossProblem& p, int64_t i0, int64_t j0) {
  using L = LossLayout<T, D>;
  constexpr int C = L::C, Lanes = kLanesPerRow<C>;
  const int r = threadIdx.x / Lanes, sub = threadIdx.x % Lanes;
  const int64_t i = i0 + r;
  const float* t = m.t + r * L::LDS;
  const float* s = m.s + r * L::LDS;
  float tileMax = -INFINITY;
  for (int c = sub; c < C; c += Lanes)
    if (pairValid(p, i, j0 + c)) tileMax = fmaxf(tileMax, p.scale * t[c]);
  tileMax = groupReduce<Lanes, true>(tileMax);
  const float mNew = fmaxf(st.m, tileMax);  // -inf only where the row has no key yet
  float sumE = 0.0f, sumLog = 0.0f, sumCoef = 0.0f, sumShift = 0.0f;
  if (tileMax != -INFINITY)
    for (int c = sub; c < C; c += Lanes) {
      if (!pairValid(p, i, j0 + c)) continue;
      const float shifted = p.scale * t[c] - mNew, e = __expf(shifted);
      const float x = s[c] + st.flooredDen;
      sumE += e;
      sumLog += e * (logf(x) - st.logDen);
      sumCoef += e * (s[c] / x);
      sumShift += e * shifted;
    }
  sumE = groupReduce<Lanes, false>(sumE);
  sumLog = groupReduce<Lanes, false>(sumLog);
  sumCoef = groupReduce<Lanes, false>(sumCoef);
  sumShift = groupReduce<Lanes, false>(sumShift);
  if (tileMax == -INFINITY) return;
  const bool first = st.l == 0.0f;
  const float alpha = first ? 0.0f : __expf(st.m - mNew);
  st.shiftSum = (first ? 0.0f : alpha * (st.shiftSum + (st.m - mNew) * st.l)) + sumShift;
  st.l = alpha * st.l + sumE;
  st.logSum = alpha * st.logSum + sumLog;
  st.coefSum = alpha * st.coefSum + sumCoef;
  st.m = mNew;
}

// Block index -> (head, tile), the tiles of every head in `descending` or ascending order (the
// causal passes start with their longest walks).
struct BlockTile {
  int64_t head, tile;
  int b, h;
};
__device__ __forceinline__ BlockTile blockTile(const DistillLossProblem& p, int64_t tiles, bool descending) {
  const int64_t heads = int64_t(p.batch) * p.heads, index = blockIdx.x, order = index / heads;
  BlockTile t;
  t.head = index % heads;
  t.tile = descending ? tiles - 1 - order : order;
  t.b = static_cast<int>(t.head / p.heads);
  t.h = static_cast<int>(t.head % p.heads);
  return t;
}

// One row tile's four row terms (DistillLossArgs), its key tiles walked in order; two blocks an
// SM. Each row's statistics live in the registers of its kLanesPerRow threads.
template <typename T, int D>
__global__ void __launch_bounds__(kThreads, 2) lossForwardKernel(DistillLossArgs a) {
  using L = LossLayout<T, D>;
  constexpr int C = L::C, Lanes = kLanesPerRow<C>;
  HH_DYNAMIC_SHARED(smem);
  const LossTiles<T, D> m(smem);
  const auto& p = a.p;
  const int64_t tiles = (p.length + C - 1) / C;
  const BlockTile bt = blockTile(p, tiles, true);
  const int64_t i0 = bt.tile * C, i = i0 + threadIdx.x / Lanes;  // this thread's row
  loadRows<T, D>(m.q, m.fq, a.q, a.fq, bt.b, bt.h, i0, p.length);
  RowState st;
  if (i < p.length) {
    const float den = a.den[bt.head * p.length + i];
    st.flooredDen = p.floor * den;
    st.logDen = logf(den);
  }
  const int64_t last = p.causal ? bt.tile : tiles - 1;
  for (int64_t jt = 0; jt <= last; ++jt) {
    loadRows<T, D>(m.k, m.fk, a.k, a.fk, bt.b, bt.h, jt * C, p.length);
    asyncWait();
    __syncthreads();
    scoreTiles<T, D>(m, p.causal && jt == bt.tile);
    __syncthreads();
    reduceRow<T, D>(st, m, p, i0, jt * C);
    __syncthreads();  // before the next tile overwrites k, fk, t and s
  }
  if (i < p.length && threadIdx.x % Lanes == 0) {
    const int64_t o = bt.head * p.length + i;
    a.rowLoss[o] = -st.logSum / st.l;
    a.rowCoef[o] = st.coefSum / st.l;
    a.rowNegEntropy[o] = st.shiftSum / st.l - logf(st.l);
    a.rowLse[o] = st.m + logf(st.l);
  }
}

// The backward's per-row inputs of the row tile at i0 into rows[0 .. C) (den) and rows[C .. 2C)
// (lse); rows past T get harmless values (no valid pair reads them).
template <typename T, int D>
__device__ void loadRowInputs(const LossTiles<T, D>& m, const DistillLossBackwardArgs& a, int64_t head, int64_t i0) {
  constexpr int C = LossLayout<T, D>::C;
  for (int r = threadIdx.x; r < C; r += kThreads) {
    const bool in = i0 + r < a.p.length;
    m.rows[r] = in ? a.den[head * a.p.length + i0 + r] : 1.0f;
    m.rows[C + r] = in ? a.rowLse[head * a.p.length + i0 + r] : 0.0f;
  }
}

// G[r][c] = g d loss_i / d s_ij = -g p_ij / (s_ij + floor den_i) on the valid pairs, 0 elsewhere,
// p_ij = exp(scale t_ij - lse_i); in the operand dtype for the gradient products.
template <typename T, int D>
__device__ void gradientTile(const LossTiles<T, D>& m, const DistillLossProblem& p, int64_t i0, int64_t j0, float g) {
  using L = LossLayout<T, D>;
  constexpr int C = L::C;
  for (int idx = threadIdx.x; idx < C * C; idx += kThreads) {
    const int r = idx / C, c = idx % C;
    float v = 0.0f;
    if (pairValid(p, i0 + r, j0 + c)) {
      const float prob = __expf(p.scale * m.t[r * L::LDS + c] - m.rows[C + r]);
      v = -g * prob / (m.s[r * L::LDS + c] + p.floor * m.rows[r]);
    }
    m.g[r * L::LDG + c] = fromF<T>(v);
  }
}

// A warp's accumulator tiles of a [C][F] gradient (tile warp + n * kWarps, row-major over
// C/16 x F/16) into out [B*H][T][F] fp32 rows t0 .., the rows before T only.
template <typename T, int D>
__device__ void storeGradient(const LossTiles<T, D>& m, const typename Mma<T>::Acc* acc, float* out, int64_t head,
                              int64_t length, int64_t t0) {
  using L = LossLayout<T, D>;
  constexpr int NF = L::F / 16;
  const int warp = threadIdx.x / 32, lane = threadIdx.x & 31;
  float* stage = m.stage + warp * 16 * kStageLd;
#pragma unroll
  for (int n = 0; n < L::kAccPerWarp; ++n) {
    const int tile = warp + n * kWarps, rt = tile / NF, ft = tile % NF;
    Mma<T>::store(stage, kStageLd, acc[n]);
    __syncwarp();
    for (int e = lane; e < 256; e += 32) {
      const int r = e / 16, c = e % 16;
      const int64_t row = t0 + rt * 16 + r;
      if (row < length) out[(head * length + row) * L::F + ft * 16 + c] = stage[r * kStageLd + c];
    }
    __syncwarp();
  }
}

// The gradient of one tile's features: with Keys false, d loss / d fq of a row tile, summing G fk
// over its key tiles; with Keys true, d loss / d fk of a key tile, summing G^T fq over its row
// tiles. The tile's own operands stay in shared memory; the other side's are walked.
template <typename T, int D, bool Keys>
__global__ void __launch_bounds__(kThreads) lossGradKernel(DistillLossBackwardArgs a) {
  using L = LossLayout<T, D>;
  using M = Mma<T>;
  constexpr int C = L::C, NF = L::F / 16;
  HH_DYNAMIC_SHARED(smem);
  const LossTiles<T, D> m(smem);
  const auto& p = a.p;
  const int64_t tiles = (p.length + C - 1) / C;
  const BlockTile bt = blockTile(p, tiles, !Keys);  // the causal passes' longest walks first
  const int64_t own0 = bt.tile * C;
  const float g = *a.gradScale * a.multiplier;
  const int warp = threadIdx.x / 32;
  if constexpr (Keys) {
    loadRows<T, D>(m.k, m.fk, a.k, a.fk, bt.b, bt.h, own0, p.length);
  } else {
    loadRows<T, D>(m.q, m.fq, a.q, a.fq, bt.b, bt.h, own0, p.length);
    loadRowInputs<T, D>(m, a, bt.head, own0);
  }
  typename M::Acc acc[L::kAccPerWarp];
#pragma unroll
  for (int n = 0; n < L::kAccPerWarp; ++n) M::zero(acc[n]);
  const int64_t first = Keys && p.causal ? bt.tile : 0, last = !Keys && p.causal ? bt.tile : tiles - 1;
  for (int64_t other = first; other <= last; ++other) {
    const int64_t i0 = Keys ? other * C : own0, j0 = Keys ? own0 : other * C;
    if constexpr (Keys) {
      loadRows<T, D>(m.q, m.fq, a.q, a.fq, bt.b, bt.h, i0, p.length);
      loadRowInputs<T, D>(m, a, bt.head, i0);
    } else {
      loadRows<T, D>(m.k, m.fk, a.k, a.fk, bt.b, bt.h, j0, p.length);
    }
    asyncWait();
    __syncthreads();
    scoreTiles<T, D>(m, p.causal && other == bt.tile);
    __syncthreads();
    gradientTile<T, D>(m, p, i0, j0, g);
    __syncthreads();
#pragma unroll
    for (int n = 0; n < L::kAccPerWarp; ++n) {
      const int tile = warp + n * kWarps, ot = tile / NF, ft = tile % NF;  // own rows' tile, feature tile
      if constexpr (Keys)
        M::template mac<true, false>(acc[n], m.g + ot * 16, L::LDG, m.fq + ft * 16, L::LDF, C);
      else
        M::template mac<false, false>(acc[n], m.g + ot * 16 * L::LDG, L::LDG, m.fk + ft * 16, L::LDF, C);
    }
    __syncthreads();  // before the next tile overwrites the walked operands, the row inputs and G
  }
  storeGradient<T, D>(m, acc, Keys ? a.gfk : a.gfq, bt.head, p.length, own0);
}

const char* checkLossProblem(const DistillLossProblem& p) {
  if (p.batch < 1 || p.heads < 1 || p.length < 1) return "distillation loss CUDA: B, H and T must be positive";
  if (p.headDim != 32 && p.headDim != 64 && p.headDim != 128)
    return "distillation loss CUDA: head dim must be 32, 64 or 128";
  if (p.features != 2 * p.headDim) return "distillation loss CUDA: features must be twice the head dim";
  if (!std::isfinite(p.scale) || !(p.floor >= 0.0f)) return "distillation loss CUDA: bad scale or floor";
  return nullptr;
}

int64_t tileCount(const DistillLossProblem& p) {
  const int64_t c = p.dtype == DType::BF16 ? LossLayout<bf16, 32>::C : LossLayout<float, 32>::C;
  return (p.length + c - 1) / c * p.batch * p.heads;
}

template <class Kernel, class Args>
Status launchLoss(Kernel kernel, size_t bytes, const Args& a) {
  cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes));
  if (e != cudaSuccess) return Status{e, nullptr};
  HH_LAUNCH(kernel, dim3(unsigned(tileCount(a.p))), kThreads, bytes, a.p.stream, a);
  return Status{cudaGetLastError(), nullptr};
}

size_t lossSmemBytes(DType dtype, int headDim) {
  return withKernelShape(dtype, headDim, [](auto t, auto d) {
    return LossLayout<typename decltype(t)::type, decltype(d)::value>::kBytes;
  });
}

}  // namespace
}  // namespace hh::cuda::detail

namespace hh::cuda {
using namespace detail;

bool distillLossCudaSupports(DType dtype, int headDim, int features, int device) {
  if ((headDim != 32 && headDim != 64 && headDim != 128) || features != 2 * headDim) return false;
  int major = 0, optin = 0;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess) return false;
  if (cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device) != cudaSuccess) return false;
  return major >= 8 && lossSmemBytes(dtype, headDim) <= size_t(optin);
}

Status distillLossCudaForward(const DistillLossArgs& a) {
  if (const char* why = checkLossProblem(a.p)) return Status{cudaSuccess, why};
  if (!a.den || !a.rowLoss || !a.rowCoef || !a.rowNegEntropy || !a.rowLse || !a.q.data || !a.k.data || !a.fq.data ||
      !a.fk.data)
    return Status{cudaSuccess, "distillation loss CUDA: a null pointer"};
  return withKernelShape(a.p.dtype, a.p.headDim, [&](auto t, auto d) {
    using T = typename decltype(t)::type;
    constexpr int D = decltype(d)::value;
    return launchLoss(lossForwardKernel<T, D>, LossLayout<T, D>::kForwardBytes, a);
  });
}

Status distillLossCudaBackward(const DistillLossBackwardArgs& a) {
  if (const char* why = checkLossProblem(a.p)) return Status{cudaSuccess, why};
  if (!a.den || !a.rowLse || !a.gradScale || !a.gfq || !a.gfk || !a.q.data || !a.k.data || !a.fq.data || !a.fk.data)
    return Status{cudaSuccess, "distillation loss CUDA: a null pointer"};
  return withKernelShape(a.p.dtype, a.p.headDim, [&](auto t, auto d) {
    using T = typename decltype(t)::type;
    constexpr int D = decltype(d)::value;
    const Status s = launchLoss(lossGradKernel<T, D, false>, LossLayout<T, D>::kBytes, a);
    return s.ok() ? launchLoss(lossGradKernel<T, D, true>, LossLayout<T, D>::kBytes, a) : s;
  });
}

}  // namespace hh::cuda
