// engine.models.config: config.json as Hugging Face writes it for GPT-2, BERT and Llama — the
// defaults and alternative spellings that change the model (n_inner null, gelu vs gelu_new,
// num_key_value_heads, head_dim, the two places of rope_theta, rope scaling, rms_norm_eps,
// tie_word_embeddings per family, eos_token_id lists, id2label), one ConfigError per malformed
// config whose message names the file and the key as the file spells it, and the attention plan
// ("hedgehog_attention") through JSON and back, with its malformed forms.
#include <nlohmann/json.hpp>

#include <fstream>
#include <string>
#include <vector>

#include "engine/config/model_config.h"
#include "tests/support/temp_dir.h"
#include "tests/support/hh_test.h"

namespace test_model_config {

namespace {

namespace m = hh::models;
namespace attn = hh::attn;
using nlohmann::json;

const std::string kGpt2Dir = std::string(HH_FIXTURES_DIR) + "/tiny-random-gpt2";

json gpt2Base() {
  return json{{"model_type", "gpt2"}, {"architectures", {"GPT2LMHeadModel"}},
              {"vocab_size", 100},    {"n_embd", 32},
              {"n_layer", 2},         {"n_head", 4},
              {"n_positions", 64}};
}
json bertBase() {
  return json{{"model_type", "bert"},   {"architectures", {"BertForMaskedLM"}},
              {"vocab_size", 100},      {"hidden_size", 32},
              {"num_hidden_layers", 2}, {"num_attention_heads", 4},
              {"intermediate_size", 64}};
}
json llamaBase() {
  return json{{"model_type", "llama"},  {"architectures", {"LlamaForCausalLM"}},
              {"vocab_size", 100},      {"hidden_size", 32},
              {"num_hidden_layers", 4}, {"num_attention_heads", 4},
              {"intermediate_size", 64}};
}
json with(json j, const std::string& key, const json& value) {
  j[key] = value;
  return j;
}
json without(json j, const std::string& key) {
  j.erase(key);
  return j;
}

// Writes `text` as <tmp>/config.json and loads it; returns "" when it fails with a ConfigError
// whose message names that file and every needle, else what went wrong.
std::string configErrorProblem(const std::string& text, const std::vector<std::string>& needles) {
  hh::test::TempDir dir("config_error");
  {
    std::ofstream out(dir.file("config.json"), std::ios::binary);
    out << text;
  }
  try {
    const auto config = m::loadModelConfig(dir.path());
    return "no error for " + text + " (parsed as " + config.describe() + ")";
  } catch (const m::ConfigError& e) {
    const std::string what = e.what();
    if (what.find(dir.file("config.json")) == std::string::npos) return "\"" + what + "\" does not name the file";
    for (const auto& needle : needles)
      if (what.find(needle) == std::string::npos) return "\"" + what + "\" lacks \"" + needle + "\"";
    qInfo("  %s", what.substr(what.find("config.json") + 13).c_str());
    return "";
  } catch (const std::exception& e) {
    return std::string("not a ConfigError: ") + e.what();
  }
}

attn::LinearAttentionConfig linearConfig(attn::FeatureMapKind kind) {
  attn::LinearAttentionConfig c;
  c.featureMap.kind = kind;
  return c;
}

bool sameLinearConfig(const attn::LinearAttentionConfig& a, const attn::LinearAttentionConfig& b) {
  return a.featureMap.kind == b.featureMap.kind && a.featureMap.randomFeatures == b.featureMap.randomFeatures &&
         a.featureMap.expT == b.featureMap.expT && a.featureMap.cosformerMaxLength == b.featureMap.cosformerMaxLength &&
         a.featureMap.seed == b.featureMap.seed && a.rule.rule == b.rule.rule && a.rule.causal == b.rule.causal &&
         a.rule.chunkSize == b.rule.chunkSize && a.rule.eps == b.rule.eps && a.window == b.window;
}

// A hybrid plan over 4 layers: 0 hedgehog (chunk 32, eps 1e-5), 2 performer (16 features,
// seed 7, gated), 3 exp_t (t = 2, decay); 1 keeps softmax.
m::AttentionPlan hybridPlan() {
  auto hedgehog = linearConfig(attn::FeatureMapKind::Hedgehog);
  hedgehog.rule.chunkSize = 32;
  hedgehog.rule.eps = 1e-5;
  auto plan = m::AttentionPlan::hybrid(4, {0, 2, 3}, hedgehog);
  auto& performer = plan.layers[2].config;
  performer.featureMap.kind = attn::FeatureMapKind::Performer;
  performer.featureMap.randomFeatures = 16;
  performer.featureMap.seed = 7;
  performer.rule.rule = attn::UpdateRule::Gated;
  auto& expT = plan.layers[3].config;
  expT.featureMap.kind = attn::FeatureMapKind::ExpT;
  expT.featureMap.expT = 2.0;
  expT.rule.rule = attn::UpdateRule::Decay;
  return plan;
}

bool samePlan(const m::AttentionPlan& a, const m::AttentionPlan& b) {
  if (a.layers.size() != b.layers.size()) return false;
  for (size_t i = 0; i < a.layers.size(); ++i) {
    if (a.layers[i].linear != b.layers[i].linear) return false;
    if (a.layers[i].linear && !sameLinearConfig(a.layers[i].config, b.layers[i].config)) return false;
  }
  return true;
}

}  // namespace

class TestModelConfig : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void gpt2FixtureDefaults() {
    // The fixture has "n_inner": null (4 n_embd), and decoys GPT-2 does not read:
    // "intermediate_size": 37 and "hidden_act": "gelu" next to "activation_function": "gelu_new".
    const auto c = m::loadModelConfig(kGpt2Dir);
    QVERIFY(c.architecture == m::Architecture::Gpt2);
    QCOMPARE(c.intermediateSize, int64_t(4 * 32));
    QCOMPARE(c.activation, std::string("gelu_new"));
    QCOMPARE(c.hiddenSize, int64_t(32));
    QCOMPARE(c.layers, int64_t(5));
    QCOMPARE(c.heads, int64_t(4));
    QCOMPARE(c.kvHeads, int64_t(4));
    QCOMPARE(c.headDim, int64_t(8));
    QCOMPARE(c.maxPositions, int64_t(512));
    QCOMPARE(c.normEps, 1e-5);
    QVERIFY(c.tieWordEmbeddings);
    QVERIFY(c.causal);
    QVERIFY(c.positions == m::PositionalScheme::Learned);
    QVERIFY(c.head == m::HeadKind::CausalLM);
    QCOMPARE(c.eosTokenId, int64_t(98));
    // n_inner absent is 4 n_embd too; a number is taken as written.
    QCOMPARE(m::parseModelConfig(gpt2Base(), "a").intermediateSize, int64_t(128));
    QCOMPARE(m::parseModelConfig(with(gpt2Base(), "n_inner", 100), "a").intermediateSize, int64_t(100));
  }

