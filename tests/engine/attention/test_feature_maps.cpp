// Feature maps against their analytic definitions (docs/design.md, "The math").
#include <torch/types.h>

#include <cmath>

#include "engine/attention/feature_map.h"
#include "engine/attention/softmax_attention.h"
#include "tests/support/hh_test.h"

namespace test_feature_maps {

using hh::attn::FeatureMap;
using hh::attn::FeatureMapConfig;
using hh::attn::FeatureMapKind;

namespace {
FeatureMap makeMap(FeatureMapKind kind, int64_t heads = 2, int64_t d = 8) {
  FeatureMapConfig c;
  c.kind = kind;
  c.heads = heads;
  c.headDim = d;
  return FeatureMap(c);
}
double maxAbs(const torch::Tensor& t) { return t.abs().max().item<double>(); }
}  // namespace

class TestFeatureMaps : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void shapesAndFeatureDims() {
    const auto x = torch::randn({2, 2, 5, 8});
    for (const auto kind : hh::attn::allFeatureMapKinds()) {
      auto fm = makeMap(kind);
      const auto y = fm->forward(x);
      QCOMPARE(y.size(3), fm->featureDim());
      QCOMPARE(y.size(2), int64_t(5));
      QVERIFY2(torch::isfinite(y).all().item<bool>(), hh::attn::toString(kind).c_str());
    }
    QCOMPARE(makeMap(FeatureMapKind::Taylor)->featureDim(), int64_t(1 + 8 + 64));
    QCOMPARE(makeMap(FeatureMapKind::Hedgehog)->featureDim(), int64_t(16));
  }

  void hedgehogStartsAtIdentity() {
    auto fm = makeMap(FeatureMapKind::Hedgehog);
    const auto x = torch::randn({1, 2, 6, 8}, torch::kDouble);
    const auto expected = torch::cat({torch::exp(x), torch::exp(-x)}, -1);
    QVERIFY(maxAbs(fm->forward(x) - expected) < 1e-12);
    QCOMPARE(fm->weight().sizes().vec(), (std::vector<int64_t>{2, 8, 8}));
    QVERIFY(fm->weight().requires_grad());
  }

  void hedgehogUsesOneMlpPerHead() {
    auto fm = makeMap(FeatureMapKind::Hedgehog);
    {
      at::NoGradGuard g;
      fm->weight()[1].mul_(2.0);  // head 1 doubles its input
      fm->bias()[1].fill_(0.5);
    }
    const auto x = torch::randn({1, 2, 3, 8}, torch::kDouble);
    const auto y = fm->forward(x);
    const auto u1 = x.select(1, 1) * 2.0 + 0.5;
    QVERIFY(maxAbs(y.select(1, 0) - torch::cat({torch::exp(x.select(1, 0)), torch::exp(-x.select(1, 0))}, -1)) < 1e-12);
    QVERIFY(maxAbs(y.select(1, 1) - torch::cat({torch::exp(u1), torch::exp(-u1)}, -1)) < 1e-12);
  }

  void hedgehogBackwardMatchesAutogradOfDefinition() {
    // The custom backward against autograd through cat(exp(u), exp(-u)), u = x W^T + b (fp64).
    auto fm = makeMap(FeatureMapKind::Hedgehog, 3, 5);
    {
      at::NoGradGuard g;
      fm->weight().copy_(torch::randn({3, 5, 5}) * 0.3 + torch::eye(5));
      fm->bias().copy_(torch::randn({3, 5}) * 0.1);
    }
    fm->to(torch::kDouble);
    const auto x0 = torch::randn({2, 3, 7, 5}, torch::kDouble);
    const auto gy = torch::randn({2, 3, 7, 10}, torch::kDouble);
    auto x = x0.clone().requires_grad_(true);
    (fm->forward(x) * gy).sum().backward();
    auto x2 = x0.clone().requires_grad_(true);
    auto w2 = fm->weight().detach().clone().requires_grad_(true), b2 = fm->bias().detach().clone().requires_grad_(true);
    const auto u = torch::matmul(x2, w2.transpose(-2, -1).unsqueeze(0)) + b2.unsqueeze(0).unsqueeze(2);
    (torch::cat({torch::exp(u), torch::exp(-u)}, -1) * gy).sum().backward();
    QVERIFY(maxAbs(x.grad() - x2.grad()) < 1e-12);
    QVERIFY(maxAbs(fm->weight().grad() - w2.grad()) < 1e-12);
    QVERIFY(maxAbs(fm->bias().grad() - b2.grad()) < 1e-12);
  }

