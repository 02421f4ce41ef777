// Host emulation of CUDA's bfloat16 (cuda_emulation/cuda_runtime_api.h says what this is for):
// the storage type and the two conversions the kernels use, rounding to nearest even as
// __float2bfloat16 does.
#pragma once
#include <cstdint>
#include <cstring>

#if !defined(HH_CUDA_EMULATION)
#error "cuda_emulation/cuda_bf16.h is for HH_CUDA_EMULATION builds only"
#endif

struct __nv_bfloat16 {
  uint16_t bits = 0;
};

inline float __bfloat162float(__nv_bfloat16 x) {
  const uint32_t u = uint32_t(x.bits) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

inline __nv_bfloat16 __float2bfloat16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  __nv_bfloat16 r;
  if ((u & 0x7fffffffu) > 0x7f800000u) {  // NaN stays NaN (quiet)
    r.bits = uint16_t((u >> 16) | 0x40u);
    return r;
  }
  u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest, ties to even
  r.bits = uint16_t(u >> 16);
  return r;
}
