// engine.models.lora: LoRA on the q/k/v/o projections. A fresh adapter (B = 0) leaves the logits
// bit-identical; in LoRA training only A, B and the feature maps get gradients; the merged model
// equals the unmerged forward within 1e-5 and saves as a plain folder that reloads to the same
// logits; the targets of GPT-2, BERT and Llama; a classification head added to an LM folder keeps
// the body's hidden states and round-trips through saveModel.

#include <torch/types.h>

#include <cstdlib>
#include <set>

#include "engine/jobs/train_job.h"
#include "engine/models/lora.h"
#include "engine/models/model_io.h"
#include "engine/io/safetensors.h"
#include "tests/support/temp_dir.h"
#include "tests/support/hh_test.h"

namespace test_lora {

namespace {

namespace m = hh::models;
const std::string kModel = std::string(HH_FIXTURES_DIR) + "/tiny-random-gpt2";

m::ModelPtr hedgehogModel() {
  auto model = m::loadModel(kModel);
  hh::attn::LinearAttentionConfig linear;
  linear.featureMap.kind = hh::attn::FeatureMapKind::Hedgehog;
  model->setAttentionPlan(m::AttentionPlan::hybrid(model->layerCount(), {0, 2}, linear));
  return model;
}

double maxDiff(const torch::Tensor& a, const torch::Tensor& b) { return (a - b).abs().max().item<double>(); }

}  // namespace

class TestLora : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void initTestCase() { setenv("HH_NUM_THREADS", "1", 0); }

  void freshAdapterChangesNothing() {
    auto model = hedgehogModel();
    const auto ids = torch::randint(1000, {2, 12});
    const auto before = model->forward(ids).logits;
    m::LoraAdapters lora(*model, {4, 8.0, 1});
    QCOMPARE(lora.targetCount(), size_t(10));  // c_attn + attn c_proj in 5 layers
    QCOMPARE(lora.scale(), 2.0);
    lora.apply();
    QVERIFY(torch::equal(model->forward(ids).logits, before));
  }

  void onlyAdaptersGetGradients() {
    auto model = hedgehogModel();
    model->freezeAllBut(true);
    m::LoraAdapters lora(*model, {4, 8.0, 1});
    lora.apply();
    const auto ids = torch::randint(1000, {2, 12});
    model->forward(ids).logits.pow(2).mean().backward();
    std::set<const void*> adapters;
    for (const auto& [name, t] : model->adapterTensors()) adapters.insert(t.unsafeGetTensorImpl());
    int adapterGrads = 0;
    for (const auto& item : model->named_parameters(true)) {
      const bool isAdapter = adapters.count(item.value().unsafeGetTensorImpl()) > 0;
      if (!isAdapter) QVERIFY2(!item.value().grad().defined(), item.key().c_str());
      else if (item.value().grad().defined()) ++adapterGrads;
    }
    QVERIFY(adapterGrads > 0);  // hedgehog feature maps of layers 0 and 2
    for (const auto& [name, t] : lora.namedParameters()) {
      QVERIFY2(t.grad().defined(), name.c_str());
      if (name.find("lora_B") != std::string::npos) QVERIFY2(t.grad().abs().sum().item<double>() > 0, name.c_str());
    }
  }

  void mergedExportEqualsUnmergedForward() {
    hh::test::TempDir dir("lora_merge");
    auto model = hedgehogModel();
    m::LoraAdapters lora(*model, {4, 8.0, 1});
    {
      at::NoGradGuard noGrad;
      for (const auto& [name, t] : lora.namedParameters())
        if (name.find("lora_B") != std::string::npos) t.normal_(0.0, 0.05);
    }
    const auto ids = torch::randint(1000, {2, 12});
    torch::Tensor unmerged, base;
    {
      at::NoGradGuard noGrad;
      lora.apply();
      unmerged = model->forward(ids).logits;
    }
    base = m::loadModel(kModel)->forward(ids).logits;
    QVERIFY(maxDiff(unmerged, base) > 1e-3);  // the adapter does something
    lora.merge();
    const auto merged = model->forward(ids).logits;
    qInfo("merged vs unmerged: max |diff| %.2e", maxDiff(merged, unmerged));
    QVERIFY(maxDiff(merged, unmerged) < 1e-5);
    m::saveModel(*model, dir.file("merged"), kModel);
    for (const auto& name : hh::io::ShardedSafetensors::open(dir.file("merged") + "/model.safetensors").names())
      QVERIFY2(name.find("lora") == std::string::npos, name.c_str());
    QVERIFY(maxDiff(m::loadModel(dir.file("merged"))->forward(ids).logits, unmerged) < 1e-5);
  }

