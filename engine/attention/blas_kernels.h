// Thin access to the system BLAS (the one LibTorch links) for the CPU kernels that run many
// small products inside their own parallel loop: row-major gemm wrappers over Fortran
// sgemm_/dgemm_, and an RAII guard that keeps OpenBLAS on one thread meanwhile.
// HH_HAVE_BLAS is set by engine/CMakeLists.txt when find_package(BLAS) succeeds; without it,
// available() is false and callers take their LibTorch path.
#pragma once

namespace hh::attn::blas {

bool available();

// Row-major C[M,N] = alpha * op(A)[M,K] op(B)[K,N] + beta * C.
template <typename T>
void gemm(bool transA, bool transB, int m, int n, int k, T alpha, const T* a, int lda, const T* b, int ldb, T beta,
          T* c, int ldc);

// While alive, OpenBLAS (when that is the BLAS) runs each call on the calling thread only.
// Scopes may overlap, on one thread or several: the setting in force before the first of them
// opened comes back when the last of them closes.
class SingleThreaded {
 public:
  SingleThreaded();
  ~SingleThreaded();
  SingleThreaded(const SingleThreaded&) = delete;
  SingleThreaded& operator=(const SingleThreaded&) = delete;

 private:
  bool counted_ = false;  // this scope took part in the count of open scopes
};

}  // namespace hh::attn::blas
