// The fused CPU softmax attention (inference) against the fp64 brute force of the whole matrix, at
// lengths around and not dividing its 64-row blocks, causal and not, fewer or more keys than
// queries, value widths other than D, fp32 and bf16; what it refuses; and that
// softmaxAttentionInBlocks hands it what it takes.
#include <torch/types.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <stdexcept>

#include "engine/attention/fused_softmax_cpu.h"
#include "engine/attention/softmax_attention.h"
#include "tests/support/hh_test.h"

namespace test_fused_softmax_cpu {

namespace {

struct Case {
  int64_t tq, tk, dim, valueDim;
  bool causal;
};

bool kernelAvailable() {
  const auto one = torch::zeros({1, 1, 1, 8});
  return hh::attn::fusedSoftmaxAttentionCpuAccepts(one, one, one, {});
}

}  // namespace

class TestFusedSoftmaxCpu : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void matchesBruteForce() {
    if (!kernelAvailable()) QSKIP("built without BLAS");
    for (const auto type : {torch::kFloat, torch::kBFloat16}) {
      for (const Case& c : {Case{1, 1, 8, 8, true}, Case{63, 63, 8, 8, true}, Case{64, 64, 16, 5, true},
                            Case{65, 65, 8, 8, false}, Case{130, 130, 32, 32, true}, Case{300, 300, 8, 12, true},
                            Case{7, 200, 16, 16, false}, Case{150, 3, 8, 8, false}}) {
        torch::manual_seed(c.tq * 5 + c.tk + (c.causal ? 1 : 0));
        const auto q = (torch::randn({2, 3, c.tq, c.dim}) * 2).to(type),
                   k = (torch::randn({2, 3, c.tk, c.dim}) * 2).to(type);
        const auto v = torch::randn({2, 3, c.tk, c.valueDim}).to(type);
        const auto want =
            hh::attn::softmaxAttention(q.to(torch::kDouble), k.to(torch::kDouble), v.to(torch::kDouble), c.causal);
        const auto got = hh::attn::fusedSoftmaxAttentionCpu(q, k, v, c.causal);
        HH_COMPARE_DTYPE(got.scalar_type(), type);
        QCOMPARE(got.sizes(), want.sizes());
        const double err = (got.to(torch::kDouble) - want).abs().max().item<double>() / want.abs().max().item<double>();
        char what[120];
        std::snprintf(what, sizeof what, "%s Tq=%lld Tk=%lld D=%lld%s: relative error %.2g",
                      type == torch::kFloat ? "fp32" : "bf16", static_cast<long long>(c.tq),
                      static_cast<long long>(c.tk), static_cast<long long>(c.dim), c.causal ? " causal" : "", err);
        qInfo("%s", what);
        // fp32 to its rounding; bf16 inputs are exact in fp32, the output is rounded to bf16.
        QVERIFY2(err < (type == torch::kFloat ? 1e-5 : 1e-2), what);
      }
    }
  }

  void refusesWhatItCannotTake() {
    if (!kernelAvailable()) QSKIP("built without BLAS");
    const auto q = torch::randn({1, 2, 5, 8});
    QVERIFY(!hh::attn::fusedSoftmaxAttentionCpuAccepts(q, q, q, torch::ones({1, 5})));          // a key mask
    QVERIFY(!hh::attn::fusedSoftmaxAttentionCpuAccepts(q.to(torch::kDouble), q, q, {}));        // fp64
    QVERIFY(!hh::attn::fusedSoftmaxAttentionCpuAccepts(q.clone().requires_grad_(), q, q, {}));  // a gradient
    {
      at::NoGradGuard noGrad;  // ... unless nothing records one
      QVERIFY(!hh::attn::fusedSoftmaxAttentionCpuAccepts(q, q, q, torch::ones({1, 5})));
    }
    HH_VERIFY_THROWS(std::invalid_argument,
                     hh::attn::fusedSoftmaxAttentionCpu(q, q.narrow(2, 0, 4), q.narrow(2, 0, 4), true));
    HH_VERIFY_THROWS(std::invalid_argument, hh::attn::fusedSoftmaxAttentionCpu(q, q.narrow(3, 0, 4), q, false));
  }

  void nonFiniteInputsStayVisible() {
    if (!kernelAvailable()) QSKIP("built without BLAS");
    auto q = torch::randn({1, 2, 70, 8});
    q[0][1][40][2] = std::numeric_limits<float>::quiet_NaN();
    const auto y = hh::attn::fusedSoftmaxAttentionCpu(q, q, torch::randn({1, 2, 70, 8}), true);
    QVERIFY(y[0][1][40].isnan().all().item<bool>());  // the row that reads it
    QVERIFY(y[0][0].isfinite().all().item<bool>());   // another head
  }

  // softmaxAttentionInBlocks takes the fused kernel for what it accepts (equal to the bit), and
  // its own blocks for the rest (a key mask here).
  void blocksTakeTheKernel() {
    if (!kernelAvailable()) QSKIP("built without BLAS");
    torch::manual_seed(9);
    const auto q = torch::randn({2, 2, 100, 16}), k = torch::randn({2, 2, 100, 16}), v = torch::randn({2, 2, 100, 16});
    QVERIFY(torch::equal(hh::attn::softmaxAttentionInBlocks(q, k, v, true),
                         hh::attn::fusedSoftmaxAttentionCpu(q, k, v, true)));
    const auto mask = torch::ones({2, 100}, torch::kBool);
    const auto masked = hh::attn::softmaxAttentionInBlocks(q, k, v, true, mask);
    QVERIFY(!torch::equal(masked, hh::attn::fusedSoftmaxAttentionCpu(q, k, v, true)));  // other rounding: its own path
    QVERIFY((masked - hh::attn::fusedSoftmaxAttentionCpu(q, k, v, true)).abs().max().item<double>() < 1e-5);
  }
};

HH_TEST_SUITE(TestFusedSoftmaxCpu, "engine.attention.fused_softmax_cpu", &TestFusedSoftmaxCpu::matchesBruteForce,
              &TestFusedSoftmaxCpu::refusesWhatItCannotTake, &TestFusedSoftmaxCpu::nonFiniteInputsStayVisible,
              &TestFusedSoftmaxCpu::blocksTakeTheKernel)

}  // namespace test_fused_softmax_cpu

#if HH_HAVE_QTEST
#include "test_fused_softmax_cpu.moc"
#endif
