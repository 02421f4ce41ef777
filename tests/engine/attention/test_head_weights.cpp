// engine.attention.head_weights: LinearAttention::headWeights, one head's quadratic-form weights
// (what the inspector and the comparison show), against that head of the whole layer's weights:
//   - every rule and form a converted layer can have (additive Hedgehog, gated, delta, decay,
//     Mao's decay and delta, the window hybrid, exp(t x) with its shift, a map without parameters), fp64,
//     three heads with parameters perturbed so that no two heads agree: within 1e-12 of
//     weights(q, k, hidden).narrow(1, h, 1), and each head's map differs from head 0's;
//   - forEachHeadWeights hands over every head once, in order, each equal to headWeights (the
//     inspector's grid takes the layer's heads so, its features and gates computed once);
//   - a head outside [0, H) is refused with a message naming it.
#include <torch/torch.h>

#include <string>
#include <vector>

#include "engine/attention/linear_attention.h"
#include "tests/support/hh_test.h"

namespace test_head_weights {

namespace {

namespace a = hh::attn;

constexpr int64_t kHeads = 3, kHeadDim = 8, kHidden = 12, kLength = 21;

// A layer of `spec` (as plans write it) whose parameters are drawn away from their
// initialisation, so that each head's map and gates are its own.
a::LinearAttention layerOf(const std::string& spec) {
  auto config = *a::parseLayerAttention(spec);
  config.featureMap.heads = kHeads;
  config.featureMap.headDim = kHeadDim;
  config.rule.chunkSize = 8;
  a::LinearAttention layer(config, kHidden);
  layer->to(torch::kDouble);
  torch::NoGradGuard noGrad;
  for (auto& p : layer->parameters()) p.add_(torch::randn_like(p) * 0.3);
  return layer;
}

double maxError(const torch::Tensor& got, const torch::Tensor& want) {
  return (got - want).abs().max().item<double>();
}

}  // namespace

class TestHeadWeights : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void oneHeadEqualsThatHeadOfTheLayer() {
    for (const std::string spec : {"hedgehog", "hedgehog/gated", "hedgehog/delta", "t2r/decay", "hedgehog/decay_mao",
                                   "hedgehog/delta_mao", "hedgehog_window(5)", "exp_t=2", "elu"}) {
      torch::manual_seed(7);
      auto layer = layerOf(spec);
      const auto opts = torch::TensorOptions().dtype(torch::kDouble);
      const auto q = torch::randn({2, kHeads, kLength, kHeadDim}, opts);  // [B,H,T,D]
      const auto k = torch::randn({2, kHeads, kLength, kHeadDim}, opts);
      const auto hidden = torch::randn({2, kLength, kHidden}, opts);  // [B,T,C]
      torch::NoGradGuard noGrad;
      const auto all = layer->weights(q, k, hidden);  // [B,H,T,T]
      const auto first = layer->headWeights(q, k, 0, hidden);
      std::vector<torch::Tensor> handed;
      layer->forEachHeadWeights(q, k, hidden, [&](int64_t h, const torch::Tensor& a) {
        QCOMPARE(h, int64_t(handed.size()));
        handed.push_back(a.clone());
      });
      QCOMPARE(int64_t(handed.size()), kHeads);
      for (int64_t h = 0; h < kHeads; ++h) {
        const auto one = layer->headWeights(q, k, h, hidden);  // [B,1,T,T]
        QVERIFY2(one.sizes() == torch::IntArrayRef({2, 1, kLength, kLength}), spec.c_str());
        const double error = maxError(one, all.narrow(1, h, 1));
        QVERIFY2(error <= 1e-12, (spec + ": head " + std::to_string(h) + " off by " + std::to_string(error)).c_str());
        QVERIFY2(maxError(handed[size_t(h)], one) == 0.0,
                 (spec + ": forEachHeadWeights, head " + std::to_string(h)).c_str());
        if (h > 0)
          QVERIFY2(maxError(one, first) > 1e-3, (spec + ": head " + std::to_string(h) + " is head 0's map").c_str());
      }
    }
  }

  void aHeadOutsideTheLayerIsRefused() {
    auto layer = layerOf("hedgehog/gated");
    const auto q = torch::randn({1, kHeads, 4, kHeadDim}, torch::kDouble);
    const auto hidden = torch::randn({1, 4, kHidden}, torch::kDouble);
    HH_VERIFY_THROWS_WITH(layer->headWeights(q, q, kHeads, hidden), "no head 3");
    HH_VERIFY_THROWS_WITH(layer->headWeights(q, q, -1, hidden), "no head -1");
  }
};

HH_TEST_SUITE(TestHeadWeights, "engine.attention.head_weights", &TestHeadWeights::oneHeadEqualsThatHeadOfTheLayer,
              &TestHeadWeights::aHeadOutsideTheLayerIsRefused)

}  // namespace test_head_weights

#if HH_HAVE_QTEST
#include "test_head_weights.moc"
#endif
