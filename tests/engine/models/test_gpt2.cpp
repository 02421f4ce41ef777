// engine.models.gpt2: the tiny random GPT-2 fixture against logits and softmax weights computed
// by a third-party GPT-2 implementation (tests/data/tiny-random-gpt2/reference.safetensors),
// within 1e-4 relative; names with and without the "transformer." prefix; an untied lm_head;
// captures (q, k, softmax and linear weights) and teacher mode; save/reload round trips of the
// original and of a hybrid converted model, and of an adapter file.

#include <torch/types.h>

#include <string>

#include "engine/io/safetensors.h"
#include "engine/models/gpt2.h"
#include "engine/models/model_io.h"
#include "engine/models/tensor_file.h"
#include "tests/engine/models/model_test_support.h"
#include "tests/support/hh_test.h"

namespace test_gpt2 {

namespace {

namespace m = hh::models;
const std::string kDir = std::string(HH_FIXTURES_DIR) + "/tiny-random-gpt2";

torch::Tensor referenceTensor(const std::string& name) {
  return hh::models::readTensor(hh::io::SafetensorsFile::open(kDir + "/reference.safetensors"), name, name == "input_ids" ? torch::kLong : torch::kFloat);
}

hh::attn::LinearAttentionConfig hedgehogConfig() {
  hh::attn::LinearAttentionConfig c;
  c.featureMap.kind = hh::attn::FeatureMapKind::Hedgehog;
  return c;
}

// Moves every adapter parameter away from its initialisation (so a round trip has something to keep).
void perturbAdapters(m::TransformerModel& model) {
  at::NoGradGuard noGrad;
  torch::manual_seed(7);
  for (auto& [name, t] : model.adapterTensors()) t.add_(0.05 * torch::randn_like(t));
}

}  // namespace

class TestGpt2 : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void logitsMatchReference() {
    auto model = m::loadModel(kDir);
    const auto ids = referenceTensor("input_ids");  // [2,24]
    at::NoGradGuard noGrad;
    const auto out = model->forward(ids);
    QCOMPARE(out.logits.sizes().vec(), (std::vector<int64_t>{2, 24, 1000}));
    const double err = hh::test::relativeError(out.logits, referenceTensor("logits"));
    qInfo("logits relative error %.3g", err);
    QVERIFY(err < 1e-4);
  }

  void attentionsMatchReference() {
    auto model = m::loadModel(kDir);
    at::NoGradGuard noGrad;
    m::CaptureRequest request;
    m::ForwardOptions options;
    options.capture = &request;
    const auto out = model->forward(referenceTensor("input_ids"), options);
    QCOMPARE(static_cast<int64_t>(out.captures.size()), model->layerCount());
    std::vector<torch::Tensor> layers;
    for (const auto& c : out.captures) layers.push_back(c.softmaxWeights);
    const auto stacked = torch::stack(layers, 1);  // [B,L,H,T,T]
    const auto ref = referenceTensor("attentions");
    QCOMPARE(stacked.sizes().vec(), ref.sizes().vec());
    const double err = hh::test::relativeError(stacked, ref);
    qInfo("attentions relative error %.3g", err);
    QVERIFY(err < 1e-4);
  }

  void prefixOptional() {
    // Real GPT-2 files have no "transformer." prefix; the fixture has it. Both load the same.
    auto src = hh::io::SafetensorsFile::open(kDir + "/model.safetensors");
    std::vector<std::pair<std::string, torch::Tensor>> tensors;
    for (const auto& name : src.names()) {
      const std::string prefix = "transformer.";
      tensors.emplace_back(name.rfind(prefix, 0) == 0 ? name.substr(prefix.size()) : name, hh::models::readTensor(src, name));
    }
    hh::test::TempDir dir("gpt2_noprefix");
    std::filesystem::copy_file(kDir + "/config.json", dir.file("config.json"));
    hh::models::writeTensorFile(dir.file("model.safetensors"), tensors);
    at::NoGradGuard noGrad;
    const auto ids = referenceTensor("input_ids");
    const auto a = m::loadModel(kDir)->forward(ids).logits;
    const auto b = m::loadModel(dir.path())->forward(ids).logits;
    QVERIFY(torch::equal(a, b));
  }