  void gpt2ActivationKept() {
    for (const char* name : {"gelu", "gelu_new", "relu", "gelu_pytorch_tanh"})
      QCOMPARE(m::parseModelConfig(with(gpt2Base(), "activation_function", name), "a").activation, std::string(name));
    QCOMPARE(m::parseModelConfig(gpt2Base(), "a").activation, std::string("gelu_new"));  // HF default
    QCOMPARE(m::parseModelConfig(bertBase(), "a").activation, std::string("gelu"));      // BERT default: erf
    // GPT-2 is tied unless told otherwise; Llama is untied unless told otherwise.
    QVERIFY(m::parseModelConfig(gpt2Base(), "a").tieWordEmbeddings);
    QVERIFY(!m::parseModelConfig(with(gpt2Base(), "tie_word_embeddings", false), "a").tieWordEmbeddings);
    QVERIFY(!m::parseModelConfig(llamaBase(), "a").tieWordEmbeddings);
    QVERIFY(m::parseModelConfig(with(llamaBase(), "tie_word_embeddings", true), "a").tieWordEmbeddings);
  }

  void llamaDefaults() {
    const auto c = m::parseModelConfig(llamaBase(), "a");
    QVERIFY(c.architecture == m::Architecture::Llama);
    QCOMPARE(c.kvHeads, c.heads);          // num_key_value_heads absent: no grouping
    QCOMPARE(c.headDim, int64_t(32 / 4));  // head_dim absent: C / H
    QCOMPARE(c.ropeTheta, 10000.0);
    QCOMPARE(c.normEps, 1e-6);
    QCOMPARE(c.activation, std::string("silu"));
    QVERIFY(c.positions == m::PositionalScheme::Rotary);
    QVERIFY(c.causal);
    QVERIFY(!c.qkvBias && !c.outputBias);
    QVERIFY(!c.mlpBias);
    QCOMPARE(c.ropeScaling.type, std::string("default"));
    // mistral / qwen2 read as Llama-style models.
    const auto qwen2 = m::parseModelConfig(with(llamaBase(), "model_type", "qwen2"), "a");
    QVERIFY(qwen2.architecture == m::Architecture::Llama);
    QVERIFY(qwen2.qkvBias && !qwen2.outputBias);  // Qwen2's q/k/v biases need no key
    HH_VERIFY_THROWS_WITH(
        m::parseModelConfig(with(with(llamaBase(), "model_type", "qwen2"), "use_sliding_window", true), "a"),
        "use_sliding_window");
  }

