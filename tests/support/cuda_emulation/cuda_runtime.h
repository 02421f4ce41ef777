// Host emulation of the CUDA device side the Hedgehog kernels use (cuda_emulation/cuda_runtime_api.h
// says what this is for): the qualifiers, dim3 and the built-in indices, __syncthreads,
// __syncwarp, __shfl_xor_sync, dynamic shared memory and kernel launches.
//
// A launch runs the grid's blocks one after another. Inside a block every CUDA thread is a fiber
// (ucontext) with its own stack. Warps run one at a time, each as far as it can go (its lanes in
// turn, its __syncwarp and shuffle barriers opened as soon as all its live lanes reach them)
// before the next warp starts; the block barrier (__syncthreads) opens when every live thread
// waits there. That order makes a missing block barrier show: a warp reads what a later warp has
// not written yet (setWarpOrder(LastToFirst) turns it around for the other direction). Divergent
// barriers (a warp split between __syncwarp and __syncthreads) abort with a message.
// Shared memory starts filled with 0xff bytes (NaN as fp32 and bf16), so a read of an element no
// thread wrote shows in the results. Static __shared__ arrays become function statics: shared
// by the block's fibers, which is right because blocks run one at a time.
#pragma once
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <tuple>
#include <type_traits>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static

struct dim3 {
  unsigned x, y, z;
  dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};
struct uint3 {
  unsigned x, y, z;
};
struct alignas(16) float4 {
  float x, y, z, w;
};

namespace hh_emu {

// The calling fiber's indices and the current block's geometry.
const uint3& threadIndex();
const uint3& blockIndex();
const dim3& blockDimension();
const dim3& gridDimension();

void syncThreads();
void syncWarp();
// Lane l gets lane (l ^ mask)'s value of x (4 or 8 bytes).
uint64_t shuffleXor(uint64_t x, int mask);
// The current block's dynamic shared memory (the launch's byte count, 128-byte aligned).
unsigned char* dynamicShared();
// cp.async: `size` (4, 8 or 16) bytes from src to the shared dst, both aligned to size, landing
// only when the issuing thread calls asyncWait (dst reads as NaN bytes until then); a thread that
// returns with copies in flight fails.
void copyAsync(void* dst, const void* src, int size);
void asyncWait();

// The order the warps of a block run in: FirstToLast unless set (the emulated suite runs both).
enum class WarpOrder { FirstToLast, LastToFirst };
void setWarpOrder(WarpOrder order);

// Runs body() once per CUDA thread of every block of the grid, `sharedBytes` of dynamic shared
// memory per block.
void runGrid(dim3 grid, dim3 block, size_t sharedBytes, const std::function<void()>& body);

template <class... P, class... A>
void launch(void (*kernel)(P...), dim3 grid, dim3 block, size_t sharedBytes, cudaStream_t, A&&... args) {
  std::tuple<std::decay_t<P>...> params(std::forward<A>(args)...);  // converted as a launch converts them
  runGrid(grid, block, sharedBytes, [&] { std::apply(kernel, params); });
}

}  // namespace hh_emu

#define threadIdx (::hh_emu::threadIndex())
#define blockIdx (::hh_emu::blockIndex())
#define blockDim (::hh_emu::blockDimension())
#define gridDim (::hh_emu::gridDimension())

inline void __syncthreads() { ::hh_emu::syncThreads(); }
inline void __syncwarp(unsigned = 0xffffffffu) { ::hh_emu::syncWarp(); }

template <class T>
T __shfl_xor_sync(unsigned, T x, int mask) {
  static_assert(sizeof(T) <= 8 && std::is_trivially_copyable_v<T>, "shuffles move 4 or 8 bytes");
  uint64_t bits = 0;
  std::memcpy(&bits, &x, sizeof(T));
  bits = ::hh_emu::shuffleXor(bits, mask);
  T r;
  std::memcpy(&r, &bits, sizeof(T));
  return r;
}

// The fast math intrinsics, as the exact functions (the GPU's are within a few ulp of these).
inline float __expf(float x) { return std::exp(x); }
inline float __frcp_rn(float x) { return 1.0f / x; }
