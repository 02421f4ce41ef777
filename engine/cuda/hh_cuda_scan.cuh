// The chunk step every Hedgehog chunk kernel shares, and the fused feature-map producer.
//
// ChunkScan<T, C, K, N, Causal> keeps, for one CTA walking the chunks of one (batch, head), a
// state State [K, N] (fp32, in the warps' accumulator registers) and per chunk of C rows computes
//   P    = mask(L Lk^T)                  L, Lk [C, K]; mask: j <= i (Causal) or j >= i (anti-causal)
//   out  = P Vals + L State              Vals [C, N]; State as it was before this chunk
//   State += Lk^T Vals
// with L, Lk, Vals supplied in shared memory by the kernel (its "producer"). Every use is one of:
//   forward y:     L = phi(q), Lk = phi(k), Vals = v                        (causal, in time order)
//   backward gv:   L = phi(k), Lk = phi(q), Vals = gy / den                 (anti-causal, reversed)
//   backward gphi(q): L = [gy/den | gden], Lk = [v | 1], Vals = phi(k) block (causal)
//   backward gphi(k): L = [v | 1], Lk = [gy/den | gden], Vals = phi(q) block (anti-causal, reversed)
// State is rounded to T only as an MMA operand (Sop, refreshed from the registers each chunk).
//
// Shared memory (bytes, T = bf16 / fp32 element size s, pads of 16 bytes per row):
//   L, Lk [C][K+pad] T; Vals [C][N+pad] T;
//   scratch = { Sop [K][N+pad] T, P32/out32 [C][max(C,N)+4] f32, PT [C][C+pad] T }, which the
//             producer may use as it likes before refreshOperand();
//   stage [8 warps][16][20] f32; rowsum [C] f32; z [K] f32; eq [C][EQW] f32 (kernel's own use).
#pragma once
#include "engine/cuda/hh_cuda_common.cuh"

namespace hh::cuda::detail {

// The running state [K, N] fp32 of a chunk scan in the warps' accumulator registers: 16 x 16 tile
// number `tile` (row block tile / TN, column block tile % TN) held by warp tile % kWarps.
template <typename T, int K, int N>
struct StateTiles {
  static constexpr int TN = N / 16, kTiles = (K / 16) * TN;
  static constexpr int kPerWarp = (kTiles + kWarps - 1) / kWarps;
  using M = Mma<T>;
  typename M::Acc tile[kPerWarp];

  __device__ StateTiles() {
#pragma unroll
    for (int s = 0; s < kPerWarp; ++s) M::zero(tile[s]);
  }
  static __device__ __forceinline__ int tileOf(int s) { return (threadIdx.x >> 5) + s * kWarps; }

  // op [K][ldo] = T(State), through the warp's fp32 stage [16][kStageLd]. The caller syncs after.
  __device__ void toOperand(T* op, int ldo, float* stage) const {
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int s = 0; s < kPerWarp; ++s) {
      const int t = tileOf(s);
      if (t >= kTiles) break;
      const int tk = t / TN, tn = t % TN;
      M::store(stage, kStageLd, tile[s]);
      __syncwarp();
      for (int e = lane; e < 256; e += 32)
        op[(tk * 16 + (e >> 4)) * ldo + tn * 16 + (e & 15)] = fromF<T>(stage[(e >> 4) * kStageLd + (e & 15)]);
      __syncwarp();
    }
  }

  // op [K][ldo] = T(State) below and on the diagonal (K == N: a chunk's causal scores), zero above
  // it in the diagonal tiles; tiles above the diagonal are not written. Each tile by its warp.
  __device__ void toCausalOperand(T* op, int ldo, float* stage) const {
    static_assert(K == N, "square tiles");
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int s = 0; s < kPerWarp; ++s) {
      const int t = tileOf(s), tk = t / TN, tn = t % TN;
      if (t >= kTiles || tn > tk) continue;
      M::store(stage, kStageLd, tile[s]);
      __syncwarp();
      for (int e = lane; e < 256; e += 32) {
        const int i = tk * 16 + (e >> 4), j = tn * 16 + (e & 15);
        op[i * ldo + j] = fromF<T>(j <= i ? stage[(e >> 4) * kStageLd + (e & 15)] : 0.0f);
      }
      __syncwarp();
    }
  }

  // State += A^T Vals: A [rows][K] (row r at a + r * lda), Vals [rows][N]; rows a multiple of 16.
  __device__ void accumulate(const T* a, int lda, const T* vals, int ldv, int rows) {
#pragma unroll
    for (int s = 0; s < kPerWarp; ++s) {
      const int t = tileOf(s);
      if (t >= kTiles) break;
      M::template mac<true, false>(tile[s], a + (t / TN) * 16, lda, vals + (t % TN) * 16, ldv, rows);
    }
  }

  // State from / to a [K, N] fp32 block in any memory, row k at p + k * ld (ld a multiple of 16,
  // p 32-byte aligned).
  __device__ void load(const float* p, int ld) {
#pragma unroll
    for (int s = 0; s < kPerWarp; ++s) {
      const int t = tileOf(s);
      if (t >= kTiles) break;
      M::load(tile[s], p + (t / TN) * 16 * ld + (t % TN) * 16, ld);
    }
  }
  __device__ void store(float* p, int ld) const {
#pragma unroll
    for (int s = 0; s < kPerWarp; ++s) {
      const int t = tileOf(s);
      if (t >= kTiles) break;
      M::store(p + (t / TN) * 16 * ld + (t % TN) * 16, ld, tile[s]);
    }
  }
};

