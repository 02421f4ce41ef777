// Device helpers shared by the Hedgehog CUDA kernels: element conversion, strided row access, and
// warp-level 16x16 tile products with fp32 accumulation:
//   bf16: tensor cores through nvcuda::wmma (m16n16k16, bf16 operands, fp32 accumulators);
//   fp32: plain FMA (no TF32), each lane owning a 2 x 4 block of the 16 x 16 tile.
// All operands of the tile products are in shared memory (or, fp32 only, any memory).
//
// The kernels also compile as plain C++ against a host emulation of the CUDA features they use
// (tests/support/cuda_emulation, HH_CUDA_EMULATION): the engine.cuda.hedgehog_cuda_emulated suite
// runs them on the CPU. For that, kernels take their dynamic shared memory with
// HH_DYNAMIC_SHARED(name) and are launched with HH_LAUNCH(kernel, grid, block, bytes, stream, args...)
// (kernel a variable or a name without commas), never with <<<...>>> directly.
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <mma.h>

#if defined(HH_CUDA_EMULATION)
#define HH_DYNAMIC_SHARED(name) unsigned char* name = ::hh_emu::dynamicShared()
#define HH_LAUNCH(kernel, grid, block, bytes, stream, ...) ::hh_emu::launch(kernel, grid, block, bytes, stream, __VA_ARGS__)
#else
#define HH_DYNAMIC_SHARED(name) extern __shared__ __align__(128) unsigned char name[]
#define HH_LAUNCH(kernel, grid, block, bytes, stream, ...) kernel<<<grid, block, bytes, stream>>>(__VA_ARGS__)
#endif

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "engine/cuda/hedgehog_cuda.h"

