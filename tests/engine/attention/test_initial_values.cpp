// engine.attention.initial_values: where modules draw their random initial values from
// (engine/attention/initial_values.h):
//   - outside any scope, Torch's global generator (what manual_seed sets);
//   - inside SeededInitialValues(s), a generator of the scope's own seeded with s: its draws are
//     those of a fresh CPU generator with seed s, scopes nest and the outer one's sequence goes on
//     where it was when the inner one ends;
//   - a gated rule's projections (weights U(-1/sqrt(in), 1/sqrt(in)), Torch's default bound) and
//     a model built from scratch (GPT-2's N(0, 0.02)) are the same from one seed while another
//     thread draws from the global generator and builds modules all the while (the workbench's
//     GUI thread while a job runs), and differ with another seed;
//   - a training job's JobStart installs its seed for its thread and takes it away when it ends.
#include <torch/torch.h>

#include <ATen/CPUGeneratorImpl.h>

#include <atomic>
#include <cmath>
#include <thread>

#include "engine/attention/initial_values.h"
#include "engine/attention/linear_attention.h"
#include "engine/config/model_config.h"
#include "engine/jobs/training_support.h"
#include "engine/models/model_io.h"
#include "tests/support/hh_test.h"

namespace test_initial_values {

namespace {

namespace a = hh::attn;

torch::Tensor drawFrom(at::Generator generator) { return torch::rand({16}, generator, torch::kDouble); }
torch::Tensor drawFresh(uint64_t seed) { return drawFrom(at::detail::createCPUGenerator(seed)); }

// Another thread doing what the GUI thread does while a job runs: draws from Torch's global
// generator and builds modules, until stopped.
class BusyNeighbour {
 public:
  BusyNeighbour()
      : thread_([this] {
          while (!stop_) {
            torch::randn({64});
            a::RuleGates(a::UpdateRule::DecayMao, 8, 2, 4, 4);
            ++rounds_;
          }
        }) {
    while (rounds_ == 0) std::this_thread::yield();  // it is drawing before the test starts
  }
  ~BusyNeighbour() {
    stop_ = true;
    thread_.join();
  }

 private:
  std::atomic<bool> stop_{false};
  std::atomic<int64_t> rounds_{0};
  std::thread thread_;
};

std::vector<torch::Tensor> parametersOf(const torch::nn::Module& module) {
  std::vector<torch::Tensor> out;
  for (const auto& p : module.parameters()) out.push_back(p.detach().clone());
  return out;
}

bool allEqual(const std::vector<torch::Tensor>& x, const std::vector<torch::Tensor>& y) {
  if (x.size() != y.size()) return false;
  for (size_t i = 0; i < x.size(); ++i)
    if (!torch::equal(x[i], y[i])) return false;
  return true;
}

// Gates of the decay rule as built under SeededInitialValues(seed), another thread busy meanwhile
// and this one drawing from the global generator first.
std::vector<torch::Tensor> gatesFrom(uint64_t seed) {
  torch::randn({7});
  const a::SeededInitialValues scope(seed);
  torch::randn({5});
  return parametersOf(*a::RuleGates(a::UpdateRule::DecayMao, 32, 4, 8, 8));
}

hh::models::ModelConfig tinyGpt2() {
  return hh::models::parseModelConfig(
      {{"model_type", "gpt2"}, {"vocab_size", 50}, {"n_embd", 16}, {"n_layer", 2}, {"n_head", 2}, {"n_positions", 32}},
      "test");
}

}  // namespace

class TestInitialValues : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void outsideAScopeTheGlobalGenerator() {
    torch::manual_seed(5);
    const auto fromGlobal = torch::rand({16}, torch::kDouble);
    torch::manual_seed(5);
    QVERIFY(torch::equal(drawFrom(a::initialValuesGenerator()), fromGlobal));
  }

  void scopesNestAndRestore() {
    const a::SeededInitialValues outer(1);
    const auto outerFirst = drawFrom(a::initialValuesGenerator());
    QVERIFY(torch::equal(outerFirst, drawFresh(1)));
    {
      const a::SeededInitialValues inner(2);
      QVERIFY(torch::equal(drawFrom(a::initialValuesGenerator()), drawFresh(2)));
    }
    auto expected = at::detail::createCPUGenerator(1);
    drawFrom(expected);
    QVERIFY(torch::equal(drawFrom(a::initialValuesGenerator()), drawFrom(expected)));  // the outer's second draw
  }

  void gateProjectionsDependOnTheSeedOnly() {
    const BusyNeighbour neighbour;
    const auto first = gatesFrom(3), again = gatesFrom(3), other = gatesFrom(4);
    QVERIFY(allEqual(first, again));
    QVERIFY(!allEqual(first, other));
    const auto gates = [] {
      const a::SeededInitialValues scope(3);
      return a::RuleGates(a::UpdateRule::DecayMao, 32, 4, 8, 8);
    }();
    for (const auto& item : gates->named_parameters())
      if (item.key().find("weight") != std::string::npos) {
        const double bound = 1 / std::sqrt(32.0), largest = item.value().abs().max().item<double>();
        QVERIFY2(largest <= bound && largest > 0.9 * bound, item.key().c_str());
      }
  }

  void aModelFromScratchDependsOnTheSeedOnly() {
    const BusyNeighbour neighbour;
    const auto build = [](uint64_t seed) {
      const a::SeededInitialValues scope(seed);
      return parametersOf(*hh::models::createModel(tinyGpt2()));
    };
    const auto first = build(9);
    torch::randn({11});
    QVERIFY(allEqual(first, build(9)));
    QVERIFY(!allEqual(first, build(10)));
  }

  void aJobStartInstallsItsSeed() {
    {
      const hh::jobs::JobStart start(21);
      QVERIFY(torch::equal(drawFrom(a::initialValuesGenerator()), drawFresh(21)));
    }
    torch::manual_seed(5);
    const auto fromGlobal = torch::rand({16}, torch::kDouble);
    torch::manual_seed(5);
    QVERIFY(torch::equal(drawFrom(a::initialValuesGenerator()), fromGlobal));  // gone with the job
  }
};

HH_TEST_SUITE(TestInitialValues, "engine.attention.initial_values", &TestInitialValues::outsideAScopeTheGlobalGenerator,
              &TestInitialValues::scopesNestAndRestore, &TestInitialValues::gateProjectionsDependOnTheSeedOnly,
              &TestInitialValues::aModelFromScratchDependsOnTheSeedOnly, &TestInitialValues::aJobStartInstallsItsSeed)

}  // namespace test_initial_values

#if HH_HAVE_QTEST
#include "test_initial_values.moc"
#endif
