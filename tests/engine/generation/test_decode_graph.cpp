// Decoding from a recorded step (generation/decode_graph.h): positions read on the device give the
// same logits as positions read from the cache (every device), what cannot be recorded is refused
// with the reason, and on a GPU the replayed steps give the logits the plain steps give.
#include <torch/types.h>

#include <stdexcept>
#include <string>

#include "engine/core/cuda_graph.h"
#include "engine/generation/decode_graph.h"
#include "tests/engine/models/model_test_support.h"
#include "tests/support/hh_test.h"

namespace test_decode_graph {

namespace {

namespace a = hh::attn;
namespace m = hh::models;

m::AttentionPlan hedgehogPlan(int64_t layers) {
  a::LinearAttentionConfig c;
  c.featureMap.kind = a::FeatureMapKind::Hedgehog;
  c.rule.rule = a::UpdateRule::Additive;
  return m::AttentionPlan::uniform(layers, c);
}

// Logits [steps, V] of `steps` single-token steps after a 5-token prefill, positions read from
// the cache or, with onDevice, from a device tensor that says the same.
torch::Tensor decode(m::TransformerModel& model, const torch::Tensor& ids, int64_t steps, bool onDevice) {
  at::NoGradGuard noGrad;
  auto cache = model.newCache(1, 0);
  m::ForwardOptions options;
  options.cache = &cache;
  model.forward(ids.narrow(1, 0, 5), options);
  std::vector<torch::Tensor> rows;
  for (int64_t t = 5; t < 5 + steps; ++t) {
    if (onDevice) options.positionStart = torch::full({1}, cache.position, torch::TensorOptions(torch::kLong).device(ids.device()));
    rows.push_back(model.forward(ids.narrow(1, t, 1), options).logits[0]);
  }
  return torch::cat(rows, 0);
}

}  // namespace

class TestDecodeGraph : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void initTestCase() { HH_SKIP_UNLESS_TEST_DEVICE(); }

  void positionsReadOnTheDeviceGiveTheSameLogits() {
    // Rotary tables (Llama) and learned positions (GPT-2) from positionStart instead of the cache.
    auto llama = hh::test::tinyLlama();
    llama->setAttentionPlan(hedgehogPlan(llama->layerCount()));
    auto gpt2 = hh::test::loadOnTestDevice(std::string(HH_FIXTURES_DIR) + "/tiny-random-gpt2");
    gpt2->setAttentionPlan(hedgehogPlan(gpt2->layerCount()));
    for (auto* model : {llama.get(), gpt2.get()}) {
      torch::manual_seed(4);
      const auto ids = hh::test::onTestDevice(torch::randint(50, {1, 14}));
      const auto fromCache = decode(*model, ids, 9, false), fromDevice = decode(*model, ids, 9, true);
      QCOMPARE((fromCache - fromDevice).abs().max().item<double>(), 0.0);
    }
  }

  void refusesWhatItCannotRecord() {
    auto model = hh::test::tinyLlama(2);
    auto cache = model->newCache(1, 0);  // softmax layers: KV caches
    std::string expected;
    if (!hh::cudaGraphsAvailable()) expected = "needs a build with CUDA";
    else if (!model->parameters().front().is_cuda()) expected = "needs the model on a CUDA device";
    else expected = "layer 0 attends with softmax";
    HH_VERIFY_THROWS_WITH(hh::gen::DecodeGraph(*model, cache), expected);
    if (!model->parameters().front().is_cuda() || !hh::cudaGraphsAvailable()) return;
    a::LinearAttentionConfig window;
    window.featureMap.kind = a::FeatureMapKind::Hedgehog;
    window.window = 4;
    model->setAttentionPlan(m::AttentionPlan::uniform(2, window));
    auto windowCache = model->newCache(1, 0);
    HH_VERIFY_THROWS_WITH(hh::gen::DecodeGraph(*model, windowCache), "no window");
  }

  void replayedStepsGiveThePlainStepsLogits() {
    // A GPU with the fused step kernel: heads of dim 64 (two of them), Hedgehog in both layers.
    auto model = hh::test::tinyLlama(2, 128, 2, 1);
    if (!model->parameters().front().is_cuda() || !hh::cudaGraphsAvailable()) QSKIP("CUDA graphs: a CUDA build on a GPU");
    model->setAttentionPlan(hedgehogPlan(2));
    model->eval();
    at::NoGradGuard noGrad;
    torch::manual_seed(5);
    const auto ids = hh::test::onTestDevice(torch::randint(50, {1, 20}));
    auto plain = model->newCache(1, 0), graphed = model->newCache(1, 0);
    m::ForwardOptions plainOptions, prefill;
    plainOptions.cache = &plain;
    prefill.cache = &graphed;
    model->forward(ids.narrow(1, 0, 6), plainOptions);
    model->forward(ids.narrow(1, 0, 6), prefill);
    hh::gen::DecodeGraph graph(*model, graphed);
    QCOMPARE(graphed.position, int64_t(6));  // recording advanced nothing
    for (int64_t t = 6; t < 20; ++t) {
      const auto token = ids.narrow(1, t, 1);
      const auto expected = model->forward(token, plainOptions).logits;
      const auto got = graph.step(token);
      const double err = hh::test::relativeError(got, expected);
      QVERIFY2(err < 1e-5, ("step " + std::to_string(t) + " rel " + std::to_string(err)).c_str());
    }
    QCOMPARE(graphed.position, plain.position);
  }
};

HH_TEST_SUITE(TestDecodeGraph, "engine.generation.decode_graph", &TestDecodeGraph::initTestCase,
              &TestDecodeGraph::positionsReadOnTheDeviceGiveTheSameLogits, &TestDecodeGraph::refusesWhatItCannotRecord,
              &TestDecodeGraph::replayedStepsGiveThePlainStepsLogits)

}  // namespace test_decode_graph

#if HH_HAVE_QTEST
#include "test_decode_graph.moc"
#endif