  void untiedHeadUsedWhenPresent() {
    auto src = hh::io::SafetensorsFile::open(kDir + "/model.safetensors");
    std::vector<std::pair<std::string, torch::Tensor>> tensors;
    for (const auto& name : src.names()) tensors.emplace_back(name, hh::models::readTensor(src, name));
    torch::manual_seed(3);
    const auto head = 0.02 * torch::randn({1000, 32});
    tensors.emplace_back("lm_head.weight", head);
    hh::test::TempDir dir("gpt2_untied");
    std::filesystem::copy_file(kDir + "/config.json", dir.file("config.json"));
    hh::models::writeTensorFile(dir.file("model.safetensors"), tensors);
    at::NoGradGuard noGrad;
    auto model = m::loadModel(dir.path());
    QVERIFY(!model->config().tieWordEmbeddings);
    const auto out = model->forward(referenceTensor("input_ids"));
    QVERIFY(torch::allclose(out.logits, torch::matmul(out.hidden, head.t()), 1e-5, 1e-6));
  }

  void captureShapesAndLinearWeights() {
    auto model = m::loadModel(kDir);
    model->setAttentionPlan(m::AttentionPlan::hybrid(5, {1, 3}, hedgehogConfig()));
    at::NoGradGuard noGrad;
    m::CaptureRequest request;
    request.queriesKeys = true;
    m::ForwardOptions options;
    options.capture = &request;
    const auto out = model->forward(referenceTensor("input_ids"), options);
    for (const auto& c : out.captures) {
      QCOMPARE(c.queries.sizes().vec(), (std::vector<int64_t>{2, 4, 24, 8}));
      QCOMPARE(c.softmaxWeights.sizes().vec(), (std::vector<int64_t>{2, 4, 24, 24}));
      const bool linear = c.layer == 1 || c.layer == 3;
      QCOMPARE(c.linearWeights.defined(), linear);
      if (linear) {
        // Causal rows sum to 1 and nothing sits above the diagonal.
        QVERIFY(torch::allclose(c.linearWeights.sum(-1), torch::ones({2, 4, 24}), 1e-4, 1e-5));
        QCOMPARE(c.linearWeights.triu(1).abs().max().item<float>(), 0.0f);
      }
    }
    // Only the requested layers are captured.
    request.layers = {2};
    QCOMPARE(model->forward(referenceTensor("input_ids"), options).captures.size(), size_t(1));
  }

  void teacherModePropagatesSoftmax() {
    auto original = m::loadModel(kDir);
    auto converted = m::loadModel(kDir);
    converted->setAttentionPlan(m::AttentionPlan::uniform(5, hedgehogConfig()));
    at::NoGradGuard noGrad;
    const auto ids = referenceTensor("input_ids");
    m::ForwardOptions teacher;
    teacher.teacher = true;
    QVERIFY(torch::allclose(converted->forward(ids, teacher).logits, original->forward(ids).logits, 1e-6, 1e-6));
    QVERIFY(!torch::allclose(converted->forward(ids).logits, original->forward(ids).logits, 1e-3, 1e-3));
  }

  void linearFormsAgreeInsideTheModel() {
    auto model = m::loadModel(kDir);
    model->setAttentionPlan(m::AttentionPlan::uniform(5, hedgehogConfig()));
    perturbAdapters(*model);
    at::NoGradGuard noGrad;
    const auto ids = referenceTensor("input_ids");
    m::ForwardOptions options;
    const auto chunked = model->forward(ids, options).logits;
    options.form = hh::attn::AttentionForm::Quadratic;
    const auto quadratic = model->forward(ids, options).logits;
    options.form = hh::attn::AttentionForm::Recurrent;
    const auto recurrent = model->forward(ids, options).logits;
    QVERIFY(hh::test::relativeError(chunked, quadratic) < 1e-5);
    QVERIFY(hh::test::relativeError(recurrent, quadratic) < 1e-5);
  }

  void saveAndReloadOriginal() {
    auto model = m::loadModel(kDir);
    hh::test::TempDir dir("gpt2_save");
    const auto out = dir.file("saved");
    m::saveModel(*model, out, kDir);
    QVERIFY(std::filesystem::exists(out + "/tokenizer.json"));
    QVERIFY(std::filesystem::exists(out + "/vocab.json"));
    at::NoGradGuard noGrad;
    const auto ids = referenceTensor("input_ids");
    QVERIFY(torch::equal(m::loadModel(out)->forward(ids).logits, model->forward(ids).logits));
  }