  void hedgehogClampsLargeInputs() {
    // u = x W^T + b beyond +-kHedgehogClamp (30): the features are exp(clamp(u)) and its inverse,
    // finite where exp(u) would overflow fp32, and the gradient is that of the clamped definition
    // (0 past the clamp), against autograd in fp64.
    auto fm = makeMap(FeatureMapKind::Hedgehog, 2, 4);
    fm->to(torch::kDouble);
    const auto x0 = torch::randn({1, 2, 6, 4}, torch::kDouble) * 40;  // about half the entries past 30
    const auto gy = torch::randn({1, 2, 6, 8}, torch::kDouble);
    auto x = x0.clone().requires_grad_(true);
    const auto y = fm->forward(x);
    (y * gy).sum().backward();
    auto x2 = x0.clone().requires_grad_(true);
    const auto u = torch::matmul(x2, fm->weight().detach().transpose(-2, -1).unsqueeze(0)) + fm->bias().detach().unsqueeze(0).unsqueeze(2);
    const auto clamped = u.clamp(-hh::attn::kHedgehogClamp, hh::attn::kHedgehogClamp);
    const auto expected = torch::cat({torch::exp(clamped), torch::exp(-clamped)}, -1);
    (expected * gy).sum().backward();
    const double outside = u.detach().abs().gt(hh::attn::kHedgehogClamp).to(torch::kDouble).mean().item<double>();
    qInfo("%.0f %% of u past the clamp; max feature %.3g", 100 * outside, y.max().item<double>());
    QVERIFY(outside > 0.2);
    QVERIFY(maxAbs((y - expected) / expected) < 1e-12);
    QVERIFY(maxAbs(x.grad() - x2.grad()) < 1e-9 * x2.grad().abs().max().item<double>());
    // In fp32 the features stay finite where exp(u) overflows.
    auto fm32 = makeMap(FeatureMapKind::Hedgehog, 2, 4);
    QVERIFY(torch::isfinite(fm32->forward(x0.to(torch::kFloat) * 5)).all().item<bool>());
  }

  // The learned maps against their definitions with a random, non-symmetric W and b per head,
  // head by head (at the identity start a transposed W or a bias on the wrong axis would pass):
  //   hedgehog_softmax: [softmax(u), softmax(-u)], t2r: relu(u), linear: u;  u = x W_h^T + b_h.
  void learnedMapsMatchTheirDefinitions() {
    const int64_t H = 3, d = 5;
    const auto weight = torch::randn({H, d, d}, torch::kDouble), bias = torch::randn({H, d}, torch::kDouble);
    const auto x = torch::randn({2, H, 4, d}, torch::kDouble);
    auto u = torch::empty({2, H, 4, d}, torch::kDouble);
    for (int64_t h = 0; h < H; ++h)
      u.select(1, h).copy_(torch::matmul(x.select(1, h), weight[h].transpose(0, 1)) + bias[h]);
    const std::pair<FeatureMapKind, torch::Tensor> cases[] = {
        {FeatureMapKind::HedgehogSoftmax, torch::cat({torch::softmax(u, -1), torch::softmax(-u, -1)}, -1)},
        {FeatureMapKind::T2R, torch::relu(u)},
        {FeatureMapKind::Linear, u}};
    for (const auto& [kind, expected] : cases) {
      auto fm = makeMap(kind, H, d);
      fm->to(torch::kDouble);
      {
        at::NoGradGuard g;
        fm->weight().copy_(weight);
        fm->bias().copy_(bias);
      }
      const auto y = fm->forward(x);
      QVERIFY2(y.sizes() == expected.sizes(), hh::attn::toString(kind).c_str());
      QVERIFY2(maxAbs(y - expected) < 1e-12, hh::attn::toString(kind).c_str());
    }
  }