  void llamaExplicitKeys() {
    auto j = llamaBase();
    j["num_key_value_heads"] = 2;
    j["head_dim"] = 16;  // not C / H = 8
    j["rms_norm_eps"] = 1e-5;
    j["attention_bias"] = true;
    const auto c = m::parseModelConfig(j, "a");
    QCOMPARE(c.kvHeads, int64_t(2));
    QCOMPARE(c.headDim, int64_t(16));
    QCOMPARE(c.normEps, 1e-5);
    QVERIFY(c.qkvBias && c.outputBias);
    // rope_theta at the top level, or inside rope_parameters (newer transformers).
    QCOMPARE(m::parseModelConfig(with(llamaBase(), "rope_theta", 500000.0), "a").ropeTheta, 500000.0);
    const auto nested = m::parseModelConfig(
        with(llamaBase(), "rope_parameters", json{{"rope_type", "default"}, {"rope_theta", 250000.0}}), "a");
    QCOMPARE(nested.ropeTheta, 250000.0);
    QCOMPARE(nested.ropeScaling.type, std::string("default"));
    // rope_scaling: the older "type" spelling and llama3's keys.
    const auto linear =
        m::parseModelConfig(with(llamaBase(), "rope_scaling", json{{"type", "linear"}, {"factor", 4.0}}), "a");
    QCOMPARE(linear.ropeScaling.type, std::string("linear"));
    QCOMPARE(linear.ropeScaling.factor, 4.0);
    const auto llama3 = m::parseModelConfig(with(llamaBase(), "rope_scaling",
                                                 json{{"rope_type", "llama3"},
                                                      {"factor", 32.0},
                                                      {"low_freq_factor", 1.0},
                                                      {"high_freq_factor", 4.0},
                                                      {"original_max_position_embeddings", 8192}}),
                                            "a");
    QCOMPARE(llama3.ropeScaling.type, std::string("llama3"));
    QCOMPARE(llama3.ropeScaling.factor, 32.0);
    QCOMPARE(llama3.ropeScaling.highFreqFactor, 4.0);
    QCOMPARE(llama3.ropeScaling.originalMaxPositions, int64_t(8192));
  }

  void tokenIds() {
    auto j = llamaBase();
    j["bos_token_id"] = 128000;
    j["eos_token_id"] = json::array({128001, 128008, 128009});  // Llama 3 lists several
    j["pad_token_id"] = nullptr;
    const auto c = m::parseModelConfig(j, "a");
    QCOMPARE(c.bosTokenId, int64_t(128000));
    QCOMPARE(c.eosTokenId, int64_t(128001));
    QCOMPARE(c.padTokenId, int64_t(-1));
  }

