// engine.models.heads: what config.json says about a model's head and attention, as Hugging Face
// reads it. A BERT with is_decoder attends causally (checked against the fp64 reference); a decoder classifier pools
// each row's rightmost real token, so a left-padded row scores like the same row unpadded; an architecture without a
// head the engine runs (token classification, question answering) is refused naming the file and the name; a
// classifier's label count comes from id2label when num_labels is absent, in every family; and a
// GPT-2 or Llama classifier has no lm_head, tied or not, so a checkpoint without one loads.

#include <torch/types.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "engine/config/model_config.h"
#include "engine/io/safetensors.h"
#include "engine/models/expected_weights.h"
#include "engine/models/model_io.h"
#include "engine/models/tensor_file.h"
#include "tests/engine/models/model_test_support.h"
#include "tests/engine/models/reference_transformer.h"
#include "tests/support/hh_test.h"
#include "tests/support/temp_dir.h"

namespace test_model_heads {

namespace {

namespace m = hh::models;
namespace ref = hh::test::ref;
using nlohmann::json;

const std::string kBertDir = std::string(HH_FIXTURES_DIR) + "/bert-tiniest";

json gpt2Classifier() {
  return json{{"model_type", "gpt2"}, {"architectures", {"GPT2ForSequenceClassification"}},
              {"vocab_size", 100},    {"n_embd", 32},
              {"n_layer", 2},         {"n_head", 4},
              {"n_positions", 64},    {"num_labels", 3}};
}
json llamaClassifier() {
  return json{{"model_type", "llama"},
              {"architectures", {"LlamaForSequenceClassification"}},
              {"vocab_size", 100},
              {"hidden_size", 32},
              {"num_hidden_layers", 2},
              {"num_attention_heads", 4},
              {"num_key_value_heads", 2},
              {"intermediate_size", 48},
              {"max_position_embeddings", 64},
              {"num_labels", 3}};
}
json bertBase() {
  return json{{"model_type", "bert"},   {"architectures", {"BertForMaskedLM"}},
              {"vocab_size", 100},      {"hidden_size", 32},
              {"num_hidden_layers", 2}, {"num_attention_heads", 4},
              {"intermediate_size", 64}};
}

// A model of `config` with weights of a larger spread than the init (attention not uniform).
m::ModelPtr randomModel(const json& config) {
  auto model = m::createModel(m::parseModelConfig(config, "test config"));
  at::NoGradGuard noGrad;
  torch::manual_seed(5);
  for (auto& p : model->parameters())
    if (p.dim() >= 2) p.normal_(0.0, 0.3);
  model->eval();
  return model;
}

json readJson(const std::string& path) {
  std::ifstream in(path);
  return json::parse(in);
}

torch::Tensor rows(const std::vector<std::vector<int64_t>>& values) {
  std::vector<torch::Tensor> out;
  for (const auto& row : values) out.push_back(torch::tensor(row, torch::kLong));
  return torch::stack(out);
}

// Every tensor of a safetensors file as the fp64 reference reads weights.
ref::Weights referenceWeights(const std::string& file) {
  const auto st = hh::io::SafetensorsFile::open(file);
  ref::Weights weights;
  for (const auto& name : st.names()) {
    const auto t = m::readTensor(st, name, torch::kDouble).contiguous();
    weights[name] =
        ref::Array{t.sizes().vec(), std::vector<double>(t.data_ptr<double>(), t.data_ptr<double>() + t.numel())};
  }
  return weights;
}

double maxRelative(const torch::Tensor& a, const std::vector<double>& b) {
  return hh::test::relativeError(a, torch::tensor(b, torch::kDouble).view(a.sizes()));
}

// A ConfigError from config.json `config` written into a temp folder, or "" when it parses.
std::string configError(const json& config, std::string* path = nullptr) {
  hh::test::TempDir dir("heads_config");
  hh::test::writeJson(dir.file("config.json"), config);
  if (path) *path = dir.file("config.json");
  try {
    m::loadModelConfig(dir.path());
  } catch (const m::ConfigError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

class TestModelHeads : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void bertDecoderAttendsCausally() {
    // BertLMHeadModel as a decoder (is_decoder): every position sees itself and the positions
    // before it, padding masked as well; compared with the fp64 reference both ways.
    auto config = bertBase();
    config["architectures"] = {"BertLMHeadModel"};
    config["is_decoder"] = true;
    hh::test::TempDir dir("bert_decoder");
    m::saveModel(*randomModel(config), dir.file("model"));
    const auto model = m::loadModel(dir.file("model"));
    QVERIFY(model->config().causal);

    ref::BertSpec spec;
    spec.hidden = 32, spec.layers = 2, spec.heads = 4, spec.eps = 1e-12, spec.activation = "gelu", spec.causal = true;
    const ref::Rows ids{{2, 14, 33, 7, 49}, {2, 40, 9, 0, 0}};
    const ref::Rows mask{{1, 1, 1, 1, 1}, {1, 1, 1, 0, 0}};
    const auto weights = referenceWeights(dir.file("model/model.safetensors"));
    const auto causal = ref::bertForward(spec, weights, ids, {}, mask);
    spec.causal = false;
    const auto bidirectional = ref::bertForward(spec, weights, ids, {}, mask);

    at::NoGradGuard noGrad;
    m::ForwardOptions options;
    options.attentionMask = rows(mask);
    const auto logits = model->forward(rows(ids), options).logits;  // [2, 5, V]
    // Only the real tokens are compared (padding rows are not defined by either side).
    const auto real = logits.narrow(1, 0, 3);
    auto pick = [&](const ref::Output& r) {
      std::vector<double> out;
      for (int64_t b = 0; b < 2; ++b)
        for (int64_t t = 0; t < 3; ++t)
          for (int64_t v = 0; v < r.vocab; ++v) out.push_back(r.logit(b, t, v));
      return out;
    };
    const double toCausal = maxRelative(real, pick(causal)), toBidirectional = maxRelative(real, pick(bidirectional));
    qInfo("causal BERT: rel err %.3g to the causal reference, %.3g to the bidirectional one", toCausal,
          toBidirectional);
    QVERIFY(toCausal < 1e-4);
    QVERIFY(toBidirectional > 1e-2);
    // Without is_decoder (bert-tiniest is a BertLMHeadModel without it) BERT stays bidirectional.
    QVERIFY(!m::loadModelConfig(kBertDir).causal);
    QVERIFY(!m::parseModelConfig(bertBase(), "a").causal);
  }

  void leftPaddedRowScoresLikeTheUnpaddedRow() {
    // Llama (rotary: only relative positions matter): the row padded on the left, and on the
    // right, scores as the row alone.
    const auto llama = randomModel(llamaClassifier());
    at::NoGradGuard noGrad;
    const auto alone = llama->forward(rows({{5, 6, 7, 8}})).logits;  // [1, 3]
    m::ForwardOptions padded;
    padded.attentionMask = rows({{0, 0, 1, 1, 1, 1}, {1, 1, 1, 1, 0, 0}});
    const auto both = llama->forward(rows({{0, 0, 5, 6, 7, 8}, {5, 6, 7, 8, 0, 0}}), padded).logits;  // [2, 3]
    const double left = hh::test::relativeError(both[0], alone[0]), right = hh::test::relativeError(both[1], alone[0]);
    qInfo("llama classifier: left-padded rel err %.3g, right-padded %.3g", left, right);
    QVERIFY(left < 1e-5);
    QVERIFY(right < 1e-5);
    // GPT-2: each row is scored at its rightmost real token (position 4, 2, 3 here).
    const auto gpt2 = randomModel(gpt2Classifier());
    m::ForwardOptions options;
    options.attentionMask = rows({{0, 0, 1, 1, 1}, {1, 1, 1, 0, 0}, {0, 1, 1, 1, 0}});
    const auto out = gpt2->forward(rows({{9, 9, 7, 8, 9}, {7, 8, 9, 9, 9}, {9, 7, 8, 9, 9}}), options);
    const auto score = gpt2->named_parameters()["score.weight"];  // [3, C]
    const std::vector<int64_t> last{4, 2, 3};
    for (int64_t b = 0; b < 3; ++b)
      QVERIFY(hh::test::relativeError(out.logits[b], torch::mv(score, out.hidden[b][last[size_t(b)]])) < 1e-6);
  }

  void headsTheEngineDoesNotRunAreRefused() {
    const std::vector<std::pair<json, std::vector<std::string>>> refused{
        {gpt2Classifier(), {"GPT2ForTokenClassification", "GPT2ForQuestionAnswering"}},
        {bertBase(), {"BertForTokenClassification", "BertForQuestionAnswering", "BertForNextSentencePrediction"}},
        {llamaClassifier(), {"LlamaForTokenClassification", "LlamaForQuestionAnswering"}},
    };
    for (const auto& [base, names] : refused) {
      for (const auto& name : names) {
        auto config = base;
        config["architectures"] = {name};
        std::string path;
        const auto error = configError(config, &path);
        QVERIFY2(error.find(path) != std::string::npos && error.find("\"" + name + "\"") != std::string::npos,
                 (name + ": " + error).c_str());
      }
    }
    const std::vector<std::pair<json, std::vector<std::string>>> accepted{
        {gpt2Classifier(), {"GPT2LMHeadModel", "GPT2ForSequenceClassification", "GPT2DoubleHeadsModel", "GPT2Model"}},
        {bertBase(), {"BertForMaskedLM", "BertLMHeadModel", "BertForPreTraining", "BertForSequenceClassification"}},
        {llamaClassifier(), {"LlamaForCausalLM", "MistralForCausalLM", "LlamaForSequenceClassification", "LlamaModel"}},
    };
    for (const auto& [base, names] : accepted) {
      for (const auto& name : names) {
        auto config = base;
        config["architectures"] = {name};
        QVERIFY2(configError(config).empty(), name.c_str());
      }
    }
    // No "architectures" key, or a bare body: the family's LM head (the weights then decide).
    auto bare = gpt2Classifier();
    bare.erase("architectures");
    QVERIFY(m::parseModelConfig(bare, "a").head == m::HeadKind::CausalLM);
    bare["architectures"] = {"GPT2Model"};
    QVERIFY(m::parseModelConfig(bare, "a").head == m::HeadKind::CausalLM);
    auto bertBody = bertBase();
    bertBody["architectures"] = {"BertModel"};
    QVERIFY(m::parseModelConfig(bertBody, "a").head == m::HeadKind::MaskedLM);
  }

  void labelsCountedFromId2label() {
    // Hugging Face writes id2label and label2id, not num_labels.
    const json labels{{"0", "a"}, {"1", "b"}, {"2", "c"}, {"3", "d"}};
    auto bert = bertBase();
    bert["architectures"] = {"BertForSequenceClassification"};
    for (auto config : {gpt2Classifier(), llamaClassifier(), bert}) {
      config.erase("num_labels");
      QCOMPARE(m::parseModelConfig(config, "a").numLabels, int64_t(2));  // the default
      config["id2label"] = labels;
      QCOMPARE(m::parseModelConfig(config, "a").numLabels, int64_t(4));
      config["num_labels"] = 5;
      QCOMPARE(m::parseModelConfig(config, "a").numLabels, int64_t(5));  // num_labels first
    }
    // A saved 3-label GPT-2 classifier whose config has only id2label loads.
    hh::test::TempDir dir("heads_id2label");
    m::saveModel(*randomModel(gpt2Classifier()), dir.file("model"));
    auto config = readJson(dir.file("model/config.json"));
    config.erase("num_labels");
    config["id2label"] = {{"0", "a"}, {"1", "b"}, {"2", "c"}};
    hh::test::writeJson(dir.file("model/config.json"), config);
    const auto model = m::loadModel(dir.file("model"));
    QCOMPARE(model->config().numLabels, int64_t(3));
  }

  void classifiersHaveNoLmHead() {
    // Llama's classifier (untied by default) and GPT-2's with tie_word_embeddings false: no
    // lm_head is made, expected, exported or needed to load.
    auto gpt2 = gpt2Classifier();
    gpt2["tie_word_embeddings"] = false;
    for (const auto& config : {llamaClassifier(), gpt2}) {
      const auto model = randomModel(config);
      for (const auto& [name, t] : model->exportWeights()) QVERIFY2(name != "lm_head.weight", name.c_str());
      for (const auto& spec : m::expectedWeights(model->config())) QVERIFY(spec.name != "lm_head.weight");
      hh::test::TempDir dir("heads_no_lm_head");
      m::saveModel(*model, dir.file("model"));
      const auto reloaded = m::loadModel(dir.file("model"));
      at::NoGradGuard noGrad;
      const auto ids = rows({{3, 4, 5, 6}});
      QVERIFY(torch::equal(reloaded->forward(ids).logits, model->forward(ids).logits));
    }
  }
};

// clang-format off
HH_TEST_SUITE(TestModelHeads, "engine.models.heads", &TestModelHeads::bertDecoderAttendsCausally, &TestModelHeads::leftPaddedRowScoresLikeTheUnpaddedRow, &TestModelHeads::headsTheEngineDoesNotRunAreRefused, &TestModelHeads::labelsCountedFromId2label, &TestModelHeads::classifiersHaveNoLmHead)
// clang-format on

}  // namespace test_model_heads

#if HH_HAVE_QTEST
#include "test_model_heads.moc"
#endif