  void targetsOfEachFamily() {
    hh::jobs::ArchitectureConfig a;
    a.modelType = "llama";
    a.nEmbd = 16;
    a.nLayer = 2;
    a.nHead = 2;
    auto llama = m::createModel(m::parseModelConfig(hh::jobs::architectureToHfJson(a, 50, -1, -1), "llama"));
    QCOMPARE(m::loraTargetNames(*llama),
             (std::vector<std::string>{"layers_0_q_proj", "layers_0_k_proj", "layers_0_v_proj", "layers_0_o_proj",
                                       "layers_1_q_proj", "layers_1_k_proj", "layers_1_v_proj", "layers_1_o_proj"}));
    const nlohmann::json bertJson{{"model_type", "bert"}, {"vocab_size", 50}, {"hidden_size", 16},
                                  {"num_hidden_layers", 2}, {"num_attention_heads", 2}, {"intermediate_size", 32}};
    auto bert = m::createModel(m::parseModelConfig(bertJson, "bert"));
    QCOMPARE(m::loraTargetNames(*bert).size(), size_t(8));
    QCOMPARE(m::loraTargetNames(*bert).front(), std::string("layer_0_query"));
    const auto ids = torch::randint(50, {1, 6});
    const auto before = bert->forward(ids).logits;
    m::LoraAdapters lora(*bert, {2, 2.0, 0});
    lora.apply();
    QVERIFY(torch::equal(bert->forward(ids).logits, before));
    HH_VERIFY_THROWS_WITH(m::LoraAdapters(*bert, {0, 2.0, 0}), "rank must be at least 1");
    // A rank past the weight's smaller side ran (rank 100000 on a 64-wide model: 3.7 GB, 54 s a step).
    HH_VERIFY_THROWS_WITH(m::LoraAdapters(*bert, {17, 2.0, 0}), "LoRA rank 17 is more than layer_0_query's 16 x 16");
  }

  void classificationHeadOnAnLmFolder() {
    hh::test::TempDir dir("lora_head");
    auto lm = m::loadModel(kModel);
    auto classifier = m::loadModelForClassification(kModel, 3);
    QVERIFY(classifier->config().head == m::HeadKind::SequenceClassification);
    QCOMPARE(classifier->config().numLabels, int64_t(3));
    const auto ids = torch::randint(1000, {2, 10});
    const auto out = classifier->forward(ids);
    QCOMPARE(out.logits.sizes().vec(), (std::vector<int64_t>{2, 3}));
    QVERIFY(torch::equal(out.hidden, lm->forward(ids).hidden));  // the body is the LM's
    m::saveModel(*classifier, dir.file("cls"), kModel);
    auto back = m::loadModel(dir.file("cls"));
    QCOMPARE(back->config().numLabels, int64_t(3));
    QVERIFY(torch::equal(back->forward(ids).logits, out.logits));
    // A folder that has a head keeps it, and must agree on the label count.
    QVERIFY(torch::equal(m::loadModelForClassification(dir.file("cls"), 3)->forward(ids).logits, out.logits));
    HH_VERIFY_THROWS_WITH(m::loadModelForClassification(dir.file("cls"), 2), "has 3 labels");
  }
};

HH_TEST_SUITE(TestLora, "engine.models.lora", &TestLora::initTestCase, &TestLora::freshAdapterChangesNothing, &TestLora::onlyAdaptersGetGradients, &TestLora::mergedExportEqualsUnmergedForward, &TestLora::targetsOfEachFamily, &TestLora::classificationHeadOnAnLmFolder)

}  // namespace test_lora

#if HH_HAVE_QTEST
#include "test_lora.moc"
#endif