  void taylorKernelIsSecondOrderExpansion() {
    // phi(q).phi(k) = 1 + s + s^2 / 2, s = q.k / sqrt(d), exactly.
    auto fm = makeMap(FeatureMapKind::Taylor, 1, 6);
    const auto q = torch::randn({1, 1, 5, 6}, torch::kDouble), k = torch::randn({1, 1, 5, 6}, torch::kDouble);
    const auto s = hh::attn::attentionScores(q, k);
    const auto kernel = torch::matmul(fm->forward(q), fm->forward(k).transpose(-1, -2));
    QVERIFY(maxAbs(kernel - (1.0 + s + 0.5 * s * s)) < 1e-12);
  }

  void performerApproximatesSoftmaxKernel() {
    // Unbiased: E[phi(q).phi(k)] = exp(q.k / sqrt(d)). One draw of m features has a per-entry
    // relative std of sqrt(exp(|q'+k'|^2) - 1) / sqrt(m) (q' = q / d^(1/4)), so average the
    // estimate over 50 seeds of m = 1024 features: the worst of 256 entries stays within 6%.
    torch::manual_seed(3);
    const auto q = torch::randn({1, 1, 16, 8}, torch::kDouble) * 0.5, k = torch::randn({1, 1, 16, 8}, torch::kDouble) * 0.5;
    const auto exact = torch::exp(hh::attn::attentionScores(q, k));
    FeatureMapConfig c;
    c.kind = FeatureMapKind::Performer;
    c.headDim = 8;
    c.randomFeatures = 1024;
    auto mean = torch::zeros_like(exact);
    const int seeds = 50;
    for (int s = 0; s < seeds; ++s) {
      c.seed = 100 + s;
      FeatureMap fm(c);
      mean += torch::matmul(fm->forward(q), fm->forward(k).transpose(-1, -2)) / seeds;
      QVERIFY((fm->forward(q) > 0).all().item<bool>());
    }
    const double rel = maxAbs((mean - exact) / exact);
    QVERIFY2(rel < 0.06, std::to_string(rel).c_str());
    // Seeded: the same seed gives the same projection, another seed a different one.
    c.seed = 7;
    FeatureMap a(c), b(c);
    QVERIFY(torch::equal(a->projection(), b->projection()));
    c.seed = 8;
    QVERIFY(!torch::equal(FeatureMap(c)->projection(), a->projection()));
  }

  void cosformerReweightsByPositionDistance() {
    // phi(q_i).phi(k_j) = relu(q_i).relu(k_j) cos(pi (i - j) / 2M).
    FeatureMapConfig c;
    c.kind = FeatureMapKind::CosFormer;
    c.headDim = 4;
    c.cosformerMaxLength = 16;
    FeatureMap fm(c);
    const auto q = torch::randn({1, 1, 10, 4}, torch::kDouble), k = torch::randn({1, 1, 10, 4}, torch::kDouble);
    const auto kernel = torch::matmul(fm->forward(q), fm->forward(k).transpose(-1, -2));
    const auto pos = torch::arange(10, torch::kDouble);
    const auto cosDist = torch::cos((pos.unsqueeze(1) - pos.unsqueeze(0)) * M_PI / 32.0);
    const auto expected = torch::matmul(torch::relu(q), torch::relu(k).transpose(-1, -2)) * cosDist;
    QVERIFY(maxAbs(kernel - expected) < 1e-12);
    // An offset shifts positions: token 3 alone at offset 3 equals row 3 of the full sequence.
    QVERIFY(maxAbs(fm->forward(q.narrow(2, 3, 1), 3) - fm->forward(q).narrow(2, 3, 1)) < 1e-12);
    bool threw = false;
    try {
      fm->forward(q, 10);  // positions 10..19 exceed M = 16
    } catch (const std::exception&) {
      threw = true;
    }
    QVERIFY(threw);
  }

