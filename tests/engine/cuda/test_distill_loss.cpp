// The fused distillation-loss kernel (engine/cuda/hh_distill_loss.cu) on a GPU against the loss's
// definition in float64 on the CPU (distill_loss_cases.h): every row term and both feature
// gradients, fp32 and bf16, D = 32, 64 and 128, lengths around the kernels' tiles up to 1000; the
// Torch wrapper with its autograd; and jobs::distillationLoss on feature captures, fused against
// the weights it makes itself. Built only with HH_CUDA_KERNELS=ON and HH_CUDA=ON; skips without a
// GPU. The same cases run on the CPU under the CUDA emulation (test_distill_loss_emulated.cpp).
#include <torch/cuda.h>

#include "engine/attention/softmax_attention.h"
#include "engine/jobs/distillation_loss.h"
#include "tests/engine/cuda/distill_loss_cases.h"

namespace test_distill_loss {

namespace {
using namespace hh::test::distill_loss_cases;
bool haveGpu() {
  return torch::cuda::is_available();
}
}  // namespace

class TestDistillLoss : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void initTestCase() {
    if (!haveGpu()) QSKIP("no CUDA device");
  }

  void rowsAndGradients() {
    if (!haveGpu()) QSKIP("no CUDA device");
    for (const auto dtype : {torch::kFloat, torch::kBFloat16}) {
      // lengths(): up to 130 under HH_CUDA_TEST_QUICK (the sanitizers), else to 4097; the fp64
      // reference holds B H T^2 doubles a matrix, so past 1000 one head.
      for (const int64_t t : lengths()) compareRaw({t > 1000 ? 1 : 2, t > 1000 ? 1 : 3, t, 64}, dtype);
      compareRaw({1, 2, 300, 32, false}, dtype);
      compareRaw({1, 2, 257, 128, true, true}, dtype);
    }
  }

  void wrapperMatchesAutograd() {
    if (!haveGpu()) QSKIP("no CUDA device");
    compareWrapper({2, 4, 200, 64}, torch::kFloat);
    compareWrapper({2, 4, 200, 64}, torch::kBFloat16);
    compareWrapper({1, 2, 150, 128, false}, torch::kBFloat16);
  }

  // jobs::distillationLoss on one layer's feature capture (through the fused kernel) against the
  // same layer's materialised weights (the capture path without features): loss and gradients.
  void distillationLossTakesTheKernel() {
    if (!haveGpu()) QSKIP("no CUDA device");
    const auto in = makeInputs({2, 4, 300, 64}, torch::kFloat);
    for (const std::string loss : {"soft_ce", "kl"}) {
      hh::models::LayerCapture c;
      c.queries = in.q;  // softmaxWeights' 1/sqrt(D) is the scale distillationLoss passes the kernel
      c.keys = in.k;
      c.normaliserEps = 1e-6;
      auto fq = in.fq.clone().requires_grad_(true), fk = in.fk.clone().requires_grad_(true);
      c.queryFeatures = fq;
      c.keyFeatures = fk;
      QVERIFY(hh::cuda::fusedDistillLossAccepts(c.queries, fq));
      const auto fused = hh::jobs::distillationLoss({c}, true, {}, loss, 0.0);
      fused.backward();
      const auto gq = fq.grad().clone(), gk = fk.grad().clone();
      // The same through materialised weights (the capture path without features).
      hh::models::LayerCapture w;
      w.softmaxWeights = hh::attn::softmaxWeights(in.q, in.k, true, {});
      auto fq2 = in.fq.clone().requires_grad_(true), fk2 = in.fk.clone().requires_grad_(true);
      hh::attn::RuleOptions rule;
      rule.eps = 1e-6;
      w.linearWeights = hh::attn::linearWeights(fq2, fk2, {}, rule);
      const auto composed = hh::jobs::distillationLoss({w}, true, {}, loss, 0.0);
      composed.backward();
      const double lossErr =
          std::abs(fused.item<double>() - composed.item<double>()) / std::abs(composed.item<double>());
      qInfo("%s: fused %.7g, materialised %.7g", loss.c_str(), fused.item<double>(), composed.item<double>());
      QVERIFY(lossErr < 1e-4);
      QVERIFY(rel(gq, fq2.grad().cpu().to(torch::kDouble)) < 1e-4);
      QVERIFY(rel(gk, fk2.grad().cpu().to(torch::kDouble)) < 1e-4);
    }
  }
};

HH_TEST_SUITE(TestDistillLoss, "engine.cuda.distill_loss", &TestDistillLoss::initTestCase,
              &TestDistillLoss::rowsAndGradients, &TestDistillLoss::wrapperMatchesAutograd,
              &TestDistillLoss::distillationLossTakesTheKernel)

}  // namespace test_distill_loss

#if HH_HAVE_QTEST
#include "test_distill_loss.moc"
#endif
