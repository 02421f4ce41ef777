// Thin access to the system BLAS (the one LibTorch links) for the CPU kernels that run many
// small products inside their own parallel loop: row-major gemm wrappers over Fortran
// sgemm_/dgemm_, and an RAII guard that keeps OpenBLAS on one thread meanwhile.
// HH_HAVE_BLAS is set by engine/CMakeLists.txt when find_package(BLAS) succeeds; without it,
// available() is false and callers take their LibTorch path.
#pragma once
#include "engine/core/runtime.h"

namespace hh::attn::blas {

bool available();

// Row-major C[M,N] = alpha * op(A)[M,K] op(B)[K,N] + beta * C.
template <typename T>
void gemm(bool transA, bool transB, int m, int n, int k, T alpha, const T* a, int lda, const T* b, int ldb, T beta,
          T* c, int ldc);

// While alive, OpenBLAS runs each call on the calling thread only (engine/core/runtime.h).
using SingleThreaded = hh::BlasSingleThreaded;

}  // namespace hh::attn::blas
