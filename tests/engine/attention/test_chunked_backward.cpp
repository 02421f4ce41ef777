// Gradients of the chunked forms: the custom backward of the causal additive rule against
// autograd of the quadratic form and against central finite differences (fp64), and the
// autograd path of the other rules against their quadratic forms.
#include <torch/types.h>

#include "engine/attention/chunked_product.h"
#include "engine/attention/linear_attention.h"
#include "tests/support/hh_test.h"

namespace test_chunked_backward {

namespace {
using hh::attn::RuleInputs;
using hh::attn::RuleOptions;

struct Grads {
  torch::Tensor q, k, v;
};

Grads gradsOf(const std::function<torch::Tensor(const torch::Tensor&, const torch::Tensor&, const torch::Tensor&)>& f,
              const torch::Tensor& q0, const torch::Tensor& k0, const torch::Tensor& v0, const torch::Tensor& gy) {
  auto q = q0.clone().requires_grad_(true), k = k0.clone().requires_grad_(true), v = v0.clone().requires_grad_(true);
  (f(q, k, v) * gy).sum().backward();
  return {q.grad(), k.grad(), v.grad()};
}

// max |a - b| / max(max |b|, floor): the floor keeps near-zero gradients (T = 1, where the
// q/k gradients are of the order of eps) from turning rounding into a large relative error.
double relDiff(const torch::Tensor& a, const torch::Tensor& b, double floor = 1e-3) {
  return (a - b).abs().max().item<double>() / std::max(b.abs().max().item<double>(), floor);
}

std::string sci(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3e", x);
  return buf;
}
}  // namespace

class TestChunkedBackward : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void additiveBackwardMatchesQuadraticAutograd() {
    for (const int64_t t : {1, 29, 70}) {
      torch::manual_seed(t);
      const auto fq = torch::rand({2, 3, t, 6}, torch::kDouble) + 0.1;
      const auto fk = torch::rand({2, 3, t, 6}, torch::kDouble) + 0.1;
      const auto v = torch::randn({2, 3, t, 5}, torch::kDouble);
      const auto gy = torch::randn({2, 3, t, 5}, torch::kDouble);
      RuleOptions ro;
      ro.chunkSize = 16;
      const auto chunked = gradsOf([&](auto& a, auto& b, auto& c) { return hh::attn::linearChunked(a, b, c, {}, ro); },
                                   fq, fk, v, gy);
      const auto quad = gradsOf([&](auto& a, auto& b, auto& c) { return hh::attn::linearQuadratic(a, b, c, {}, ro); },
                                fq, fk, v, gy);
      QVERIFY2(relDiff(chunked.q, quad.q) < 1e-10, sci(relDiff(chunked.q, quad.q)).c_str());
      QVERIFY2(relDiff(chunked.k, quad.k) < 1e-10, sci(relDiff(chunked.k, quad.k)).c_str());
      QVERIFY2(relDiff(chunked.v, quad.v) < 1e-10, sci(relDiff(chunked.v, quad.v)).c_str());
    }
  }

  void additiveBackwardMatchesFiniteDifferences() {
    torch::manual_seed(11);
    const int64_t t = 13;
    auto fq = torch::rand({1, 2, t, 4}, torch::kDouble) + 0.1;
    auto fk = torch::rand({1, 2, t, 4}, torch::kDouble) + 0.1;
    auto v = torch::randn({1, 2, t, 3}, torch::kDouble);
    const auto gy = torch::randn({1, 2, t, 3}, torch::kDouble);
    auto loss = [&](const torch::Tensor& a, const torch::Tensor& b, const torch::Tensor& c) {
      return (hh::attn::causalAdditiveChunked(a, b, c, 5, 1e-6) * gy).sum().item<double>();
    };
    const auto g = gradsOf([&](auto& a, auto& b, auto& c) { return hh::attn::causalAdditiveChunked(a, b, c, 5, 1e-6); },
                           fq, fk, v, gy);
    const double h = 1e-6;
    std::vector<std::pair<torch::Tensor*, torch::Tensor>> inputs = {{&fq, g.q}, {&fk, g.k}, {&v, g.v}};
    for (auto& [x, grad] : inputs) {
      auto flat = x->view(-1);
      auto gflat = grad.reshape(-1);
      for (int64_t i = 0; i < flat.numel(); i += 7) {
        const double orig = flat[i].item<double>();
        flat[i] = orig + h;
        const double up = loss(fq, fk, v);
        flat[i] = orig - h;
        const double down = loss(fq, fk, v);
        flat[i] = orig;
        const double fd = (up - down) / (2 * h);
        const double an = gflat[i].item<double>();
        QVERIFY2(std::abs(fd - an) <= 1e-6 * std::max(1.0, std::abs(an)),
                 ("index " + std::to_string(i) + " fd " + std::to_string(fd) + " analytic " + std::to_string(an)).c_str());
      }
    }
  }