  void bertHeads() {
    const auto mlm = m::parseModelConfig(bertBase(), "a");
    QVERIFY(mlm.head == m::HeadKind::MaskedLM);
    QCOMPARE(mlm.numLabels, int64_t(0));
    QVERIFY(!mlm.causal);
    QVERIFY(mlm.tieWordEmbeddings);
    QCOMPARE(mlm.normEps, 1e-12);
    QCOMPARE(mlm.typeVocabSize, int64_t(2));
    QCOMPARE(mlm.maxPositions, int64_t(512));
    auto cls = bertBase();
    cls["architectures"] = {"BertForSequenceClassification"};
    cls["id2label"] = {{"0", "negative"}, {"1", "neutral"}, {"2", "positive"}};
    cls["label2id"] = {{"negative", 0}, {"neutral", 1}, {"positive", 2}};
    const auto c = m::parseModelConfig(cls, "a");
    QVERIFY(c.head == m::HeadKind::SequenceClassification);
    QCOMPARE(c.numLabels, int64_t(3));
    QCOMPARE(m::parseModelConfig(without(cls, "id2label"), "a").numLabels, int64_t(2));  // HF default
    QCOMPARE(m::parseModelConfig(with(cls, "num_labels", 5), "a").numLabels, int64_t(5));
  }

  void errorsNameFileAndKey() {
    struct Case {
      std::string text;
      std::vector<std::string> needles;
    };
    auto gpt2 = gpt2Base(), bert = bertBase(), llama = llamaBase();
    const std::vector<Case> cases{
        {"{\"model_type\": \"gpt2\", \"n_embd\": 32,", {"not valid JSON"}},
        {"[1, 2, 3]", {"JSON object"}},
        {without(gpt2, "model_type").dump(), {"model_type"}},
        {with(gpt2, "model_type", "t5").dump(), {"model_type", "t5"}},
        {with(gpt2, "model_type", 2).dump(), {"model_type"}},
        {with(gpt2, "n_layer", "five").dump(), {"\"n_layer\"", "five"}},
        {with(bert, "hidden_size", 32.5).dump(), {"\"hidden_size\""}},
        {with(llama, "tie_word_embeddings", "yes").dump(), {"\"tie_word_embeddings\""}},
        {with(llama, "rms_norm_eps", "small").dump(), {"\"rms_norm_eps\""}},
        {without(bert, "num_hidden_layers").dump(), {"\"num_hidden_layers\""}},
        {without(gpt2, "vocab_size").dump(), {"\"vocab_size\""}},
        // sizes that do not fit together
        {with(bert, "hidden_size", 30).dump(), {"hidden_size", "num_attention_heads", "30"}},
        {with(gpt2, "n_embd", 30).dump(), {"n_embd", "n_head", "30"}},
        {with(llama, "num_key_value_heads", 3).dump(), {"num_attention_heads", "num_key_value_heads", "3"}},
        // negative or zero sizes, under the family's own key
        {with(bert, "vocab_size", -5).dump(), {"\"vocab_size\"", "-5"}},
        {with(gpt2, "n_layer", -1).dump(), {"\"n_layer\"", "-1"}},
        {with(gpt2, "n_head", 0).dump(), {"\"n_head\""}},
        {with(gpt2, "n_inner", -8).dump(), {"\"n_inner\""}},
        {with(llama, "intermediate_size", -4).dump(), {"\"intermediate_size\""}},
        {with(llama, "num_key_value_heads", 0).dump(), {"\"num_key_value_heads\""}},
        {with(llama, "head_dim", -2).dump(), {"\"head_dim\""}},
        {with(llama, "head_dim", 0).dump(), {"\"head_dim\""}},  // not silently C / H
        {with(bert, "max_position_embeddings", 0).dump(), {"\"max_position_embeddings\""}},
        // RoPE rotates pairs: an odd head_dim cannot be used
        {with(llama, "head_dim", 5).dump(), {"head_dim", "5"}},
        // activations
        {with(bert, "hidden_act", "mish").dump(), {"hidden_act", "mish"}},
        {with(gpt2, "activation_function", "swiglu").dump(), {"activation_function", "swiglu"}},
        {with(llama, "hidden_act", "gelu_10").dump(), {"hidden_act", "gelu_10"}},
        // features the engine does not implement
        {with(llama, "rope_scaling", json{{"rope_type", "yarn"}, {"factor", 4.0}}).dump(), {"rope", "yarn"}},
        {with(bert, "position_embedding_type", "relative_key").dump(), {"position_embedding_type", "relative_key"}},
        {with(llama, "hedgehog_attention", json{{"layers", json::array()}}).dump(), {"hedgehog_attention"}},
    };
    for (const auto& c : cases) {
      const auto problem = configErrorProblem(c.text, c.needles);
      QVERIFY2(problem.empty(), problem.c_str());
    }
    // A folder without config.json.
    hh::test::TempDir empty("config_missing");
    HH_VERIFY_THROWS(m::ConfigError, m::loadModelConfig(empty.path()));
    HH_VERIFY_THROWS_WITH(m::loadModelConfig(empty.path()), empty.file("config.json"));
  }