namespace hh::cuda::detail {

using bf16 = __nv_bfloat16;
constexpr int kWarps = 8;  // every chunk kernel runs 8 warps (256 threads)
constexpr int kThreads = kWarps * 32;
constexpr float kClamp = 30.0f;  // kHedgehogClamp (engine/config/attention_types.h)

template <typename T>
struct TypeTag {
  using type = T;
};

// Calls f(TypeTag<element type>{}, std::integral_constant<int, D>{}) for the dtype and the head
// dim D (32, 64 or 128: checkProblem refuses any other; anything else runs as 128) and returns
// its result: the one place that turns the runtime shape into the kernels' template arguments.
template <class F>
auto withKernelShape(DType dtype, int headDim, F&& f) {
  const auto forDim = [&](auto t) {
    if (headDim == 32) return f(t, std::integral_constant<int, 32>{});
    if (headDim == 64) return f(t, std::integral_constant<int, 64>{});
    return f(t, std::integral_constant<int, 128>{});
  };
  return dtype == DType::BF16 ? forDim(TypeTag<bf16>{}) : forDim(TypeTag<float>{});
}

// The larger of two kernels' dynamic shared memory (their layouts' kBytes) for the dtype and head
// dim: what a pair of passes needs of the device.
template <template <typename, int> class A, template <typename, int> class B>
size_t largerSharedMemory(DType dtype, int headDim) {
  return withKernelShape(dtype, headDim, [](auto t, auto d) {
    using T = typename decltype(t)::type;
    constexpr int D = decltype(d)::value;
    return A<T, D>::kBytes > B<T, D>::kBytes ? A<T, D>::kBytes : B<T, D>::kBytes;
  });
}

// exp(u) with u clamped to [-kClamp, kClamp]. A NaN u stays NaN, as the CPU path's clamp keeps
// it: fminf/fmaxf return the other operand, which would turn a diverged row into finite features.
__device__ __forceinline__ float clampedExp(float u) {
  return u != u ? u : expf(fminf(fmaxf(u, -kClamp), kClamp));
}
// The same with the fast hardware exp (__expf), as the pipelined feature map uses it.
__device__ __forceinline__ float clampedFastExp(float u) {
  return u != u ? u : __expf(fminf(fmaxf(u, -kClamp), kClamp));
}
// What the backward reads of a feature: +e where |u| < kClamp (the gradient flows), -e where u
// was clamped (none), NaN where u is NaN (it must reach the gradient).
__device__ __forceinline__ float signedFeature(float u, float e) {
  return u != u ? u : (fabsf(u) < kClamp ? e : -e);
}
// The gradient through a feature from signedFeature's es: `flowing` where es > 0, 0 where
// clamped, NaN where u was NaN.
__device__ __forceinline__ float throughClamp(float es, float flowing) {
  return es != es ? es : (es > 0.0f ? flowing : 0.0f);
}

__device__ __forceinline__ float toF(float x) { return x; }
__device__ __forceinline__ float toF(bf16 x) { return __bfloat162float(x); }
template <typename T>
__device__ __forceinline__ T fromF(float x);
template <>
__device__ __forceinline__ float fromF<float>(float x) { return x; }
template <>
__device__ __forceinline__ bf16 fromF<bf16>(float x) { return __float2bfloat16(x); }

// Row t of head (b, h) of a strided [B, H, T, D] view.
template <typename T>
__device__ __forceinline__ T* rowPtr(const Rows& r, int b, int h, int64_t t) {
  return static_cast<T*>(r.data) + b * r.sb + h * r.sh + t * r.st;
}

// 16 bytes from src to dst, both 16-byte aligned: one vector load and store (LDG.128 / STS.128).
__device__ __forceinline__ void copy16(void* dst, const void* src) {
#if defined(HH_CUDA_EMULATION)
  std::memcpy(dst, src, 16);  // the same bytes, without the aliasing a host compiler may not allow
#else
  *static_cast<uint4*>(dst) = *static_cast<const uint4*>(src);
#endif
}
__device__ __forceinline__ void zero16(void* dst) {
#if defined(HH_CUDA_EMULATION)
  std::memset(dst, 0, 16);
#else
  *static_cast<uint4*>(dst) = make_uint4(0u, 0u, 0u, 0u);
#endif
}

// 16 bytes in registers.
#if defined(HH_CUDA_EMULATION)
struct alignas(16) Vec16 {
  unsigned char bytes[16];
};
#else
using Vec16 = uint4;
#endif

// Rows [0, C) x columns [c0, c0 + NCOLS) of rows t0 + r of head (b, h) into dst[r * ld + c], zero
// from row len on. 16-byte loads and stores when the source rows are 16-byte aligned (dst rows
// always are: ld * sizeof(T) and the tile bases are multiples of 16 bytes), else one element at
// a time. Every thread issues all its vector loads (at most four) before its first store, so a
// tile costs one memory latency, not one per load.
template <typename T, int C, int NCOLS>
__device__ void loadTile(T* dst, int ld, const Rows& x, int b, int h, int64_t t0, int len, int c0) {
  constexpr int V = 16 / static_cast<int>(sizeof(T)), VPR = NCOLS / V;  // vectors per row
  constexpr int kVectors = C * VPR, kPerThread = (kVectors + kThreads - 1) / kThreads;
  static_assert(NCOLS % V == 0, "whole 16-byte vectors per row");
  static_assert(kPerThread <= 4, "at most four vectors in flight per thread");
  const T* base = static_cast<const T*>(x.data) + b * x.sb + h * x.sh + t0 * x.st + c0;
  const bool vectors = ((reinterpret_cast<uintptr_t>(base) | uintptr_t(x.st * int64_t(sizeof(T)))) & 15) == 0;
  if (vectors) {
    Vec16 held[kPerThread] = {};
#pragma unroll
    for (int i = 0; i < kPerThread; ++i) {
      const int idx = threadIdx.x + i * kThreads, r = idx / VPR, c = (idx % VPR) * V;
      if (idx < kVectors && r < len) copy16(&held[i], base + r * x.st + c);
    }
#pragma unroll
    for (int i = 0; i < kPerThread; ++i) {
      const int idx = threadIdx.x + i * kThreads, r = idx / VPR, c = (idx % VPR) * V;
      if (idx >= kVectors) break;
      if (r < len)
        copy16(dst + r * ld + c, &held[i]);
      else
        zero16(dst + r * ld + c);
    }
    return;
  }
  for (int idx = threadIdx.x; idx < C * NCOLS; idx += kThreads) {
    const int r = idx / NCOLS, c = idx % NCOLS;
    dst[r * ld + c] = r < len ? base[r * x.st + c] : fromF<T>(0.0f);
  }
}

// Rows [0, rows) of W [., D] fp32 (row-major, any alignment) into dst [rows][ld] bf16; four
// loads of four floats in flight per thread before its stores.
template <int D>
__device__ void loadWeightBf16(bf16* dst, int ld, const float* W, int rows = D) {
  const int kVectors = rows * D / 4;
  constexpr int kBatch = 4;
  if (reinterpret_cast<uintptr_t>(W) & 15) {
    for (int idx = threadIdx.x; idx < rows * D; idx += kThreads) dst[(idx / D) * ld + idx % D] = fromF<bf16>(W[idx]);
    return;
  }
  for (int first = threadIdx.x; first < kVectors; first += kThreads * kBatch) {
    float4 w[kBatch];
#pragma unroll
    for (int j = 0; j < kBatch; ++j)
      if (first + j * kThreads < kVectors) copy16(&w[j], W + 4 * (first + j * kThreads));
#pragma unroll
    for (int j = 0; j < kBatch; ++j) {
      const int e = 4 * (first + j * kThreads);
      if (e >= 4 * kVectors) break;
      bf16* out = dst + (e / D) * ld + e % D;
      out[0] = fromF<bf16>(w[j].x);
      out[1] = fromF<bf16>(w[j].y);
      out[2] = fromF<bf16>(w[j].z);
      out[3] = fromF<bf16>(w[j].w);
    }
  }
}

// cp.async (sm_80 on): 16 bytes from global src to shared dst without passing through registers,
// in flight until the issuing thread's asyncWait(); other threads see them after a barrier that
// follows that wait. The emulation lands them only at the wait (NaN bytes until then).
__device__ __forceinline__ void copyAsync16(void* dst, const void* src) {
#if defined(HH_CUDA_EMULATION)
  ::hh_emu::copyAsync(dst, src, 16);
#else
  const unsigned shared = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(shared), "l"(src) : "memory");
#endif
}
// The same for 4 bytes (both addresses 4-byte aligned).
__device__ __forceinline__ void copyAsync4(void* dst, const void* src) {
#if defined(HH_CUDA_EMULATION)
  ::hh_emu::copyAsync(dst, src, 4);
#else
  const unsigned shared = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(shared), "l"(src) : "memory");
