// The fused distillation-loss kernel (engine/cuda/hh_distill_loss.cu) and its Torch wrapper on the
// CPU, under the host emulation of CUDA (tests/support/cuda_emulation), with the GPU suite's cases
// (distill_loss_cases.h): every row term and both feature gradients against fp64, fp32 and bf16,
// causal and not, lengths on both sides of the kernels' tiles (32 rows in fp32, 64 in bf16),
// strided inputs, warps in both orders. What it cannot check: fragment layouts, timing, speed.
#include <cuda_runtime.h>  // the emulation's: hh_emu::setWarpOrder

#include "tests/engine/cuda/distill_loss_cases.h"

namespace test_distill_loss_emulated {

namespace {
using namespace hh::test::distill_loss_cases;
}  // namespace

class TestDistillLossEmulated : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void rowsAndGradientsFp32() {
    for (const int64_t t : {1, 31, 32, 33, 70}) compareRaw({1, 2, t, 32}, torch::kFloat);
    compareRaw({2, 1, 45, 32, false}, torch::kFloat);
    compareRaw({1, 1, 40, 64, true, true}, torch::kFloat);
  }

  void rowsAndGradientsBf16() {
    for (const int64_t t : {1, 63, 64, 65, 130}) compareRaw({1, 2, t, 32}, torch::kBFloat16);
    compareRaw({1, 1, 100, 32, false}, torch::kBFloat16);
    compareRaw({1, 1, 70, 64, true, true}, torch::kBFloat16);
  }

  void lastWarpFirst() {
    // A block barrier missing between an early warp's write and a later warp's read shows here.
    hh_emu::setWarpOrder(hh_emu::WarpOrder::LastToFirst);
    compareRaw({1, 1, 70, 32}, torch::kFloat);
    compareRaw({1, 1, 130, 32}, torch::kBFloat16);
    hh_emu::setWarpOrder(hh_emu::WarpOrder::FirstToLast);
  }

  void wrapperMatchesAutograd() {
    // The normaliser's gradient (autograd through den) joined to the kernels'.
    compareWrapper({2, 2, 50, 32}, torch::kFloat);
    compareWrapper({1, 2, 40, 32, false}, torch::kFloat);
    compareWrapper({1, 2, 100, 32}, torch::kBFloat16);
  }

  void refusesWhatItCannotRun() {
    const auto q = torch::randn({1, 1, 8, 48});
    QVERIFY(!hh::cuda::fusedDistillLossAccepts(q, torch::randn({1, 1, 8, 96})));
    QVERIFY(!hh::cuda::fusedDistillLossAccepts(torch::randn({1, 1, 8, 32}), torch::randn({1, 1, 8, 48})));
    QVERIFY(hh::cuda::fusedDistillLossAccepts(torch::randn({1, 1, 8, 32}), torch::randn({1, 1, 8, 64})));
    bool threw = false;
    try {
      hh::cuda::fusedDistillLoss(q, q, torch::rand({1, 1, 8, 96}), torch::rand({1, 1, 8, 96}), 0.1, 1e-6, true);
    } catch (const std::invalid_argument& e) {
      threw = std::string(e.what()).find("D = 48") != std::string::npos;
    }
    QVERIFY(threw);
  }
};

HH_TEST_SUITE(TestDistillLossEmulated, "engine.cuda.distill_loss_emulated",
              &TestDistillLossEmulated::rowsAndGradientsFp32, &TestDistillLossEmulated::rowsAndGradientsBf16,
              &TestDistillLossEmulated::lastWarpFirst, &TestDistillLossEmulated::wrapperMatchesAutograd,
              &TestDistillLossEmulated::refusesWhatItCannotRun)

}  // namespace test_distill_loss_emulated

#if HH_HAVE_QTEST
#include "test_distill_loss_emulated.moc"
#endif
