// engine.models.expected_weights: the tensor list a config implies (expectedWeights, used by
// preflight to check headers without building the model) equals, name for name and shape for
// shape, what the model built from that config exports (its "hedgehog." adapter entries aside),
// and expectedParameterCount equals the exported and the module parameter counts. Families and
// variants: GPT-2 tied, untied and with a classification head; BERT masked-LM and
// sequence-classification; Llama tied/untied, with and without attention and MLP biases, with
// GQA and an explicit head_dim. Every folder written by saveModel (also a converted one) passes
// preflight with no blockers and no unused tensors, and loads back to the same logits.

#include <torch/types.h>

#include <nlohmann/json.hpp>

#include <map>
#include <string>
#include <vector>

#include "engine/models/expected_weights.h"
#include "engine/models/model_io.h"
#include "engine/models/preflight.h"
#include "tests/support/temp_dir.h"
#include "tests/support/hh_test.h"

namespace test_expected_weights {

namespace {

namespace m = hh::models;
using nlohmann::json;
using ShapeMap = std::map<std::string, std::vector<int64_t>>;

struct Variant {
  std::string label;
  json config;
};

std::vector<Variant> variants() {
  const json gpt2{{"model_type", "gpt2"}, {"architectures", {"GPT2LMHeadModel"}},
                  {"vocab_size", 97},     {"n_embd", 24},
                  {"n_layer", 2},         {"n_head", 3},
                  {"n_positions", 40},    {"n_inner", nullptr}};
  const json bert{{"model_type", "bert"},    {"architectures", {"BertForMaskedLM"}},
                  {"vocab_size", 89},        {"hidden_size", 16},
                  {"num_hidden_layers", 2},  {"num_attention_heads", 2},
                  {"intermediate_size", 40}, {"max_position_embeddings", 32},
                  {"type_vocab_size", 3}};
  const json llama{{"model_type", "llama"},   {"architectures", {"LlamaForCausalLM"}},
                   {"vocab_size", 101},       {"hidden_size", 32},
                   {"num_hidden_layers", 2},  {"num_attention_heads", 4},
                   {"intermediate_size", 56}, {"max_position_embeddings", 64}};
  auto with = [](json j, const json& patch) {
    j.merge_patch(patch);
    return j;
  };
  return {
      {"gpt2 tied", gpt2},
      {"gpt2 untied", with(gpt2, {{"tie_word_embeddings", false}})},
      {"gpt2 classifier", with(gpt2, {{"architectures", {"GPT2ForSequenceClassification"}}, {"num_labels", 3}})},
      {"bert masked LM", bert},
      {"bert classifier", with(bert, {{"architectures", {"BertForSequenceClassification"}},
                                      {"id2label", {{"0", "a"}, {"1", "b"}, {"2", "c"}}}})},
      {"llama untied", llama},
      {"llama tied", with(llama, {{"tie_word_embeddings", true}})},
      {"llama GQA + attention bias", with(llama, {{"num_key_value_heads", 2}, {"attention_bias", true}})},
      {"llama head_dim 12 + mlp bias, tied",
       with(llama, {{"num_key_value_heads", 1}, {"head_dim", 12}, {"mlp_bias", true}, {"tie_word_embeddings", true}})},
      {"llama all biases", with(llama, {{"attention_bias", true}, {"mlp_bias", true}})},
      {"llama classifier", with(llama, {{"architectures", {"LlamaForSequenceClassification"}}, {"num_labels", 4}})},
  };
}

ShapeMap expectedMap(const m::ModelConfig& config) {
  ShapeMap out;
  for (const auto& spec : m::expectedWeights(config)) out[spec.name] = spec.shape;
  return out;
}

// Exported names and shapes, without adapters; `count` gets their element count.
ShapeMap exportedMap(const m::TransformerModel& model, int64_t* count = nullptr, int64_t* adapters = nullptr) {
  ShapeMap out;
  if (count) *count = 0;
  if (adapters) *adapters = 0;
  for (const auto& [name, t] : model.exportWeights()) {
    if (name.rfind("hedgehog.", 0) == 0) {
      if (adapters) ++*adapters;
      continue;
    }
    out[name] = t.sizes().vec();
    if (count) *count += t.numel();
  }
  return out;
}

// The first difference between two maps, for the failure message.
std::string difference(const ShapeMap& expected, const ShapeMap& exported) {
  for (const auto& [name, shape] : expected) {
    const auto it = exported.find(name);
    if (it == exported.end()) return "expected but not exported: " + name;
    if (it->second != shape)
      return name + ": expected " + m::shapeString(shape) + ", exported " + m::shapeString(it->second);
  }
  for (const auto& [name, shape] : exported)
    if (!expected.count(name)) return "exported but not expected: " + name;
  return "";
}

hh::attn::LinearAttentionConfig hedgehog() {
  hh::attn::LinearAttentionConfig c;
  c.featureMap.kind = hh::attn::FeatureMapKind::Hedgehog;
  return c;
}

}  // namespace

class TestExpectedWeights : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void namesAndShapesMatchExport() {
    for (const auto& v : variants()) {
      const auto config = m::parseModelConfig(v.config, v.label);
      const auto model = m::createModel(config);
      int64_t exportedCount = 0;
      const auto expected = expectedMap(config);
      const auto exported = exportedMap(*model, &exportedCount);
      const auto diff = difference(expected, exported);
      QVERIFY2(diff.empty(), (v.label + ": " + diff).c_str());
      QCOMPARE(expected.size(), m::expectedWeights(config).size());  // no name twice
      QCOMPARE(m::expectedParameterCount(config), exportedCount);
      QCOMPARE(m::expectedParameterCount(config), model->parameterCount());
      qInfo("%-36s %3zu tensors, %lld parameters", v.label.c_str(), expected.size(),
            static_cast<long long>(exportedCount));
    }
  }