  void attentionPlanRoundTrip() {
    const auto plan = hybridPlan();
    QCOMPARE(plan.linearLayerCount(), int64_t(3));
    const auto j = m::attentionPlanToJson(plan);
    QCOMPARE(j.at("layers").size(), size_t(4));
    QCOMPARE(j.at("layers")[1].at("attention").get<std::string>(), std::string("softmax"));
    QCOMPARE(j.at("layers")[2].at("feature_map").get<std::string>(), std::string("performer"));
    QVERIFY(samePlan(m::parseAttentionPlan(j, 4, "plan"), plan));
    // Values out of range gave wrong numbers, not errors: eps -1 a negative KL, exp_t 0 NaN ranks.
    for (const auto& [key, value] : std::vector<std::pair<std::string, json>>{
             {"eps", -1.0}, {"eps", 0.0}, {"exp_t", 0.0}, {"random_features", -3}, {"cosformer_max_length", 0}}) {
      auto bad = j;
      bad["layers"][0][key] = value;
      HH_VERIFY_THROWS_WITH(m::parseAttentionPlan(bad, 4, "plan"), key + " must be");
    }
    // Through a whole config.json: written under "hedgehog_attention" and read back.
    auto config = m::parseModelConfig(llamaBase(), "a");
    config.plan = plan;
    const auto written = m::modelConfigToJson(config);
    QVERIFY(written.contains("hedgehog_attention"));
    const auto reread = m::parseModelConfig(json::parse(written.dump()), "b");
    QVERIFY(samePlan(reread.plan, plan));
    QCOMPARE(reread.describe(), config.describe());
    // An all-softmax plan writes no key.
    config.plan = {};
    QVERIFY(!m::modelConfigToJson(config).contains("hedgehog_attention"));
    // Uniform: every layer linear with the same settings.
    const auto uniform = m::AttentionPlan::uniform(3, linearConfig(attn::FeatureMapKind::T2R));
    QVERIFY(samePlan(m::parseAttentionPlan(m::attentionPlanToJson(uniform), 3, "u"), uniform));
    HH_VERIFY_THROWS(std::invalid_argument, m::AttentionPlan::hybrid(4, {4}, linearConfig(attn::FeatureMapKind::Elu)));
  }

