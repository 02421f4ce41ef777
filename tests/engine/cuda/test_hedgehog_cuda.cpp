// The fused CUDA Hedgehog kernels (engine/cuda, issue 27) on a GPU against the engine's generic
// path run on the CPU in float64 (hedgehog_cuda_cases.h): forward, all five gradients, and the
// decode step, at lengths around the kernels' tiles (1, 63, 64, 65, 1000, 4097), D = 32, 64 and 128,
// fp32 and bf16; then the Torch wrapper and the dispatch policy. Built only with HH_CUDA_KERNELS=ON
// and HH_CUDA=ON (tests/CMakeLists.txt); skips without a GPU. The same cases run on the CPU under
// the CUDA emulation in every build without the kernels (test_hedgehog_cuda_emulated.cpp).
#include <torch/cuda.h>

#include "engine/cuda/hedgehog_cuda_torch.h"
#include "tests/engine/cuda/hedgehog_cuda_cases.h"

namespace test_hedgehog_cuda {

namespace {
using namespace hh::test::cuda_cases;
bool haveGpu() { return torch::cuda::is_available(); }
}  // namespace

class TestHedgehogCuda : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void initTestCase() {
    if (!haveGpu()) QSKIP("no CUDA device");
  }

  void matchesReferenceFp32() {
    if (!haveGpu()) QSKIP("no CUDA device");
    compareLengths(torch::kFloat);
  }

  void matchesReferenceBf16() {
    if (!haveGpu()) QSKIP("no CUDA device");
    compareLengths(torch::kBFloat16);
  }

  void pipelinedMatchesReference() {
    if (!haveGpu()) QSKIP("no CUDA device");
    compareLengths(torch::kFloat, Kernels::Pipelined);
    compareLengths(torch::kBFloat16, Kernels::Pipelined);
  }

  void chunkedMatchesReference() {
    if (!haveGpu()) QSKIP("no CUDA device");
    compareLengths(torch::kFloat, Kernels::Chunked);
    compareLengths(torch::kBFloat16, Kernels::Chunked);
  }

  void clampedFeatures() {
    if (!haveGpu()) QSKIP("no CUDA device");
    compareClamped();
  }

  void nanRowsStayNan() {
    if (!haveGpu()) QSKIP("no CUDA device");
    compareNanRows();
  }

  void unalignedRows() {
    if (!haveGpu()) QSKIP("no CUDA device");
    compareUnaligned();
  }

  void moduleTakesTheKernelWithGradients() {
    // LinearAttention's chunked forward on CUDA goes through hedgehogCudaCausal (autograd
    // Function): output and weight gradient against the fp64 reference.
    if (!haveGpu()) QSKIP("no CUDA device");
    const hh::attn::ScopedFusedCudaPolicy always(hh::attn::FusedCudaPolicy::Always);  // B * H = 4 is small
    hh::attn::LinearAttentionConfig cfg;
    cfg.featureMap.heads = 2;
    cfg.featureMap.headDim = 64;
    hh::attn::LinearAttention la(cfg);
    la->to(torch::kCUDA);
    torch::manual_seed(7);
    const auto opt = torch::TensorOptions().device(torch::kCUDA);
    const auto q = torch::randn({2, 2, 200, 64}, opt) * 0.5, k = torch::randn({2, 2, 200, 64}, opt) * 0.5,
               v = torch::randn({2, 2, 200, 64}, opt), gy = torch::randn({2, 2, 200, 64}, opt);
    const auto y = la->forward(q, k, v, {}, hh::attn::AttentionForm::Chunked);
    y.backward(gy);
    const auto ref = reference(q, k, v, la->featureMap()->weight().detach(), la->featureMap()->bias().detach(), gy,
                               cfg.rule.eps);
    QVERIFY2(rel(y, ref.y) < 1e-4, ("y rel " + std::to_string(rel(y, ref.y))).c_str());
    const double gw = rel(la->featureMap()->weight().grad(), ref.gw);
    QVERIFY2(gw < 5e-4, ("gW rel " + std::to_string(gw)).c_str());
  }

  void kernelsPayWhereHeadsFillTheGpu() {
    // The Auto policy's measure: B * H * blocks per head against the multiprocessor count (an
    // H100 has 132). The two shapes of the benchmark sit on either side of it on any GPU with
    // between 13 and 512 multiprocessors.
    if (!haveGpu()) QSKIP("no CUDA device");
    const auto opt = torch::TensorOptions().device(torch::kCUDA).dtype(torch::kBFloat16);
    QCOMPARE(hh::cuda::hedgehogCudaBlocksPerHead(hh::cuda::DType::BF16, 128), 2);
    QCOMPARE(hh::cuda::hedgehogCudaBlocksPerHead(hh::cuda::DType::F32, 64), 2);
    QVERIFY(!hh::cuda::hedgehogCudaFillsDevice(torch::zeros({1, 12, 16, 64}, opt)));
    QVERIFY(hh::cuda::hedgehogCudaFillsDevice(torch::zeros({8, 32, 16, 128}, opt)));
    const int64_t available = hh::cuda::deviceBytesAvailable(torch::zeros({1}, opt));
    QVERIFY2(available > (int64_t(1) << 30), std::to_string(available).c_str());  // at least 1 GiB on any GPU that runs these
  }

  void stepMatchesGenericSteps() {
    if (!haveGpu()) QSKIP("no CUDA device");
    compareSteps();
  }
};

HH_TEST_SUITE(TestHedgehogCuda, "engine.cuda.hedgehog_cuda", &TestHedgehogCuda::initTestCase,
              &TestHedgehogCuda::matchesReferenceFp32, &TestHedgehogCuda::matchesReferenceBf16,
              &TestHedgehogCuda::pipelinedMatchesReference, &TestHedgehogCuda::chunkedMatchesReference,
              &TestHedgehogCuda::clampedFeatures, &TestHedgehogCuda::nanRowsStayNan, &TestHedgehogCuda::unalignedRows,
              &TestHedgehogCuda::moduleTakesTheKernelWithGradients, &TestHedgehogCuda::kernelsPayWhereHeadsFillTheGpu,
              &TestHedgehogCuda::stepMatchesGenericSteps)

}  // namespace test_hedgehog_cuda

#if HH_HAVE_QTEST
#include "test_hedgehog_cuda.moc"
#endif
