#include "engine/attention/blas_kernels.h"

#include <mutex>
#include <stdexcept>

#if HH_HAVE_BLAS
extern "C" {
void sgemm_(const char* transa, const char* transb, const int* m, const int* n, const int* k, const float* alpha,
            const float* a, const int* lda, const float* b, const int* ldb, const float* beta, float* c, const int* ldc);
void dgemm_(const char* transa, const char* transb, const int* m, const int* n, const int* k, const double* alpha,
            const double* a, const int* lda, const double* b, const int* ldb, const double* beta, double* c,
            const int* ldc);
// OpenBLAS extensions; weak, so null with another BLAS.
void openblas_set_num_threads(int) __attribute__((weak));
int openblas_get_num_threads(void) __attribute__((weak));
}
#endif

namespace hh::attn::blas {

bool available() { return HH_HAVE_BLAS != 0; }

// Column-major BLAS on row-major data: C^T = op(B)^T op(A)^T.
template <>
void gemm<float>(bool transA, bool transB, int m, int n, int k, float alpha, const float* a, int lda, const float* b,
                 int ldb, float beta, float* c, int ldc) {
#if HH_HAVE_BLAS
  const char ta = transA ? 'T' : 'N', tb = transB ? 'T' : 'N';
  sgemm_(&tb, &ta, &n, &m, &k, &alpha, b, &ldb, a, &lda, &beta, c, &ldc);
#else
  throw std::logic_error("blas::gemm: built without BLAS");
#endif
}

template <>
void gemm<double>(bool transA, bool transB, int m, int n, int k, double alpha, const double* a, int lda,
                  const double* b, int ldb, double beta, double* c, int ldc) {
#if HH_HAVE_BLAS
  const char ta = transA ? 'T' : 'N', tb = transB ? 'T' : 'N';
  dgemm_(&tb, &ta, &n, &m, &k, &alpha, b, &ldb, a, &lda, &beta, c, &ldc);
#else
  throw std::logic_error("blas::gemm: built without BLAS");
#endif
}

#if HH_HAVE_BLAS
namespace {
// OpenBLAS's thread count is one setting for the whole process, so the scopes of all threads
// share one count of open scopes: the first in saves the setting and sets 1, the last out puts
// the saved setting back.
std::mutex scopeMutex;
int openScopes = 0;    // guarded by scopeMutex
int savedThreads = 0;  // guarded by scopeMutex
}  // namespace
#endif

SingleThreaded::SingleThreaded() {
#if HH_HAVE_BLAS
  if (!openblas_get_num_threads || !openblas_set_num_threads) return;
  const std::lock_guard<std::mutex> lock(scopeMutex);
  if (openScopes++ == 0) {
    savedThreads = openblas_get_num_threads();
    openblas_set_num_threads(1);
  }
  counted_ = true;
#endif
}

SingleThreaded::~SingleThreaded() {
#if HH_HAVE_BLAS
  if (!counted_) return;
  const std::lock_guard<std::mutex> lock(scopeMutex);
  if (--openScopes == 0 && savedThreads > 0) openblas_set_num_threads(savedThreads);
#endif
}

}  // namespace hh::attn::blas