  void layerSpecsAndWindowPlans() {
    // The short per-layer form configs and --plan use, and describe() writing it back.
    const std::vector<std::string> specs{"softmax", "hedgehog_window(16)", "t2r/gated", "exp_t=2", "hedgehog_window"};
    const auto plan = m::AttentionPlan::fromSpecs(specs);
    QCOMPARE(plan.linearLayerCount(), int64_t(4));
    QCOMPARE(plan.layers[1].config.window, int64_t(16));
    QCOMPARE(plan.layers[4].config.window, attn::kDefaultWindow);
    QVERIFY(plan.layers[2].config.rule.rule == attn::UpdateRule::Gated);
    QCOMPARE(plan.layers[3].config.featureMap.expT, 2.0);
    auto written = specs;
    written[4] = "hedgehog_window(64)";
    QVERIFY(plan.specs() == written);
    QCOMPARE(plan.summary(), std::string("softmax, hedgehog_window(16), t2r/gated, exp_t=2, hedgehog_window(64)"));
    QCOMPARE(m::AttentionPlan::fromSpecs({"hedgehog", "hedgehog"}).summary(), std::string("hedgehog in all 2 layers"));
    // The window survives config.json: "attention": "hedgehog_window" with its "window".
    const auto j = m::attentionPlanToJson(plan);
    QCOMPARE(j.at("layers")[1].at("attention").get<std::string>(), std::string("hedgehog_window"));
    QCOMPARE(j.at("layers")[1].at("window").get<int64_t>(), int64_t(16));
    QVERIFY(m::parseAttentionPlan(j, 5, "plan").specs() == written);
    // A job's keys: the specs win; otherwise map, rule and window on the chosen layers.
    m::PlanKeys keys;
    keys.window = 8;
    keys.layers = {1};
    QVERIFY((m::planFromKeys(keys, 3).specs() == std::vector<std::string>{"softmax", "hedgehog_window(8)", "softmax"}));
    keys.specs = {"softmax", "hedgehog", "softmax"};
    QVERIFY(m::planFromKeys(keys, 3).specs() == keys.specs);
    HH_VERIFY_THROWS_WITH(m::planFromKeys(keys, 4), "the plan lists 3 layers, the model has 4");
    // Bad specs name the layer and the problem.
    HH_VERIFY_THROWS_WITH(m::AttentionPlan::fromSpecs({"hedgehog", "fourier"}), "layer 1");
    HH_VERIFY_THROWS_WITH(m::AttentionPlan::fromSpecs({"hedgehog_window(0)"}), "_window(W), W >= 1");
    HH_VERIFY_THROWS_WITH(m::AttentionPlan::fromSpecs({"hedgehog_window(8)/gated"}), "additive rule");
    HH_VERIFY_THROWS_WITH(m::AttentionPlan::fromSpecs({"hedgehog_window(x)"}), "_window(W)");
    auto badWindow = j;
    badWindow["layers"][1]["window"] = 0;
    HH_VERIFY_THROWS_WITH(m::parseAttentionPlan(badWindow, 5, "plan.json"), "window must be at least 1");
  }

  // Found by fuzz/fuzz_model_config (docs/reliability.md): an integer key spelled as a float
  // beyond int64's range was converted to int64 before any range check (undefined behaviour,
  // reported by UBSan; plain x86 builds happened to reject it). Now it is the ordinary "must be an
  // integer" error, as are 2^63 and -1e300, while whole floats inside the range still count.
  void fuzzHugeFloatForIntegerKey() {
    const std::string crash =
        R"({"model_type": "bert", "architectures": ["BertForSequenceClassification"], )"
        R"("vocab_size": 128000000000000000000000000000000000000000000000000000000,)"
        "\n"
        R"( "hidden_size": 16, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 32,)"
        "\n"
        R"( "max_position_embeddings": 64, "type_vocab_size": 2, "layer_norm_eps": 1e-12, "hidden_act": "gelu",)"
        "\n"
        R"( "position_embedding_type": "absolute", "id2label": {"0": "ham", "1": "spam"}, "pad_token_id": 0})";
    auto problem = configErrorProblem(crash, {"\"vocab_size\" must be an integer"});
    QVERIFY2(problem.empty(), problem.c_str());
    problem = configErrorProblem(with(bertBase(), "hidden_size", 9223372036854775808.0).dump(), {"\"hidden_size\" must be an integer"});
    QVERIFY2(problem.empty(), problem.c_str());
    problem = configErrorProblem(with(bertBase(), "hidden_size", -1e300).dump(), {"\"hidden_size\" must be an integer"});
    QVERIFY2(problem.empty(), problem.c_str());
    QCOMPARE(m::parseModelConfig(with(bertBase(), "vocab_size", 128.0), "a").vocabSize, int64_t(128));
    // Found by fuzz/fuzz_model_config once it required every rejection to name the file: a number
    // past a double's range is JSON's out_of_range, not a parse_error, and left without the path.
    problem = configErrorProblem(R"({"model_type": "gpt2", "n_embd": 321e308})", {"not valid JSON", "number overflow"});
    QVERIFY2(problem.empty(), problem.c_str());
  }