template <typename T, int C, int K, int N, bool Causal, int EQW = 0>
struct ChunkScan {
  static_assert(C % 16 == 0 && K % 16 == 0 && N % 16 == 0, "tiles are 16 x 16");
  static constexpr int PAD = padOf<T>();
  static constexpr int LDK = K + PAD, LDN = N + PAD, LDC = C + PAD, LDP = (C > N ? C : N) + 4;
  static constexpr int TK = K / 16, TN = N / 16, TC = C / 16;

  // Byte offsets into the dynamic shared memory.
  static constexpr size_t oL = 0;
  static constexpr size_t oLk = oL + alignUp(size_t(C) * LDK * sizeof(T));
  static constexpr size_t oV = oLk + alignUp(size_t(C) * LDK * sizeof(T));
  static constexpr size_t oSop = oV + alignUp(size_t(C) * LDN * sizeof(T));  // scratch begins
  static constexpr size_t oP32 = oSop + alignUp(size_t(K) * LDN * sizeof(T));
  static constexpr size_t oPT = oP32 + alignUp(size_t(C) * LDP * sizeof(float));
  static constexpr size_t oStage = oPT + alignUp(size_t(C) * LDC * sizeof(T));  // scratch ends
  static constexpr size_t oRowsum = oStage + alignUp(kStageBytes);
  static constexpr size_t oZ = oRowsum + alignUp(size_t(C) * sizeof(float));
  static constexpr size_t oEq = oZ + alignUp(size_t(K) * sizeof(float));
  static constexpr size_t kBytes = oEq + alignUp(size_t(C) * (EQW > 0 ? EQW : 1) * sizeof(float));
  static constexpr size_t kScratchBytes = oStage - oSop;

  using M = Mma<T>;
  T *L, *Lk, *V, *Sop, *PT;
  float *P32, *stage, *rowsum, *z, *eq;
  unsigned char* scratch;
  StateTiles<T, K, N> state;

  __device__ explicit ChunkScan(unsigned char* smem)
      : L(reinterpret_cast<T*>(smem + oL)), Lk(reinterpret_cast<T*>(smem + oLk)), V(reinterpret_cast<T*>(smem + oV)),
        Sop(reinterpret_cast<T*>(smem + oSop)), PT(reinterpret_cast<T*>(smem + oPT)),
        P32(reinterpret_cast<float*>(smem + oP32)),
        stage(reinterpret_cast<float*>(smem + oStage) + (threadIdx.x >> 5) * 16 * kStageLd),
        rowsum(reinterpret_cast<float*>(smem + oRowsum)), z(reinterpret_cast<float*>(smem + oZ)),
        eq(reinterpret_cast<float*>(smem + oEq)), scratch(smem + oSop) {}

  static __device__ __forceinline__ bool allowed(int i, int j) { return Causal ? j <= i : j >= i; }
  static __device__ __forceinline__ bool tileNeeded(int ti, int tj) { return Causal ? tj <= ti : tj >= ti; }
  __device__ float* out32() const { return P32; }  // [C][LDP], valid after products()

  // Sop = T(State). Uses the stage; the caller syncs the block afterwards.
  __device__ void refreshOperand() { state.toOperand(Sop, LDN, stage); }

  // P32 tiles (ti, tj) = L Lk^T for the tiles the mask keeps (others are left unwritten).
  __device__ void scores() {
    const int warp = threadIdx.x >> 5;
    for (int t = warp; t < TC * TC; t += kWarps) {
      const int ti = t / TC, tj = t % TC;
      if (!tileNeeded(ti, tj)) continue;
      typename M::Acc acc;
      M::zero(acc);
      M::template mac<false, true>(acc, L + ti * 16 * LDK, LDK, Lk + tj * 16 * LDK, LDK, K);
      M::store(P32 + ti * 16 * LDP + tj * 16, LDP, acc);
    }
  }

  // PT = T(mask(P32)); rowsum[i] = sum_j PT[i][j] (of the rounded values, as the product uses).
  __device__ void maskRows() {
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    for (int i = warp; i < C; i += kWarps) {
      float sum = 0.0f;
      for (int j = lane; j < C; j += 32) {
        const T x = fromF<T>(allowed(i, j) ? P32[i * LDP + j] : 0.0f);
        PT[i * LDC + j] = x;
        sum += toF(x);
      }
      sum = warpSum(sum);
      if (lane == 0) rowsum[i] = sum;
    }
  }

