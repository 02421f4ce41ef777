// engine.generation.sampling: greedy is argmax; the temperature / top-k / top-p distribution
// equals a hand computation in fp64 (1e-12); the sampler's frequencies over 40,000 draws match
// that distribution within 5 standard errors; the same seed repeats a run exactly; bad settings
// are refused with the setting's name.

#include <torch/types.h>

#include <cmath>

#include "engine/generation/sampling.h"
#include "tests/support/hh_test.h"

namespace test_sampling {

namespace {
namespace g = hh::gen;

double maxAbs(const torch::Tensor& a, const torch::Tensor& b) { return (a - b).abs().max().item<double>(); }
}  // namespace

class TestSampling : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void greedyIsArgmax() {
    const auto logits = torch::tensor({0.1, 2.5, -1.0, 2.4}, torch::kFloat);
    g::Sampler s({});
    QCOMPARE(s.next(logits), int64_t(1));
    const auto dist = g::samplingDistribution(logits, {});
    QCOMPARE(dist[1].item<double>(), 1.0);
    QCOMPARE(dist.sum().item<double>(), 1.0);
    QCOMPARE(s.next(torch::tensor({0.5, 2.0, 2.0}, torch::kFloat)), int64_t(1));  // ties: the lowest id
    // A NaN logit is never the greedy pick (argmax alone would take it); all NaN is an error.
    const auto nan = std::nan("");
    QCOMPARE(s.next(torch::tensor({nan, 1.0, 3.0}, torch::kFloat)), int64_t(2));
    QCOMPARE(g::samplingDistribution(torch::tensor({nan, 1.0}, torch::kDouble), {})[1].item<double>(), 1.0);
    HH_VERIFY_THROWS(std::runtime_error, s.next(torch::tensor({nan, nan}, torch::kFloat)));
  }

  void filtersMatchHandComputation() {
    // probabilities at temperature 1: proportional to exp(logits)
    const auto logits = torch::tensor({1.0, 3.0, 0.0, 2.0, -1.0}, torch::kDouble);
    g::SamplingOptions o;
    o.temperature = 0.5;
    auto expected = torch::softmax(logits / 0.5, 0);
    QVERIFY(maxAbs(g::samplingDistribution(logits, o), expected) < 1e-12);

    o.temperature = 1.0;
    o.topK = 2;  // ids 1 and 3
    expected = torch::zeros({5}, torch::kDouble);
    const double e3 = std::exp(3.0), e2 = std::exp(2.0);
    expected[1] = e3 / (e3 + e2);
    expected[3] = e2 / (e3 + e2);
    QVERIFY(maxAbs(g::samplingDistribution(logits, o), expected) < 1e-12);

    // top-p on softmax(logits): p = [.0861, .6364, .0317, .2341, .0117] (ids 0..4);
    // sorted: 1 (.636), 3 (.234), 0 (.086): p = 0.85 keeps ids 1 and 3 (.871 >= .85).
    o.topK = 0;
    o.topP = 0.85;
    QVERIFY(maxAbs(g::samplingDistribution(logits, o), expected) < 1e-12);
    // p = 0.5: the most likely token alone.
    o.topP = 0.5;
    const auto single = g::samplingDistribution(logits, o);
    QCOMPARE(single[1].item<double>(), 1.0);
    // top-k then top-p: k = 3 renormalises over {1, 3, 0}, then p = 0.95 keeps all three.
    o.topK = 3;
    o.topP = 0.95;
    const auto both = g::samplingDistribution(logits, o);
    const double e1 = std::exp(1.0);
    QVERIFY(std::abs(both[0].item<double>() - e1 / (e1 + e2 + e3)) < 1e-12);
    QCOMPARE(both[2].item<double>(), 0.0);
    QCOMPARE(both[4].item<double>(), 0.0);
  }

  void frequenciesFollowTheDistribution() {
    const auto logits = torch::tensor({0.5, 1.5, -0.5, 1.0, 0.0, -2.0}, torch::kFloat);
    g::SamplingOptions o;
    o.temperature = 1.3;
    o.topK = 5;
    o.topP = 0.9;
    o.seed = 42;
    const auto p = g::samplingDistribution(logits, o);
    g::Sampler s(o);
    const int n = 40000;
    std::vector<int> counts(6, 0);
    for (int i = 0; i < n; ++i) ++counts[static_cast<size_t>(s.next(logits))];
    for (int64_t id = 0; id < 6; ++id) {
      const double expected = p[id].item<double>();
      const double observed = double(counts[static_cast<size_t>(id)]) / n;
      const double se = std::sqrt(std::max(expected * (1 - expected), 1e-12) / n);
      if (expected == 0) {
        QCOMPARE(counts[static_cast<size_t>(id)], 0);
      } else {
        QVERIFY2(std::abs(observed - expected) < 5 * se,
                 ("id " + std::to_string(id) + " observed " + std::to_string(observed) + " expected " + std::to_string(expected)).c_str());
      }
    }
  }

  void seedRepeatsARun() {
    const auto logits = torch::randn({50});
    g::SamplingOptions o;
    o.temperature = 1.0;
    o.seed = 9;
    g::Sampler a(o), b(o);
    o.seed = 10;
    g::Sampler c(o);
    std::vector<int64_t> ra, rb, rc;
    for (int i = 0; i < 200; ++i) {
      ra.push_back(a.next(logits));
      rb.push_back(b.next(logits));
      rc.push_back(c.next(logits));
    }
    QVERIFY(ra == rb);
    QVERIFY(ra != rc);
  }

  void badSettingsAreNamed() {
    g::SamplingOptions o;
    o.temperature = -1;
    HH_VERIFY_THROWS_WITH(g::Sampler{o}, "temperature");
    o = {};
    o.topP = 1.5;
    HH_VERIFY_THROWS_WITH(g::Sampler{o}, "top_p");
    o = {};
    o.topK = -3;
    HH_VERIFY_THROWS_WITH(g::Sampler{o}, "top_k");
    // NaN logits are never drawn; all-NaN logits are an error, not a crash.
    o = {};
    o.temperature = 1.0;
    g::Sampler s(o);
    const auto nan = std::nan("");
    QCOMPARE(s.next(torch::tensor({nan, 1.0, nan}, torch::kDouble)), int64_t(1));
    HH_VERIFY_THROWS(std::runtime_error, s.next(torch::tensor({nan, nan}, torch::kDouble)));
  }
};

HH_TEST_SUITE(TestSampling, "engine.generation.sampling", &TestSampling::greedyIsArgmax,
              &TestSampling::filtersMatchHandComputation, &TestSampling::frequenciesFollowTheDistribution,
              &TestSampling::seedRepeatsARun, &TestSampling::badSettingsAreNamed)

}  // namespace test_sampling

#if HH_HAVE_QTEST
#include "test_sampling.moc"
#endif