  void badAttentionPlans() {
    auto plan = m::attentionPlanToJson(hybridPlan());  // 4 layers
    HH_VERIFY_THROWS(m::ConfigError, m::parseAttentionPlan(plan, 5, "plan.json"));
    HH_VERIFY_THROWS_WITH(m::parseAttentionPlan(plan, 5, "plan.json"), "plan.json");
    HH_VERIFY_THROWS_WITH(m::parseAttentionPlan(plan, 5, "plan.json"), "lists 4 layers, the model has 5");
    auto unknownMap = plan;
    unknownMap["layers"][2]["feature_map"] = "fourier";
    HH_VERIFY_THROWS(m::ConfigError, m::parseAttentionPlan(unknownMap, 4, "plan.json"));
    HH_VERIFY_THROWS_WITH(m::parseAttentionPlan(unknownMap, 4, "plan.json"), "hedgehog_attention layer 2");
    HH_VERIFY_THROWS_WITH(m::parseAttentionPlan(unknownMap, 4, "plan.json"), "fourier");
    auto unknownRule = plan;
    unknownRule["layers"][0]["rule"] = "hebbian";
    HH_VERIFY_THROWS_WITH(m::parseAttentionPlan(unknownRule, 4, "plan.json"), "hebbian");
    auto unknownKind = plan;
    unknownKind["layers"][1]["attention"] = "sparse";
    HH_VERIFY_THROWS(m::ConfigError, m::parseAttentionPlan(unknownKind, 4, "plan.json"));
    HH_VERIFY_THROWS_WITH(m::parseAttentionPlan(unknownKind, 4, "plan.json"), "sparse");
    auto badChunk = plan;
    badChunk["layers"][0]["chunk_size"] = 0;
    HH_VERIFY_THROWS_WITH(m::parseAttentionPlan(badChunk, 4, "plan.json"), "chunk_size");
    auto badType = plan;
    badType["layers"][3]["exp_t"] = "two";
    HH_VERIFY_THROWS_WITH(m::parseAttentionPlan(badType, 4, "plan.json"), "\"exp_t\"");
    HH_VERIFY_THROWS(m::ConfigError, m::parseAttentionPlan(json::array(), 4, "plan.json"));
    HH_VERIFY_THROWS(m::ConfigError, m::parseAttentionPlan(json{{"layers", 4}}, 4, "plan.json"));
    // Inside config.json the same errors name the config file.
    HH_VERIFY_THROWS_WITH(m::parseModelConfig(with(llamaBase(), "hedgehog_attention", unknownMap), "dir/config.json"),
                          "dir/config.json (hedgehog_attention layer 2)");
  }
};

// clang-format off
HH_TEST_SUITE(TestModelConfig, "engine.models.config", &TestModelConfig::gpt2FixtureDefaults, &TestModelConfig::gpt2ActivationKept, &TestModelConfig::llamaDefaults, &TestModelConfig::llamaExplicitKeys, &TestModelConfig::tokenIds, &TestModelConfig::bertHeads, &TestModelConfig::errorsNameFileAndKey, &TestModelConfig::attentionPlanRoundTrip, &TestModelConfig::layerSpecsAndWindowPlans, &TestModelConfig::badAttentionPlans, &TestModelConfig::fuzzHugeFloatForIntegerKey)
// clang-format on

}  // namespace test_model_config

#if HH_HAVE_QTEST
#include "test_model_config.moc"
#endif