  void adaptersAreExtra() {
    // A converted model exports the same body plus its adapters; the expected list has no adapters.
    for (const auto& v : variants()) {
      const auto config = m::parseModelConfig(v.config, v.label);
      const auto model = m::createModel(config);
      model->setAttentionPlan(m::AttentionPlan::hybrid(config.layers, {1}, hedgehog()));
      int64_t adapters = 0;
      const auto diff = difference(expectedMap(config), exportedMap(*model, nullptr, &adapters));
      QVERIFY2(diff.empty(), (v.label + " (converted): " + diff).c_str());
      QCOMPARE(adapters, int64_t(model->adapterTensors().size()));
      QVERIFY(adapters > 0);
    }
  }

  void bodyPrefixes() {
    // Body names carry the family's prefix and may be found without it; heads sit at the root.
    for (const auto& v : variants()) {
      const auto config = m::parseModelConfig(v.config, v.label);
      const auto prefix = m::bodyPrefix(config.architecture);
      for (const auto& spec : m::expectedWeights(config)) {
        QCOMPARE(spec.bodyPrefixOptional, spec.name.rfind(prefix, 0) == 0);
        QVERIFY2(!spec.what.empty(), spec.name.c_str());
      }
    }
  }

  void savedFoldersPassPreflight() {
    for (const auto& v : variants()) {
      for (const bool converted : {false, true}) {
        const auto config = m::parseModelConfig(v.config, v.label);
        const auto model = m::createModel(config);
        if (converted) model->setAttentionPlan(m::AttentionPlan::hybrid(config.layers, {0}, hedgehog()));
        hh::test::TempDir dir("expected_saved");
        m::saveModel(*model, dir.file("model"));
        const auto report = m::preflight(dir.file("model"));
        const auto label = v.label + (converted ? " (converted)" : "") + ":\n" + report.text();
        QVERIFY2(report.ready(), label.c_str());
        QVERIFY2(report.unusedTensors.empty(), label.c_str());
        for (const auto& f : report.findings)
          QVERIFY2(f.severity != m::PreflightFinding::Severity::Blocker, label.c_str());
        QCOMPARE(report.parameters, m::expectedParameterCount(config));
        QCOMPARE(report.convertedLayers, int64_t(converted ? 1 : 0));
        QCOMPARE(report.tiedHead, config.tieWordEmbeddings);
        // And it loads back to the same numbers.
        at::NoGradGuard noGrad;
        const auto ids = torch::remainder(torch::arange(10, torch::kLong) * 13, config.vocabSize).view({2, 5});
        const auto reloaded = m::loadModel(dir.file("model"));
        model->eval();
        QVERIFY2(torch::equal(reloaded->forward(ids).logits, model->forward(ids).logits), label.c_str());
      }
    }
  }
};

// clang-format off
HH_TEST_SUITE(TestExpectedWeights, "engine.models.expected_weights", &TestExpectedWeights::namesAndShapesMatchExport, &TestExpectedWeights::adaptersAreExtra, &TestExpectedWeights::bodyPrefixes, &TestExpectedWeights::savedFoldersPassPreflight)
// clang-format on

}  // namespace test_expected_weights

#if HH_HAVE_QTEST
#include "test_expected_weights.moc"
#endif
