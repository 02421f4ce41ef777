// The fused CPU distillation loss against the fp64 brute force (both [B,H,T,T] weights made
// whole, autograd for the gradients), at lengths around and not dividing its 64-row blocks, causal
// and not, fp32 and bf16 inputs; and the vector exp and log it is built on against std::exp/log.
#include <torch/types.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include "engine/attention/fused_distill_loss_cpu.h"
#include "engine/attention/vector_math.h"
#include "tests/support/hh_test.h"

namespace test_fused_distill_loss_cpu {

namespace {

struct Case {
  int64_t batch, heads, length, dim, features;
  bool causal;
};

struct Inputs {
  torch::Tensor q, k, fq, fk;  // fq, fk leaves that require grad
};

// Teacher q, k with peaked softmax rows; positive features with a spread of magnitudes, as the
// Hedgehog map's [exp(u), exp(-u)] give.
Inputs inputsFor(const Case& c, torch::ScalarType type) {
  torch::manual_seed(c.length * 7 + c.dim + (c.causal ? 1 : 0));
  const auto shape = std::vector<int64_t>{c.batch, c.heads, c.length, c.dim};
  const auto fshape = std::vector<int64_t>{c.batch, c.heads, c.length, c.features};
  Inputs in;
  in.q = (torch::randn(shape) * 2.0).to(type);
  in.k = (torch::randn(shape) * 2.0).to(type);
  in.fq = torch::exp(torch::randn(fshape) * 0.7).to(type).requires_grad_();
  in.fk = torch::exp(torch::randn(fshape) * 0.7).to(type).requires_grad_();
  return in;
}

struct Reference {
  double crossEntropy, negEntropy;
  torch::Tensor gfq, gfk;  // of crossEntropy
};

// fp64 brute force of the terms fusedDistillLossCpu computes (its header has the formulas).
Reference bruteForce(const Inputs& in, bool causal, double eps) {
  const auto q = in.q.to(torch::kDouble), k = in.k.to(torch::kDouble);
  const auto fq = in.fq.detach().to(torch::kDouble).requires_grad_(),
             fk = in.fk.detach().to(torch::kDouble).requires_grad_();
  const int64_t t = q.size(2);
  const auto valid = causal ? torch::ones({t, t}, torch::kBool).tril() : torch::ones({t, t}, torch::kBool);
  const auto scores = torch::matmul(q, k.transpose(-1, -2)) / std::sqrt(double(q.size(3)));
  const auto p = torch::softmax(scores.masked_fill(valid.logical_not(), -INFINITY), -1);  // [B,H,T,T]
  const auto s = torch::matmul(fq, fk.transpose(-1, -2)).masked_fill(valid.logical_not(), 0.0);
  const auto a = s / (s.sum(-1, true) + eps);
  const double rows = double(q.size(0)) * double(t);
  const auto crossEntropy = -(p * torch::log(a + 1e-10)).sum() / rows;
  crossEntropy.backward();
  const auto negEntropy = torch::where(p > 0, p * torch::log(p), torch::zeros_like(p)).sum() / rows;
  return {crossEntropy.item<double>(), negEntropy.item<double>(), fq.grad(), fk.grad()};
}

double relativeError(const torch::Tensor& got, const torch::Tensor& want) {
  return (got.to(torch::kDouble) - want).abs().max().item<double>() / want.abs().max().item<double>();
}

}  // namespace

class TestFusedDistillLossCpu : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void matchesBruteForce() {
    if (!hh::attn::fusedDistillLossCpuAvailable()) QSKIP("built without BLAS");
    const double eps = 1e-6;
    for (const auto type : {torch::kFloat, torch::kBFloat16}) {
      for (const Case& c : {Case{2, 3, 2, 8, 16, true}, Case{2, 3, 7, 8, 16, true}, Case{2, 3, 63, 8, 16, true},
                            Case{2, 3, 64, 8, 16, true}, Case{2, 3, 65, 8, 16, false}, Case{1, 2, 130, 32, 64, true},
                            Case{1, 2, 130, 32, 64, false}, Case{1, 1, 300, 16, 20, true}}) {
        const auto in = inputsFor(c, type);
        const auto ref = bruteForce(in, c.causal, eps);
        const auto got =
            hh::attn::fusedDistillLossCpu(in.q, in.k, in.fq, in.fk, 1.0 / std::sqrt(double(c.dim)), eps, c.causal);
        got.crossEntropy.backward();
        HH_COMPARE_DTYPE(in.fq.grad().scalar_type(), type);
        const double ce = std::abs(got.crossEntropy.item<double>() - ref.crossEntropy) / std::abs(ref.crossEntropy);
        const double ne =
            std::abs(got.negEntropy.item<double>() - ref.negEntropy) / std::max(1e-3, std::abs(ref.negEntropy));
        const double gq = relativeError(in.fq.grad(), ref.gfq), gk = relativeError(in.fk.grad(), ref.gfk);
        char what[160];
        std::snprintf(what, sizeof what, "%s T=%lld D=%lld%s: ce %.2g, -H %.2g, gfq %.2g, gfk %.2g",
                      type == torch::kFloat ? "fp32" : "bf16", static_cast<long long>(c.length),
                      static_cast<long long>(c.dim), c.causal ? " causal" : "", ce, ne, gq, gk);
        qInfo("%s", what);
        // The kernel computes in fp32 from the inputs as given (bf16 inputs are exact in fp32), so
        // the fp32 tolerance holds for both; the gradients of bf16 features are rounded to bf16.
        const double gradTolerance = type == torch::kFloat ? 1e-4 : 1e-2;
        QVERIFY2(ce < 1e-4 && ne < 1e-4 && gq < gradTolerance && gk < gradTolerance, what);
      }
    }
  }