  // The additive rule's weights (linearWeights: one autograd node) against central finite
  // differences in fp64, causal and not: every gradient entry of fq and fk within 1e-6.
  void weightsBackwardMatchesFiniteDifferences() {
    for (const bool causal : {true, false}) {
      torch::manual_seed(causal ? 5 : 6);
      const int64_t t = 9;
      auto fq = torch::rand({2, 2, t, 4}, torch::kDouble) + 0.1;
      auto fk = torch::rand({2, 2, t, 4}, torch::kDouble) + 0.1;
      const auto ga = torch::randn({2, 2, t, t}, torch::kDouble);
      RuleOptions rule;
      rule.causal = causal;
      auto loss = [&](const torch::Tensor& a, const torch::Tensor& b) {
        return (hh::attn::linearWeights(a, b, RuleInputs{}, rule) * ga).sum();
      };
      auto q = fq.clone().requires_grad_(true), k = fk.clone().requires_grad_(true);
      loss(q, k).backward();
      const double h = 1e-6;
      std::vector<std::pair<torch::Tensor*, torch::Tensor>> inputs = {{&fq, q.grad()}, {&fk, k.grad()}};
      for (auto& [x, grad] : inputs) {
        auto flat = x->view(-1);
        const auto gflat = grad.reshape(-1);
        for (int64_t i = 0; i < flat.numel(); i += 3) {
          const double orig = flat[i].item<double>();
          flat[i] = orig + h;
          const double up = loss(fq, fk).item<double>();
          flat[i] = orig - h;
          const double down = loss(fq, fk).item<double>();
          flat[i] = orig;
          const double fd = (up - down) / (2 * h), an = gflat[i].item<double>();
          QVERIFY2(std::abs(fd - an) <= 1e-6 * std::max(1.0, std::abs(an)),
                   ((causal ? "causal" : "bidirectional") + std::string(" index ") + std::to_string(i) + " fd " +
                    std::to_string(fd) + " analytic " + std::to_string(an))
                       .c_str());
        }
      }
    }
  }

  void float32BackwardAtLength() {
    // fp32 at a length that is not a multiple of the default chunk, against fp64 quadratic autograd.
    torch::manual_seed(5);
    const int64_t t = 301;
    const auto fq = torch::rand({1, 2, t, 16}, torch::kDouble) + 0.05;
    const auto fk = torch::rand({1, 2, t, 16}, torch::kDouble) + 0.05;
    const auto v = torch::randn({1, 2, t, 8}, torch::kDouble);
    const auto gy = torch::randn({1, 2, t, 8}, torch::kDouble);
    RuleOptions ro;  // chunk 64
    const auto ref = gradsOf([&](auto& a, auto& b, auto& c) { return hh::attn::linearQuadratic(a, b, c, {}, ro); },
                             fq, fk, v, gy);
    const auto got = gradsOf(
        [&](auto& a, auto& b, auto& c) { return hh::attn::linearChunked(a, b, c, {}, ro); }, fq.to(torch::kFloat),
        fk.to(torch::kFloat), v.to(torch::kFloat), gy.to(torch::kFloat));
    QVERIFY2(relDiff(got.q.to(torch::kDouble), ref.q) < 1e-5, sci(relDiff(got.q.to(torch::kDouble), ref.q)).c_str());
    QVERIFY2(relDiff(got.k.to(torch::kDouble), ref.k) < 1e-5, sci(relDiff(got.k.to(torch::kDouble), ref.k)).c_str());
    QVERIFY2(relDiff(got.v.to(torch::kDouble), ref.v) < 1e-5, sci(relDiff(got.v.to(torch::kDouble), ref.v)).c_str());
  }

