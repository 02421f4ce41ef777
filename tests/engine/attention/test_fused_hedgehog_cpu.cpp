// The fused CPU Hedgehog kernel against the generic path (feature map + chunked form) and the
// fp64 brute force, at lengths around and not dividing the chunk size and the 128-row feature
// blocks, with a trained-looking MLP and non-contiguous inputs; inputs that do not fit are refused.
#include <torch/types.h>

#include "engine/attention/fused_hedgehog_cpu.h"
#include "engine/attention/linear_attention.h"
#include "engine/attention/reference.h"
#include "tests/support/hh_test.h"

namespace test_fused_hedgehog_cpu {

namespace {

// A Hedgehog layer of `heads` heads of dim 16, chunk 32, its feature map moved off the identity
// start by a random W and b (drawn from Torch's generator as seeded by the caller).
hh::attn::LinearAttention randomHedgehogLayer(int64_t heads) {
  hh::attn::LinearAttentionConfig cfg;
  cfg.featureMap.heads = heads;
  cfg.featureMap.headDim = 16;
  cfg.rule.chunkSize = 32;
  hh::attn::LinearAttention la(cfg);
  at::NoGradGuard g;
  la->featureMap()->weight().add_(torch::randn({heads, 16, 16}) * 0.2);
  la->featureMap()->bias().add_(torch::randn({heads, 16}) * 0.1);
  return la;
}

}  // namespace

class TestFusedHedgehogCpu : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void matchesBruteForce() {
    if (!hh::attn::fusedHedgehogAvailable()) QSKIP("built without BLAS");
    auto la = randomHedgehogLayer(3);
    const auto cfg = la->config();
    // Around the chunk (32) and around the 128-row blocks the features are computed in.
    for (const int64_t t : {1, 31, 32, 33, 100, 127, 128, 129, 300}) {
      torch::manual_seed(t);
      const auto q = torch::randn({2, 3, t, 16}) * 0.5, k = torch::randn({2, 3, t, 16}) * 0.5, v = torch::randn({2, 3, t, 16});
      torch::Tensor fused, generic;
      {
        at::NoGradGuard g;
        fused = la->forward(q, k, v);  // takes the fused kernel
        generic = hh::attn::linearChunked(la->featureMap()->forward(q), la->featureMap()->forward(k), v, {}, cfg.rule);
      }
      torch::Tensor ref;
      {
        at::NoGradGuard g;
        const auto q64 = q.to(torch::kDouble), k64 = k.to(torch::kDouble);
        ref = hh::attn::referenceLinearAttention(la->featureMap()->forward(q64), la->featureMap()->forward(k64),
                                                 v.to(torch::kDouble), {}, cfg.rule);
      }
      const double scale = ref.abs().max().item<double>();
      const double relFused = (fused.to(torch::kDouble) - ref).abs().max().item<double>() / scale;
      const double relGeneric = (generic.to(torch::kDouble) - ref).abs().max().item<double>() / scale;
      QVERIFY2(relFused < 1e-5, ("T=" + std::to_string(t) + " fused rel " + std::to_string(relFused)).c_str());
      QVERIFY2(relGeneric < 1e-5, ("T=" + std::to_string(t) + " generic rel " + std::to_string(relGeneric)).c_str());
    }
  }

  void nonContiguousInputsMatchBruteForce() {
    // q, k, v laid out [B,T,H,D] and viewed as [B,H,T,D] (as attention layers produce them).
    if (!hh::attn::fusedHedgehogAvailable()) QSKIP("built without BLAS");
    torch::manual_seed(17);
    auto la = randomHedgehogLayer(2);
    const auto cfg = la->config();
    at::NoGradGuard g;
    const auto q = torch::randn({2, 300, 2, 16}).transpose(1, 2) * 0.5,
               k = torch::randn({2, 300, 2, 16}).transpose(1, 2) * 0.5;
    const auto v = torch::randn({2, 300, 2, 16}).transpose(1, 2);
    QVERIFY(!q.is_contiguous());
    const auto fused = la->forward(q, k, v);
    const auto ref = hh::attn::referenceLinearAttention(la->featureMap()->forward(q.to(torch::kDouble)),
                                                        la->featureMap()->forward(k.to(torch::kDouble)),
                                                        v.to(torch::kDouble), {}, cfg.rule);
    const double rel = (fused.to(torch::kDouble) - ref).abs().max().item<double>() / ref.abs().max().item<double>();
    QVERIFY2(rel < 1e-5, ("rel " + std::to_string(rel)).c_str());
  }