  void saveAndReloadHybrid() {
    auto model = m::loadModel(kDir);
    auto plan = m::AttentionPlan::hybrid(5, {0, 2, 4}, hedgehogConfig());
    plan.layers[2].config.featureMap.kind = hh::attn::FeatureMapKind::T2R;
    model->setAttentionPlan(plan);
    perturbAdapters(*model);
    hh::test::TempDir dir("gpt2_hybrid");
    m::saveModel(*model, dir.file("converted"));
    auto reloaded = m::loadModel(dir.file("converted"));
    QCOMPARE(reloaded->config().plan.linearLayerCount(), int64_t(3));
    QVERIFY(reloaded->config().plan.layers[2].config.featureMap.kind == hh::attn::FeatureMapKind::T2R);
    QVERIFY(!reloaded->config().plan.layers[1].linear);
    at::NoGradGuard noGrad;
    const auto ids = referenceTensor("input_ids");
    QVERIFY(torch::equal(reloaded->forward(ids).logits, model->forward(ids).logits));
  }

  void adapterFileRoundTrip() {
    auto model = m::loadModel(kDir);
    model->setAttentionPlan(m::AttentionPlan::hybrid(5, {1, 2}, hedgehogConfig()));
    perturbAdapters(*model);
    hh::test::TempDir dir("gpt2_adapters");
    m::saveAdapters(*model, dir.file("adapters.safetensors"));
    // Only the adapters are in the file: 2 layers x (weight, bias).
    QCOMPARE(hh::io::SafetensorsFile::open(dir.file("adapters.safetensors")).names().size(), size_t(4));
    auto fresh = m::loadModel(kDir);
    m::loadAdaptersFile(*fresh, dir.file("adapters.safetensors"));
    at::NoGradGuard noGrad;
    const auto ids = referenceTensor("input_ids");
    QVERIFY(torch::equal(fresh->forward(ids).logits, model->forward(ids).logits));
    // No adapters, no file.
    HH_VERIFY_THROWS(std::invalid_argument, m::saveAdapters(*m::loadModel(kDir), dir.file("none.safetensors")));
  }

  void stopEarlyAndSkipHead() {
    auto model = m::loadModel(kDir);
    at::NoGradGuard noGrad;
    const auto ids = referenceTensor("input_ids");
    m::CaptureRequest request;
    m::ForwardOptions options;
    options.capture = &request;
    const auto full = model->forward(ids, options);
    options.computeLogits = false;
    const auto noHead = model->forward(ids, options);
    QVERIFY(!noHead.logits.defined());
    QVERIFY(torch::equal(noHead.hidden, full.hidden));
    options.stopAfterLayer = 2;
    const auto partial = model->forward(ids, options);
    QCOMPARE(partial.captures.size(), size_t(3));
    QVERIFY(torch::equal(partial.captures[2].softmaxWeights, full.captures[2].softmaxWeights));
  }

  void freezeLeavesOnlyAdaptersTrainable() {
    auto model = m::loadModel(kDir);
    model->setAttentionPlan(m::AttentionPlan::uniform(5, hedgehogConfig()));
    model->freezeAllBut(true);
    int64_t trainable = 0;
    for (const auto& p : model->parameters()) trainable += p.requires_grad() ? p.numel() : 0;
    QCOMPARE(trainable, int64_t(5 * (4 * 8 * 8 + 4 * 8)));
  }
};

HH_TEST_SUITE(TestGpt2, "engine.models.gpt2", &TestGpt2::logitsMatchReference, &TestGpt2::attentionsMatchReference, &TestGpt2::prefixOptional, &TestGpt2::untiedHeadUsedWhenPresent, &TestGpt2::captureShapesAndLinearWeights, &TestGpt2::teacherModePropagatesSoftmax, &TestGpt2::linearFormsAgreeInsideTheModel, &TestGpt2::saveAndReloadOriginal, &TestGpt2::saveAndReloadHybrid, &TestGpt2::adapterFileRoundTrip, &TestGpt2::stopEarlyAndSkipHead, &TestGpt2::freezeLeavesOnlyAdaptersTrainable)

}  // namespace test_gpt2

#if HH_HAVE_QTEST
#include "test_gpt2.moc"
#endif