  // out32 (over P32) = PT Vals + L Sop; State += Lk^T Vals. The caller syncs before and after.
  __device__ void products() {
    const int warp = threadIdx.x >> 5;
    for (int t = warp; t < TC * TN; t += kWarps) {
      const int ti = t / TN, tn = t % TN;
      typename M::Acc acc;
      M::zero(acc);
      for (int tj = 0; tj < TC; ++tj)
        if (tileNeeded(ti, tj))
          M::template mac<false, false>(acc, PT + ti * 16 * LDC + tj * 16, LDC, V + tj * 16 * LDN + tn * 16, LDN, 16);
      M::template mac<false, false>(acc, L + ti * 16 * LDK, LDK, Sop + tn * 16, LDN, K);
      M::store(P32 + ti * 16 * LDP + tn * 16, LDP, acc);
    }
    accumulate();
  }

  // State += Lk^T Vals alone (the segmented forward's first pass). The caller syncs before and after.
  __device__ void accumulate() { state.accumulate(Lk, LDK, V, LDN, C); }

  // State from / to a [K, N] fp32 block in any memory (StateTiles::load, store): the segmented
  // scans' starting states and segment sums.
  __device__ void loadState(const float* p, int ld) { state.load(p, ld); }
  __device__ void storeState(float* p, int ld) const { state.store(p, ld); }

  // One chunk after the producer filled L, Lk, V (any syncs of the producer done).
  __device__ void step() {
    refreshOperand();
    __syncthreads();
    scores();
    __syncthreads();
    maskRows();
    __syncthreads();
    products();
    __syncthreads();
  }
};

// Fused feature map for rows x[t0, t0+len) of one (b, h), u-columns [u0, u0+nU):
//   u = x W[u0+n]^T + bias[u0+n]; inside = |u| < 30; e = exp(clamp(u, +-30))
//   dest[r][eCol + n] = T(e), dest[r][invCol + n] = T(1/e)   (zero for rows r >= len; dest optional)
//   eOut[r][n] = inside ? e : -e  ([C][nU] fp32, optional: the backward's d phi / d u)
// x [C rows, D] is staged in `scratch` (bf16: with the nU rows of W after it); syncs the block on
// entry and exit. W [D, D] and bias [D] fp32 of this head in global memory.
template <typename T, int D, int C>
struct FeatureRows {
  static constexpr int LDX = D + padOf<T>();
  static __host__ __device__ constexpr size_t scratchBytes(int nU) {
    return alignUp(size_t(C) * LDX * sizeof(T)) + (sizeof(T) == 2 ? size_t(nU) * LDX * sizeof(T) : 0);
  }

  static __device__ void run(unsigned char* scratch, float* stage, const Rows& x, int b, int h, int64_t t0, int len,
                             const float* W, const float* bias, int u0, int nU, T* dest, int ldd, int eCol,
                             int invCol, float* eOut) {
    using M = Mma<T>;
    __syncthreads();
    T* X = reinterpret_cast<T*>(scratch);
    loadTile<T, C, D>(X, LDX, x, b, h, t0, len, 0);
    const T* Wsrc;
    int ldw;
    if constexpr (sizeof(T) == 2) {  // W rows [u0, u0+nU) as bf16 in shared memory
      T* Ws = reinterpret_cast<T*>(scratch + alignUp(size_t(C) * LDX * sizeof(T)));
      loadWeightBf16<D>(Ws, LDX, W + size_t(u0) * D, nU);
      Wsrc = Ws;
      ldw = LDX;
    } else {  // fp32: FMA reads W straight from global memory (L1/L2)
      Wsrc = reinterpret_cast<const T*>(W) + size_t(u0) * D;
      ldw = D;
    }
    __syncthreads();
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, tnCount = nU / 16;
    for (int t = warp; t < (C / 16) * tnCount; t += kWarps) {
      const int ti = t / tnCount, tn = t % tnCount;
      typename M::Acc acc;
      M::zero(acc);
      M::template mac<false, true>(acc, X + ti * 16 * LDX, LDX, Wsrc + tn * 16 * ldw, ldw, D);
      M::store(stage, kStageLd, acc);
      __syncwarp();
      for (int e = lane; e < 256; e += 32) {
        const int r = ti * 16 + (e >> 4), n = tn * 16 + (e & 15);
        const float u = stage[(e >> 4) * kStageLd + (e & 15)] + bias[u0 + n];
        const float ex = clampedExp(u);
        const bool valid = r < len;
        if (dest) {
          dest[r * ldd + eCol + n] = fromF<T>(valid ? ex : 0.0f);
          dest[r * ldd + invCol + n] = fromF<T>(valid ? 1.0f / ex : 0.0f);
        }
        if (eOut) eOut[r * nU + n] = signedFeature(u, ex);
      }
      __syncwarp();
    }
    __syncthreads();
  }
};

}  // namespace hh::cuda::detail
