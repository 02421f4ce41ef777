#include "engine/attention/blas_kernels.h"

#include <stdexcept>

#if HH_HAVE_BLAS
extern "C" {
void sgemm_(const char* transa, const char* transb, const int* m, const int* n, const int* k, const float* alpha,
            const float* a, const int* lda, const float* b, const int* ldb, const float* beta, float* c, const int* ldc);
void dgemm_(const char* transa, const char* transb, const int* m, const int* n, const int* k, const double* alpha,
            const double* a, const int* lda, const double* b, const int* ldb, const double* beta, double* c,
            const int* ldc);
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

}  // namespace hh::attn::blas