  void otherRulesDifferentiateLikeQuadratic() {
    torch::manual_seed(9);
    const int64_t t = 23, f = 6, d = 4;
    RuleInputs gates{torch::sigmoid(torch::randn({1, 2, t}, torch::kDouble) + 2),
                     torch::sigmoid(torch::randn({1, 2, t}, torch::kDouble)),
                     torch::sigmoid(torch::randn({1, 2, t, f}, torch::kDouble) + 2),
                     torch::sigmoid(torch::randn({1, 2, t, d}, torch::kDouble) + 2)};
    const auto fq = torch::rand({1, 2, t, f}, torch::kDouble) + 0.1;
    const auto fk = torch::rand({1, 2, t, f}, torch::kDouble) + 0.1;
    const auto v = torch::randn({1, 2, t, d}, torch::kDouble);
    const auto gy = torch::randn({1, 2, t, d}, torch::kDouble);
    for (const auto rule : {hh::attn::UpdateRule::Gated, hh::attn::UpdateRule::Delta, hh::attn::UpdateRule::Decay}) {
      RuleOptions ro;
      ro.rule = rule;
      ro.chunkSize = 8;
      const auto a = gradsOf([&](auto& x, auto& y, auto& z) { return hh::attn::linearChunked(x, y, z, gates, ro); },
                             fq, fk, v, gy);
      const auto b = gradsOf([&](auto& x, auto& y, auto& z) { return hh::attn::linearQuadratic(x, y, z, gates, ro); },
                             fq, fk, v, gy);
      const std::string name = hh::attn::toString(rule);
      QVERIFY2(relDiff(a.q, b.q) < 1e-9, name.c_str());
      QVERIFY2(relDiff(a.k, b.k) < 1e-9, name.c_str());
      QVERIFY2(relDiff(a.v, b.v) < 1e-9, name.c_str());
    }
  }

  void moduleFormsAgreeAndStepMatches() {
    // The module a layer calls: chunked == quadratic == step-by-step, for a gated rule with hidden states.
    hh::attn::LinearAttentionConfig cfg;
    cfg.featureMap.heads = 2;
    cfg.featureMap.headDim = 8;
    cfg.rule.rule = hh::attn::UpdateRule::Gated;
    hh::attn::LinearAttention la(cfg, /*hiddenSize=*/12);
    torch::manual_seed(2);
    const int64_t t = 19;
    const auto q = torch::randn({1, 2, t, 8}) * 0.3, k = torch::randn({1, 2, t, 8}) * 0.3, v = torch::randn({1, 2, t, 8});
    const auto x = torch::randn({1, t, 12});
    const auto yc = la->forward(q, k, v, x, hh::attn::AttentionForm::Chunked);
    const auto yq = la->forward(q, k, v, x, hh::attn::AttentionForm::Quadratic);
    auto state = la->initialState(1);
    std::vector<torch::Tensor> steps;
    for (int64_t i = 0; i < t; ++i)
      steps.push_back(la->step(state, q.narrow(2, i, 1), k.narrow(2, i, 1), v.narrow(2, i, 1), x.narrow(1, i, 1)));
    const auto ys = torch::cat(steps, 2);
    QVERIFY2(relDiff(yc, yq) < 1e-5, sci(relDiff(yc, yq)).c_str());
    QVERIFY2(relDiff(ys, yq) < 1e-5, sci(relDiff(ys, yq)).c_str());
    const auto w = la->weights(q, k, x);
    QVERIFY((w.sum(-1) - 1.0).abs().max().item<double>() < 1e-4);  // normalised rows
  }
};

HH_TEST_SUITE(TestChunkedBackward, "engine.attention.chunked_backward",
              &TestChunkedBackward::additiveBackwardMatchesQuadraticAutograd,
              &TestChunkedBackward::additiveBackwardMatchesFiniteDifferences,
              &TestChunkedBackward::weightsBackwardMatchesFiniteDifferences, &TestChunkedBackward::float32BackwardAtLength,
              &TestChunkedBackward::otherRulesDifferentiateLikeQuadratic, &TestChunkedBackward::moduleFormsAgreeAndStepMatches)

}  // namespace test_chunked_backward

#if HH_HAVE_QTEST
#include "test_chunked_backward.moc"
#endif
