// exp and log on 8 floats at once for the CPU kernels (GCC vector extensions: one AVX2 register
// in a function compiled for avx2, e.g. a target_clones("avx2", "default") clone, two SSE
// registers otherwise). Branch-free, so loops over them stay vectorised; accurate to a few ulp
// (TestFusedDistillLossCpu::vectorExpAndLogAreAccurate in
// tests/engine/attention/test_fused_distill_loss_cpu.cpp measures them against std::exp and std::log).
#pragma once
#include <cstdint>
#include <cstring>

// The helpers below are always inlined into their callers: no vector crosses a function ABI.
#pragma GCC diagnostic ignored "-Wpsabi"

namespace hh::attn::vec {

typedef float Floats8 __attribute__((vector_size(32)));
typedef int32_t Ints8 __attribute__((vector_size(32)));

__attribute__((always_inline)) inline Floats8 splat(float x) {
  return Floats8{x, x, x, x, x, x, x, x};
}

__attribute__((always_inline)) inline Floats8 load(const float* p) {
  Floats8 x;
  std::memcpy(&x, p, sizeof x);
  return x;
}

__attribute__((always_inline)) inline void store(float* p, Floats8 x) {
  std::memcpy(p, &x, sizeof x);
}

__attribute__((always_inline)) inline float sum(Floats8 x) {
  return ((x[0] + x[4]) + (x[1] + x[5])) + ((x[2] + x[6]) + (x[3] + x[7]));
}

__attribute__((always_inline)) inline Floats8 bitsToFloats(Ints8 bits) {
  Floats8 x;
  std::memcpy(&x, &bits, sizeof x);
  return x;
}

__attribute__((always_inline)) inline Ints8 floatsToBits(Floats8 x) {
  Ints8 bits;
  std::memcpy(&bits, &x, sizeof bits);
  return bits;
}

// Lanes j0 .. j0 + 7 of a row of n entries: all ones where j < n (for the ragged end of a row).
__attribute__((always_inline)) inline Ints8 lanesBelow(int j0, int n) {
  const Ints8 lane = {0, 1, 2, 3, 4, 5, 6, 7};
  return lane + j0 < n;
}

// The largest of x[0 .. n-1] (n >= 1; NaNs are passed over); x is read in whole 8-float steps, the
// lanes past n ignored, so the buffer must hold n rounded up to 8.
__attribute__((always_inline)) inline float maxOf(const float* x, int n) {
  Floats8 top = splat(-__builtin_huge_valf());
  for (int j = 0; j < n; j += 8) {
    const Floats8 y = load(x + j);
    top = lanesBelow(j, n) & (y > top) ? y : top;
  }
  float m = top[0];
  for (int l = 1; l < 8; ++l) m = m > top[l] ? m : top[l];
  return m;
}

// exp(x): x clamped to [-87.3, 88.7] (so exp(-inf) is 1.2e-38, not 0); x = n ln2 + r with
// |r| <= ln2/2; exp(r) by its Taylor series to degree 7 (truncation below 6e-9 relative); 2^n
// built in the float exponent bits as 2^(n - n/2) 2^(n/2), since n reaches 128 (x above 88.38)
// where 2^n alone is not a float. NaN stays NaN.
__attribute__((always_inline)) inline Floats8 exp8(Floats8 x) {
  const Floats8 lo = splat(-87.3f), hi = splat(88.7f);
  x = x < lo ? lo : x;
  x = x > hi ? hi : x;
  // Round to nearest by adding and removing 1.5 * 2^23; the shifted float's bits then hold n
  // as an integer offset from those of 1.5 * 2^23 (0x4B400000).
  const Floats8 shifted = x * 1.44269504088896341f + 12582912.0f;
  const Floats8 n = shifted - 12582912.0f;
  const Floats8 r = x - n * 0.693145751953125f - n * 1.42860682030941723e-6f;  // ln2 split hi + lo
  Floats8 p = r * (1.0f / 5040.0f) + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const Ints8 power = floatsToBits(shifted) - 0x4B400000;  // n in [-126, 128]
  const Ints8 half = power >> 1;                           // floor(n / 2) in [-63, 64]
  return p * bitsToFloats((power - half + 127) << 23) * bitsToFloats((half + 127) << 23);
}

// log(x): x = m 2^e with m in [sqrt(1/2), sqrt(2)); log m = 2 atanh(s), s = (m - 1) / (m + 1),
// by its odd series to s^9 (|s| <= 0.1716: truncation below 3e-10 relative); e ln2 added in two
// parts. Subnormal x are scaled up first. As std::log: 0 gives -inf, +inf gives +inf, x < 0 and
// NaN give NaN.
__attribute__((always_inline)) inline Floats8 log8(Floats8 x) {
  const Floats8 tiny = splat(1.17549435e-38f);  // the smallest normal float
  const Ints8 subnormal = x < tiny;             // lanes of -1 where true
  const Floats8 xs = subnormal ? x * 8388608.0f : x;
  const Ints8 bits = floatsToBits(xs);
  Ints8 e = ((bits >> 23) & 0xff) - 127 + (subnormal & -23);
  Floats8 m = bitsToFloats((bits & 0x007fffff) | 0x3f800000);  // [1, 2)
  const Ints8 high = m > 1.41421356f;
  m = high ? m * 0.5f : m;
  e = e - high;  // high lanes are -1
  const Floats8 s = (m - 1.0f) / (m + 1.0f), s2 = s * s;
  Floats8 p = s2 * (1.0f / 9.0f) + 1.0f / 7.0f;
  p = p * s2 + 1.0f / 5.0f;
  p = p * s2 + 1.0f / 3.0f;
  p = p * s2 + 1.0f;
  const Floats8 ef = __builtin_convertvector(e, Floats8);
  Floats8 result = ef * 0.693145751953125f + (ef * 1.42860682030941723e-6f + 2.0f * s * p);
  const Floats8 inf = splat(__builtin_huge_valf());
  result = x > 0.0f ? result : (x == 0.0f ? -inf : splat(__builtin_nanf("")));
  return x == inf ? inf : result;
}

}  // namespace hh::attn::vec