  void mismatchedShapesAreRefused() {
    // Inputs that do not fit the layer or each other are refused with the generic path's error,
    // never read past their ends by the fused kernels.
    if (!hh::attn::fusedHedgehogAvailable()) QSKIP("built without BLAS");
    hh::attn::LinearAttentionConfig cfg;
    cfg.featureMap.heads = 2;
    cfg.featureMap.headDim = 16;
    hh::attn::LinearAttention la(cfg);
    at::NoGradGuard g;
    const auto one = [](int64_t b, int64_t h) { return torch::randn({b, h, 1, 16}); };
    auto state = la->initialState(1);
    const auto wide = one(1, 64);
    HH_VERIFY_THROWS_WITH(la->step(state, wide, wide, wide), "feature map has 2 heads, input has 64");
    QCOMPARE(state.position, int64_t(0));
    // Batch-2 inputs on a batch-1 state: the generic step broadcasts the state, and the fused step
    // leaves such a state to it rather than reading past the state's end.
    const auto twoRows = one(2, 2);
    auto generic = la->initialState(1);
    const auto want =
        hh::attn::linearStep(generic, la->featureMap()->forward(twoRows).select(2, 0),
                             la->featureMap()->forward(twoRows).select(2, 0), twoRows.select(2, 0), {}, cfg.rule);
    const auto got = la->step(state, twoRows, twoRows, twoRows).select(2, 0);
    QVERIFY(torch::allclose(got, want, 1e-5, 1e-6));
    QCOMPARE(state.S.sizes(), generic.S.sizes());
    const auto q = torch::randn({1, 2, 200, 16}), v = torch::randn({1, 2, 200, 16}),
               shortK = torch::randn({1, 2, 50, 16});
    HH_VERIFY_THROWS_WITH(la->forward(q, shortK, v), "differ");
    // The kernels themselves check what they are given.
    const auto w = la->featureMap()->weight(), b = la->featureMap()->bias();
    HH_VERIFY_THROWS(std::invalid_argument, hh::attn::fusedHedgehogCausalForward(q, shortK, v, w, b, 64, 1e-6));
    HH_VERIFY_THROWS(std::invalid_argument,
                     hh::attn::fusedHedgehogCausalForward(q, q, v, w.narrow(0, 0, 1), b.narrow(0, 0, 1), 64, 1e-6));
    auto S = torch::zeros({1, 2, 32, 16}), z = torch::zeros({1, 2, 32});
    const auto x = torch::randn({1, 2, 16});
    HH_VERIFY_THROWS(std::exception,
                     hh::attn::fusedHedgehogStep(S, z, torch::randn({1, 64, 16}), torch::randn({1, 64, 16}),
                                                 torch::randn({1, 64, 16}), w, b, 1e-6));
    auto shortZ = torch::zeros({1, 2, 16});
    HH_VERIFY_THROWS(std::exception, hh::attn::fusedHedgehogStep(S, shortZ, x, x, x, w, b, 1e-6));
    HH_VERIFY_THROWS(std::exception, hh::attn::fusedHedgehogStep(S, z, x, x, x, w.narrow(0, 0, 1), b, 1e-6));
    QVERIFY(S.abs().max().item<double>() == 0.0);  // nothing written
  }

  void fusedStepMatchesGenericSteps() {
    // 40 decoding steps through LinearAttention::step (the fused step) against linearStep on the
    // module's features (generic), fp32, relative 1e-5 on outputs and state.
    if (!hh::attn::fusedHedgehogAvailable()) QSKIP("built without BLAS");
    hh::attn::LinearAttentionConfig cfg;
    cfg.featureMap.heads = 3;
    cfg.featureMap.headDim = 16;
    hh::attn::LinearAttention la(cfg);
    at::NoGradGuard g;
    la->featureMap()->weight().add_(torch::randn({3, 16, 16}) * 0.2);
    la->featureMap()->bias().add_(torch::randn({3, 16}) * 0.1);
    auto fusedState = la->initialState(2), genericState = la->initialState(2);
    for (int t = 0; t < 40; ++t) {
      const auto q = torch::randn({2, 3, 1, 16}) * 0.5, k = torch::randn({2, 3, 1, 16}) * 0.5, v = torch::randn({2, 3, 1, 16});
      const auto fused = la->step(fusedState, q, k, v).select(2, 0);
      const auto generic = hh::attn::linearStep(genericState, la->featureMap()->forward(q).select(2, 0),
                                                la->featureMap()->forward(k).select(2, 0), v.select(2, 0), {}, cfg.rule);
      const double rel = ((fused - generic).abs().max() / generic.abs().max()).item<double>();
      QVERIFY2(rel < 1e-5, ("step " + std::to_string(t) + " rel " + std::to_string(rel)).c_str());
    }
    QCOMPARE(fusedState.position, int64_t(40));
    QVERIFY(((fusedState.S - genericState.S).abs().max() / genericState.S.abs().max()).item<double>() < 1e-5);
    QVERIFY(((fusedState.z - genericState.z).abs().max() / genericState.z.abs().max()).item<double>() < 1e-5);
  }