#endif
}
__device__ __forceinline__ void asyncWait() {
#if defined(HH_CUDA_EMULATION)
  ::hh_emu::asyncWait();
#else
  asm volatile("cp.async.wait_all;\n" ::: "memory");
#endif
}

// loadTile's tile, issued as asynchronous copies where the rows are 16-byte aligned (zero rows
// and unaligned sources are stored at once): the caller asyncWait()s and syncs before reading.
template <typename T, int C, int NCOLS>
__device__ void loadTileAsync(T* dst, int ld, const Rows& x, int b, int h, int64_t t0, int len, int c0) {
  constexpr int V = 16 / static_cast<int>(sizeof(T)), VPR = NCOLS / V;
  static_assert(NCOLS % V == 0, "whole 16-byte vectors per row");
  const T* base = static_cast<const T*>(x.data) + b * x.sb + h * x.sh + t0 * x.st + c0;
  const bool vectors = ((reinterpret_cast<uintptr_t>(base) | uintptr_t(x.st * int64_t(sizeof(T)))) & 15) == 0;
  if (!vectors) return loadTile<T, C, NCOLS>(dst, ld, x, b, h, t0, len, c0);
  for (int idx = threadIdx.x; idx < C * VPR; idx += kThreads) {
    const int r = idx / VPR, c = (idx % VPR) * V;
    if (r < len)
      copyAsync16(dst + r * ld + c, base + r * x.st + c);
    else
      zero16(dst + r * ld + c);
  }
}


// Shared-memory row padding, in elements: 16 bytes, so that rows start in different banks and
// WMMA tile pointers stay 32-byte aligned (tile rows are multiples of 16).
template <typename T>
__host__ __device__ constexpr int padOf() { return 16 / static_cast<int>(sizeof(T)); }
__host__ __device__ constexpr size_t alignUp(size_t x) { return (x + 127) & ~size_t(127); }

template <typename T>
struct Mma;

// Tensor cores. Tile pointers address the tile's first element; "Col" operands are stored
// transposed (element (r, c) at p[c * ld + r]). k is a multiple of 16.
template <>
struct Mma<bf16> {
  using Acc = nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 16, float>;
  static __device__ __forceinline__ void zero(Acc& c) { nvcuda::wmma::fill_fragment(c, 0.0f); }