  // One key per row: p = 1 and a = s / (s + eps), so the loss is log(1 + eps / s), about eps / s,
  // a cancellation in any fp32 computation: asked to be that small, not to match digits.
  void singleKeyRowsGiveTheEpsTerm() {
    if (!hh::attn::fusedDistillLossCpuAvailable()) QSKIP("built without BLAS");
    const auto in = inputsFor(Case{2, 3, 1, 8, 16, true}, torch::kFloat);
    const auto ref = bruteForce(in, true, 1e-6);
    const auto got = hh::attn::fusedDistillLossCpu(in.q, in.k, in.fq, in.fk, 0.35, 1e-6, true);
    qInfo("T=1: cross-entropy %.3g (fp64 %.3g), -H %.3g", got.crossEntropy.item<double>(), ref.crossEntropy,
          got.negEntropy.item<double>());
    QVERIFY(ref.crossEntropy > 0 && ref.crossEntropy < 1e-5);
    QVERIFY(std::abs(got.crossEntropy.item<double>() - ref.crossEntropy) < 1e-6);
    QVERIFY(got.negEntropy.item<double>() == 0.0);
  }

  void nonFiniteInputsGiveNonFiniteLoss() {
    if (!hh::attn::fusedDistillLossCpuAvailable()) QSKIP("built without BLAS");
    const Case c{1, 2, 70, 8, 16, true};
    for (const bool teacher : {false, true}) {
      auto in = inputsFor(c, torch::kFloat);
      {
        at::NoGradGuard noGrad;
        (teacher ? in.q : in.fk)[0][1][69][3] = std::numeric_limits<float>::quiet_NaN();
      }
      const auto got = hh::attn::fusedDistillLossCpu(in.q, in.k, in.fq, in.fk, 0.35, 1e-6, true);
      QVERIFY(!std::isfinite(got.crossEntropy.item<double>()));
    }
  }