  void clampedFeaturesAgreeAndStayFinite() {
    // A map whose u = Wx + b runs far past the clamp (+-30): the fused prefill and the fused step
    // clamp as the module does, so they agree with the generic path on its clamped features, and
    // everything stays finite where exp(u) would overflow fp32.
    if (!hh::attn::fusedHedgehogAvailable()) QSKIP("built without BLAS");
    hh::attn::LinearAttentionConfig cfg;
    cfg.featureMap.heads = 2;
    cfg.featureMap.headDim = 8;
    cfg.rule.chunkSize = 16;
    hh::attn::LinearAttention la(cfg);
    at::NoGradGuard g;
    la->featureMap()->weight().mul_(25.0);
    torch::manual_seed(9);
    const auto q = torch::randn({1, 2, 37, 8}) * 3, k = torch::randn({1, 2, 37, 8}) * 3, v = torch::randn({1, 2, 37, 8});
    const auto fq = la->featureMap()->forward(q), fk = la->featureMap()->forward(k);
    QVERIFY(fq.max().item<double>() > 1e12);  // the clamp is reached
    const auto fused = la->forward(q, k, v);
    const auto generic = hh::attn::linearChunked(fq, fk, v, {}, cfg.rule);
    QVERIFY(torch::isfinite(fused).all().item<bool>());
    const double rel = ((fused - generic).abs().max() / generic.abs().max()).item<double>();
    QVERIFY2(rel < 1e-4, ("prefill rel " + std::to_string(rel)).c_str());
    auto fusedState = la->initialState(1), genericState = la->initialState(1);
    for (int t = 0; t < 10; ++t) {
      const auto qt = q.narrow(2, t, 1), kt = k.narrow(2, t, 1), vt = v.narrow(2, t, 1);
      const auto a = la->step(fusedState, qt, kt, vt).select(2, 0);
      const auto b = hh::attn::linearStep(genericState, fq.narrow(2, t, 1).select(2, 0), fk.narrow(2, t, 1).select(2, 0),
                                          vt.select(2, 0), {}, cfg.rule);
      QVERIFY(torch::isfinite(a).all().item<bool>());
      const double r = ((a - b).abs().max() / b.abs().max()).item<double>();
      QVERIFY2(r < 1e-4, ("step " + std::to_string(t) + " rel " + std::to_string(r)).c_str());
    }
  }

  void gradientsStillFlowThroughGenericPath() {
    hh::attn::LinearAttentionConfig cfg;
    cfg.featureMap.heads = 2;
    cfg.featureMap.headDim = 8;
    hh::attn::LinearAttention la(cfg);
    const auto q = torch::randn({1, 2, 20, 8}), k = torch::randn({1, 2, 20, 8}), v = torch::randn({1, 2, 20, 8});
    la->forward(q, k, v).sum().backward();
    QVERIFY(la->featureMap()->weight().grad().defined());
    QVERIFY(la->featureMap()->weight().grad().abs().sum().item<double>() > 0.0);
  }

  void fusedCudaPolicyIsScoped() {
    // The process-wide choice of the CUDA kernels (docs/gpu.md): a scope sets it and puts the
    // previous one back, nested scopes too.
    using hh::attn::FusedCudaPolicy;
    const auto before = hh::attn::fusedCudaPolicy();
    {
      const hh::attn::ScopedFusedCudaPolicy never(FusedCudaPolicy::Never);
      QVERIFY(hh::attn::fusedCudaPolicy() == FusedCudaPolicy::Never);
      {
        const hh::attn::ScopedFusedCudaPolicy always(FusedCudaPolicy::Always);
        QVERIFY(hh::attn::fusedCudaPolicy() == FusedCudaPolicy::Always);
      }
      QVERIFY(hh::attn::fusedCudaPolicy() == FusedCudaPolicy::Never);
    }
    QVERIFY(hh::attn::fusedCudaPolicy() == before);
  }
};

HH_TEST_SUITE(TestFusedHedgehogCpu, "engine.attention.fused_hedgehog_cpu", &TestFusedHedgehogCpu::matchesBruteForce,
              &TestFusedHedgehogCpu::nonContiguousInputsMatchBruteForce,
              &TestFusedHedgehogCpu::mismatchedShapesAreRefused, &TestFusedHedgehogCpu::fusedStepMatchesGenericSteps,
              &TestFusedHedgehogCpu::clampedFeaturesAgreeAndStayFinite,
              &TestFusedHedgehogCpu::gradientsStillFlowThroughGenericPath,
              &TestFusedHedgehogCpu::fusedCudaPolicyIsScoped)

}  // namespace test_fused_hedgehog_cpu

#if HH_HAVE_QTEST
#include "test_fused_hedgehog_cpu.moc"
#endif