  // c[16,16] += A[16,k] B[k,16]
  template <bool ColA, bool ColB>
  static __device__ __forceinline__ void mac(Acc& c, const bf16* a, int lda, const bf16* b, int ldb, int k) {
    using namespace nvcuda::wmma;
    using LayA = typename std::conditional<ColA, col_major, row_major>::type;
    using LayB = typename std::conditional<ColB, col_major, row_major>::type;
    fragment<matrix_a, 16, 16, 16, bf16, LayA> fa;
    fragment<matrix_b, 16, 16, 16, bf16, LayB> fb;
#pragma unroll 2  // more unrolling hoists fragment loads and spills next to the state registers
    for (int k0 = 0; k0 < k; k0 += 16) {
      load_matrix_sync(fa, a + (ColA ? k0 * lda : k0), lda);
      load_matrix_sync(fb, b + (ColB ? k0 : k0 * ldb), ldb);
      mma_sync(c, fa, fb, c);
    }
  }
  // c -> p[16,16] fp32 row-major (ld a multiple of 4, p 32-byte aligned), and back
  static __device__ __forceinline__ void store(float* p, int ld, const Acc& c) {
    nvcuda::wmma::store_matrix_sync(p, c, ld, nvcuda::wmma::mem_row_major);
  }
  static __device__ __forceinline__ void load(Acc& c, const float* p, int ld) {
    nvcuda::wmma::load_matrix_sync(c, p, ld, nvcuda::wmma::mem_row_major);
  }
};

// FMA. Lane l owns rows 2*(l/4) + {0,1}, columns 4*(l%4) + {0..3} of the tile.
template <>
struct Mma<float> {
  struct Acc {
    float v[2][4];
  };
  static __device__ __forceinline__ void zero(Acc& c) {
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
      for (int j = 0; j < 4; ++j) c.v[i][j] = 0.0f;
  }
  template <bool ColA, bool ColB>
  static __device__ __forceinline__ void mac(Acc& c, const float* a, int lda, const float* b, int ldb, int k) {
    const int lane = threadIdx.x & 31, r0 = 2 * (lane >> 2), c0 = 4 * (lane & 3);
#pragma unroll 4
    for (int kk = 0; kk < k; ++kk) {
      float av[2], bv[4];
#pragma unroll
      for (int i = 0; i < 2; ++i) av[i] = ColA ? a[kk * lda + r0 + i] : a[(r0 + i) * lda + kk];
#pragma unroll
      for (int j = 0; j < 4; ++j) bv[j] = ColB ? b[(c0 + j) * ldb + kk] : b[kk * ldb + c0 + j];
#pragma unroll
      for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) c.v[i][j] = fmaf(av[i], bv[j], c.v[i][j]);
    }
  }
  static __device__ __forceinline__ void store(float* p, int ld, const Acc& c) {
    const int lane = threadIdx.x & 31, r0 = 2 * (lane >> 2), c0 = 4 * (lane & 3);
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
      for (int j = 0; j < 4; ++j) p[(r0 + i) * ld + c0 + j] = c.v[i][j];
  }
  static __device__ __forceinline__ void load(Acc& c, const float* p, int ld) {
    const int lane = threadIdx.x & 31, r0 = 2 * (lane >> 2), c0 = 4 * (lane & 3);
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
      for (int j = 0; j < 4; ++j) c.v[i][j] = p[(r0 + i) * ld + c0 + j];
  }
};

// z[f] += sum_{r < C} x[r * ld + f] for f < K (the forward's z update from phi(k): rows past the
// chunk's length are zero); thread f, f + 256, ... owns z[f]. The caller syncs after.
template <typename T, int C, int K>
__device__ void addColumnSums(float* z, const T* x, int ld) {
  for (int f = threadIdx.x; f < K; f += kThreads) {
    float sum = 0.0f;
    for (int r = 0; r < C; ++r) sum += toF(x[r * ld + f]);
    z[f] += sum;
  }
}

__device__ __forceinline__ float warpSum(float x) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}

// Per-warp fp32 staging tile [16][20] for turning accumulators into elements.
constexpr int kStageLd = 20;
constexpr size_t kStageBytes = size_t(kWarps) * 16 * kStageLd * sizeof(float);

}  // namespace hh::cuda::detail
