// Host emulation of the warp matrix functions (nvcuda::wmma) the kernels use: m16n16k16 tiles,
// bf16 operands, fp32 accumulators (cuda_emulation/cuda_runtime_api.h says what this is for).
// On a GPU a fragment is spread over the 32 lanes of a warp; here every lane's fragment holds the
// whole tile and every lane computes the whole product. That is the same result as long as all
// lanes pass the same arguments (which wmma requires) and nothing reads fragment elements
// directly (the kernels never do). Products of bf16 values are exact in fp32; the sums' order
// may differ from the tensor cores'.
#pragma once
#include <cuda_bf16.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <type_traits>

#if !defined(HH_CUDA_EMULATION)
#error "cuda_emulation/mma.h is for HH_CUDA_EMULATION builds only"
#endif

namespace nvcuda::wmma {

struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };

template <class Use, int M, int N, int K, class T, class Layout = void>
struct fragment {
  static_assert(M == 16 && N == 16 && K == 16, "the emulation has m16n16k16 only");
  float v[16][16];
};

namespace detail {
inline float toFloat(float x) { return x; }
inline float toFloat(__nv_bfloat16 x) { return __bfloat162float(x); }

// What the hardware requires of a fragment load or store: a 256-bit aligned pointer and a leading
// dimension of whole 16-byte units (8 bf16, 4 floats). A violation aborts with its name.
template <class T>
void checkTilePointer(const T* p, unsigned ld, const char* what) {
  if (reinterpret_cast<uintptr_t>(p) % 32 != 0 || (ld * sizeof(T)) % 16 != 0) {
    std::fprintf(stderr, "cuda emulation: %s with a pointer not 32-byte aligned or a leading dimension of %u "
                 "elements (not whole 16-byte units)\n", what, ld);
    std::abort();
  }
}
}  // namespace detail

template <class Use, class T, class Layout>
void fill_fragment(fragment<Use, 16, 16, 16, T, Layout>& f, float value) {
  for (auto& row : f.v)
    for (float& x : row) x = value;
}

// A or B operand from memory: row_major reads element (r, c) at p[r * ld + c], col_major at p[c * ld + r].
template <class Use, class T, class Layout>
void load_matrix_sync(fragment<Use, 16, 16, 16, T, Layout>& f, const T* p, unsigned ld) {
  constexpr bool col = std::is_same_v<Layout, col_major>;
  detail::checkTilePointer(p, ld, "load_matrix_sync");
  for (int r = 0; r < 16; ++r)
    for (int c = 0; c < 16; ++c) f.v[r][c] = detail::toFloat(col ? p[c * ld + r] : p[r * ld + c]);
}

// Pure arithmetic on fragments, which live in the calling fiber and hold no kernel memory: not
// worth the sanitizers' checks (they made a sanitizer build's suite several times slower). The
// loads and stores, which touch the kernels' memory, stay checked.
#if defined(__SANITIZE_ADDRESS__)
#define HH_EMU_FRAGMENT_MATH __attribute__((no_sanitize("address", "undefined")))
#else
#define HH_EMU_FRAGMENT_MATH
#endif

// d = a b + c (d may be c).
template <class T, class LayA, class LayB>
HH_EMU_FRAGMENT_MATH void mma_sync(fragment<accumulator, 16, 16, 16, float>& d, const fragment<matrix_a, 16, 16, 16, T, LayA>& a,
              const fragment<matrix_b, 16, 16, 16, T, LayB>& b, const fragment<accumulator, 16, 16, 16, float>& c) {
  float out[16][16];
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 16; ++j) {
      float sum = c.v[i][j];
      for (int k = 0; k < 16; ++k) sum += a.v[i][k] * b.v[k][j];
      out[i][j] = sum;
    }
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 16; ++j) d.v[i][j] = out[i][j];
}

inline void load_matrix_sync(fragment<accumulator, 16, 16, 16, float>& f, const float* p, unsigned ld, layout_t layout) {
  detail::checkTilePointer(p, ld, "load_matrix_sync (accumulator)");
  for (int r = 0; r < 16; ++r)
    for (int c = 0; c < 16; ++c) f.v[r][c] = layout == mem_row_major ? p[r * ld + c] : p[c * ld + r];
}

inline void store_matrix_sync(float* p, const fragment<accumulator, 16, 16, 16, float>& f, unsigned ld,
                              layout_t layout) {
  detail::checkTilePointer(p, ld, "store_matrix_sync");
  for (int r = 0; r < 16; ++r)
    for (int c = 0; c < 16; ++c) (layout == mem_row_major ? p[r * ld + c] : p[c * ld + r]) = f.v[r][c];
}

}  // namespace nvcuda::wmma