  void refusesWhatItCannotTake() {
    const auto q = torch::randn({1, 2, 5, 8}), f = torch::rand({1, 2, 5, 16});
    QVERIFY(!hh::attn::fusedDistillLossCpuAccepts(q.to(torch::kDouble), f));
    QVERIFY(!hh::attn::fusedDistillLossCpuAccepts(q[0], f));
    HH_VERIFY_THROWS(std::invalid_argument,
                     hh::attn::fusedDistillLossCpu(q, q, f.narrow(2, 0, 4), f, 0.35, 1e-6, true));
    HH_VERIFY_THROWS(std::invalid_argument,
                     hh::attn::fusedDistillLossCpu(q.to(torch::kDouble), q, f, f, 0.35, 1e-6, true));
  }

  // exp8 and log8 against the fp64 library functions over their ranges, and at the edges.
  void vectorExpAndLogAreAccurate() {
    using hh::attn::vec::Floats8;
    double worstExp = 0.0, worstLog = 0.0;
    for (int i = 0; i < 200000; i += 8) {
      Floats8 x, y;
      for (int l = 0; l < 8; ++l) {
        x[l] = -87.3f + 176.0f * float(i + l + 1) / 200000.0f;                           // up to the clamp, 88.7
        y[l] = std::ldexp(1.0f + float((i + l) % 4096) / 4096.0f, (i + l) / 4096 - 25);  // 2^-25 .. 2^24
      }
      const Floats8 ex = hh::attn::vec::exp8(x), lg = hh::attn::vec::log8(y);
      for (int l = 0; l < 8; ++l) {
        worstExp = std::max(worstExp, std::abs(ex[l] / std::exp(double(x[l])) - 1.0));
        const double want = std::log(double(y[l]));
        worstLog = std::max(worstLog, std::abs(lg[l] - want) / std::max(1.0, std::abs(want)));
      }
    }
    qInfo("exp8 worst relative error %.3g, log8 worst error %.3g (relative where |log| > 1, absolute below)", worstExp,
          worstLog);
    QVERIFY(worstExp < 5e-7);
    QVERIFY(worstLog < 5e-7);
    const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
    const Floats8 edges = {0.0f, -1.0f, nan, inf, 1e-40f, 1.0f, 1e-10f, 3.4e38f};
    const Floats8 lg = hh::attn::vec::log8(edges);
    QVERIFY(lg[0] == -inf && std::isnan(lg[1]) && std::isnan(lg[2]) && lg[3] == inf && lg[5] == 0.0f);
    QVERIFY(std::abs(lg[4] - std::log(1e-40)) < 1e-4 && std::abs(lg[6] - std::log(1e-10)) < 1e-5);
    QVERIFY(std::abs(lg[7] - std::log(3.4e38)) < 1e-4);
    QVERIFY(std::isnan(hh::attn::vec::exp8(edges)[2]));
    // Just below the upper clamp exp is finite (2^128 is not a float, the result is); past it, exp(88.7).
    const Floats8 top = {88.38f, 88.5f, 88.6f, 88.7f, 88.72f, 100.0f, inf, 88.3f};
    const Floats8 ex = hh::attn::vec::exp8(top);
    for (int l = 0; l < 8; ++l) {
      const double want = std::exp(double(std::min(top[l], 88.7f)));
      QVERIFY2(std::abs(ex[l] / want - 1.0) < 5e-7, std::to_string(top[l]).c_str());
    }
  }
};

HH_TEST_SUITE(TestFusedDistillLossCpu, "engine.attention.fused_distill_loss_cpu",
              &TestFusedDistillLossCpu::matchesBruteForce, &TestFusedDistillLossCpu::singleKeyRowsGiveTheEpsTerm,
              &TestFusedDistillLossCpu::nonFiniteInputsGiveNonFiniteLoss,
              &TestFusedDistillLossCpu::refusesWhatItCannotTake, &TestFusedDistillLossCpu::vectorExpAndLogAreAccurate)

}  // namespace test_fused_distill_loss_cpu

#if HH_HAVE_QTEST
#include "test_fused_distill_loss_cpu.moc"
#endif
