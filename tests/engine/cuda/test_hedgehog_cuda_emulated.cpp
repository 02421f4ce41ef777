// The fused CUDA Hedgehog kernels (engine/cuda) on the CPU: the .cu files compiled as C++ against
// the host emulation of CUDA (tests/support/cuda_emulation; every CUDA thread a fiber, tensor-core
// tiles computed whole), with the GPU suite's cases (hedgehog_cuda_cases.h): forward, the five
// gradients and the decode step against the engine's generic path in float64, D = 32, 64 and 128,
// fp32 and bf16, lengths 1 to 130, strided inputs, rows past the clamp, NaN-poisoned outputs and
// NaN-filled shared memory; the measured kernels, the pipelined ones and the chunked ones. What
// this checks: indexing, masks, chunk order, barriers (each thread runs as far as it can before
// the next starts, so a missing barrier reads unwritten data) and epilogues. What it cannot: the
// real fragment layouts, timing, and speed (the GPU suite, test_hedgehog_cuda.cpp). Built in every
// build without HH_CUDA_KERNELS (tests/CMakeLists.txt).
#include <cuda_runtime.h>  // the emulation's: hh_emu::setWarpOrder

#include "tests/engine/cuda/hedgehog_cuda_cases.h"

namespace test_hedgehog_cuda_emulated {

namespace {
using namespace hh::test::cuda_cases;
}  // namespace

class TestHedgehogCudaEmulated : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void matchesReferenceFp32() { compareLengths(torch::kFloat); }

  void matchesReferenceBf16() { compareLengths(torch::kBFloat16); }

  void pipelinedMatchesReferenceFp32() { compareLengths(torch::kFloat, Kernels::Pipelined); }

  void pipelinedMatchesReferenceBf16() { compareLengths(torch::kBFloat16, Kernels::Pipelined); }

  void chunkedMatchesReferenceFp32() { compareLengths(torch::kFloat, Kernels::Chunked); }

  void chunkedMatchesReferenceBf16() { compareLengths(torch::kBFloat16, Kernels::Chunked); }

  void newKernelsSplitRows() {
    // B*T past 1024 rows: the weight gradient sums two splits of rows, and a split's last tile
    // straddles them (the lengths above stay within one split).
    // The chunked kernels on the same rows: segments of five chunks each, so their state passes
    // carry a state across chunks within a segment as well as from one segment to the next.
    compareCase({1, 1, 1100, 64, 4, false, Kernels::Pipelined}, torch::kBFloat16, false);
    compareCase({1, 1, 1100, 64, 4, false, Kernels::Chunked}, torch::kBFloat16, false);
  }

  void clampedFeatures() { compareClamped(); }
  void nanRowsStayNan() { compareNanRows(); }

  void unalignedRows() { compareUnaligned(); }

  void stepMatchesGenericSteps() { compareSteps(); }

  void lastWarpFirst() {
    // The warps in the other order: a block barrier missing between a write by an early warp and
    // a read by a later one shows here (the order above shows the converse).
    hh_emu::setWarpOrder(hh_emu::WarpOrder::LastToFirst);
    for (const auto dtype : {torch::kFloat, torch::kBFloat16})
      for (const int64_t d : {64, 128})
        for (const Kernels kernels : kAllKernels) compareCase({1, 2, 130, d, 2, false, kernels}, dtype, d == 64);
    compareSteps();
    hh_emu::setWarpOrder(hh_emu::WarpOrder::FirstToLast);
  }

  void refusesWhatItCannotRun() {
    hh::cuda::Problem p;
    p.batch = 1;
    p.heads = 1;
    p.length = 8;
    p.headDim = 96;
    QVERIFY(!hh::cuda::hedgehogCudaSupports(hh::cuda::DType::BF16, 96, 0));
    QVERIFY(!hh::cuda::hedgehogCudaSupports(hh::cuda::DType::BF16, 16, 0));
    QVERIFY(hh::cuda::hedgehogCudaSupports(hh::cuda::DType::BF16, 32, 0));
    QVERIFY(hh::cuda::hedgehogCudaSupports(hh::cuda::DType::BF16, 128, 0));
    hh::cuda::ForwardArgs a{};
    a.p = p;
    const auto s = hh::cuda::hedgehogCudaForward(a);
    QVERIFY(!s.ok() && s.message != nullptr);
  }
};

HH_TEST_SUITE(TestHedgehogCudaEmulated, "engine.cuda.hedgehog_cuda_emulated",
              &TestHedgehogCudaEmulated::matchesReferenceFp32, &TestHedgehogCudaEmulated::matchesReferenceBf16,
              &TestHedgehogCudaEmulated::pipelinedMatchesReferenceFp32,
              &TestHedgehogCudaEmulated::pipelinedMatchesReferenceBf16,
              &TestHedgehogCudaEmulated::chunkedMatchesReferenceFp32,
              &TestHedgehogCudaEmulated::chunkedMatchesReferenceBf16, &TestHedgehogCudaEmulated::newKernelsSplitRows,
              &TestHedgehogCudaEmulated::clampedFeatures, &TestHedgehogCudaEmulated::nanRowsStayNan,
              &TestHedgehogCudaEmulated::unalignedRows, &TestHedgehogCudaEmulated::stepMatchesGenericSteps,
              &TestHedgehogCudaEmulated::lastWarpFirst, &TestHedgehogCudaEmulated::refusesWhatItCannotRun)

}  // namespace test_hedgehog_cuda_emulated

#if HH_HAVE_QTEST
#include "test_hedgehog_cuda_emulated.moc"
#endif