  void elementwiseMaps() {
    const auto x = torch::randn({1, 2, 3, 8}, torch::kDouble);
    QVERIFY(maxAbs(makeMap(FeatureMapKind::Elu)->forward(x) - (torch::elu(x) + 1.0)) < 1e-12);
    QVERIFY((makeMap(FeatureMapKind::Elu)->forward(x) > 0).all().item<bool>());
    QVERIFY(maxAbs(makeMap(FeatureMapKind::Identity)->forward(x) - x) < 1e-15);
    QVERIFY(maxAbs(makeMap(FeatureMapKind::T2R)->forward(x) - torch::relu(x)) < 1e-12);
    FeatureMapConfig c;
    c.kind = FeatureMapKind::ExpT;
    c.headDim = 8;
    c.expT = 2.0;
    QVERIFY(maxAbs(FeatureMap(c)->forward(x) - torch::exp(2.0 * x)) < 1e-12);
  }

  void namesRoundTrip() {
    for (const auto kind : hh::attn::allFeatureMapKinds())
      QVERIFY(hh::attn::parseFeatureMapKind(hh::attn::toString(kind)) == kind);
    for (const auto rule : hh::attn::allUpdateRules())
      QVERIFY(hh::attn::parseUpdateRule(hh::attn::toString(rule)) == rule);
    bool threw = false;
    try {
      hh::attn::parseFeatureMapKind("hegdehog");
    } catch (const std::invalid_argument& e) {
      threw = std::string(e.what()).find("allowed: hedgehog") != std::string::npos;
    }
    QVERIFY(threw);
    // Specs: a kind, or exp_t with its t.
    QVERIFY(hh::attn::parseFeatureMapSpec("elu").kind == FeatureMapKind::Elu);
    const auto exp2 = hh::attn::parseFeatureMapSpec("exp_t=2");
    QVERIFY(exp2.kind == FeatureMapKind::ExpT && exp2.expT == 2.0);
    QCOMPARE(hh::attn::featureMapSpec(exp2), std::string("exp_t=2"));
    QCOMPARE(hh::attn::featureMapSpec(hh::attn::parseFeatureMapSpec("exp_t")), std::string("exp_t"));
    QCOMPARE(hh::attn::featureMapSpec(hh::attn::parseFeatureMapSpec("exp_t=0.5")), std::string("exp_t=0.5"));
    HH_VERIFY_THROWS_WITH(hh::attn::parseFeatureMapSpec("elu=2"), "only exp_t takes a value");
    HH_VERIFY_THROWS_WITH(hh::attn::parseFeatureMapSpec("exp_t=-1"), "positive");
    HH_VERIFY_THROWS_WITH(hh::attn::parseFeatureMapSpec("exp_t=2x"), "positive");
    HH_VERIFY_THROWS_WITH(hh::attn::parseFeatureMapSpec("exp_t=nan"), "positive");
  }
};

HH_TEST_SUITE(TestFeatureMaps, "engine.attention.feature_maps", &TestFeatureMaps::shapesAndFeatureDims,
              &TestFeatureMaps::hedgehogStartsAtIdentity, &TestFeatureMaps::hedgehogUsesOneMlpPerHead,
              &TestFeatureMaps::hedgehogBackwardMatchesAutogradOfDefinition,
              &TestFeatureMaps::hedgehogClampsLargeInputs, &TestFeatureMaps::learnedMapsMatchTheirDefinitions,
              &TestFeatureMaps::taylorKernelIsSecondOrderExpansion,
              &TestFeatureMaps::performerApproximatesSoftmaxKernel,
              &TestFeatureMaps::cosformerReweightsByPositionDistance, &TestFeatureMaps::elementwiseMaps,
              &TestFeatureMaps::namesRoundTrip)

}  // namespace test_feature_maps

#if HH_HAVE_QTEST
#include "test_feature_maps.moc"
#endif
