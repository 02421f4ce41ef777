// TrainConfig <-> JSON (project files, the run file's config attribute). Every default is
// written out by toJson so a project file documents itself.
#include <cmath>

#include "engine/config/json_reader.h"
#include "engine/config/compute_dtype.h"
#include "engine/config/attention_plan.h"
#include "engine/config/train_config.h"

namespace hh::jobs {

nlohmann::json toJson(const ArchitectureConfig& a) {
  return {{"model_type", a.modelType}, {"n_embd", a.nEmbd},           {"n_layer", a.nLayer},
          {"n_head", a.nHead},         {"n_kv_head", a.nKvHead},      {"n_inner", a.nInner},
          {"n_positions", a.nPositions}, {"activation", a.activation}, {"rope_theta", a.ropeTheta}};
}

ArchitectureConfig architectureConfigFromJson(const nlohmann::json& j, const std::string& where) {
  ArchitectureConfig a;
  if (!j.is_object()) throw std::invalid_argument(where + ": must be a JSON object");
  JsonReader r{j, where, {}};
  r.read("model_type", a.modelType);
  r.read("n_embd", a.nEmbd);
  r.read("n_layer", a.nLayer);
  r.read("n_head", a.nHead);
  r.read("n_kv_head", a.nKvHead);
  r.read("n_inner", a.nInner);
  r.read("n_positions", a.nPositions);
  r.read("activation", a.activation);
  r.read("rope_theta", a.ropeTheta);
  r.checkUnknownKeys();
  if (a.modelType != "gpt2" && a.modelType != "llama")
    throw std::invalid_argument(where + ": model_type must be \"gpt2\" or \"llama\"");
  if (a.nEmbd <= 0 || a.nLayer <= 0 || a.nHead <= 0 || a.nPositions <= 0 || a.nInner < 0 || a.nKvHead < 0)
    throw std::invalid_argument(where + ": n_embd, n_layer, n_head and n_positions must be positive");
  if (a.nEmbd % a.nHead != 0) throw std::invalid_argument(where + ": n_embd must be a multiple of n_head");
  return a;
}

nlohmann::json architectureToHfJson(const ArchitectureConfig& a, int64_t vocabSize, int64_t bosId, int64_t eosId) {
  nlohmann::json j;
  if (a.modelType == "gpt2") {
    j = {{"model_type", "gpt2"}, {"architectures", {"GPT2LMHeadModel"}}, {"vocab_size", vocabSize},
         {"n_embd", a.nEmbd}, {"n_layer", a.nLayer}, {"n_head", a.nHead},
         {"n_inner", a.nInner > 0 ? nlohmann::json(a.nInner) : nlohmann::json(nullptr)},
         {"n_positions", a.nPositions}, {"n_ctx", a.nPositions},
         {"activation_function", a.activation.empty() ? "gelu_new" : a.activation},
         {"layer_norm_epsilon", 1e-5}, {"tie_word_embeddings", true}};
  } else {
    const int64_t inner = a.nInner > 0 ? a.nInner : ((a.nEmbd * 8 / 3 + 7) / 8) * 8;
    j = {{"model_type", "llama"}, {"architectures", {"LlamaForCausalLM"}}, {"vocab_size", vocabSize},
         {"hidden_size", a.nEmbd}, {"num_hidden_layers", a.nLayer}, {"num_attention_heads", a.nHead},
         {"num_key_value_heads", a.nKvHead > 0 ? a.nKvHead : a.nHead}, {"intermediate_size", inner},
         {"max_position_embeddings", a.nPositions}, {"hidden_act", a.activation.empty() ? "silu" : a.activation},
         {"rms_norm_eps", 1e-5}, {"rope_theta", a.ropeTheta}, {"tie_word_embeddings", true}};
  }
  if (bosId >= 0) j["bos_token_id"] = bosId;
  if (eosId >= 0) j["eos_token_id"] = eosId;
  return j;
}

nlohmann::json toJson(const data::SyntheticTaskConfig& t) {
  return {{"kind", t.kind},
          {"vocab_size", t.vocabSize},
          {"sequence_length", t.sequenceLength},
          {"train_samples", t.trainSamples},
          {"test_samples", t.testSamples},
          {"seed", t.seed},
          {"supervision", t.supervision}};
}

data::SyntheticTaskConfig syntheticTaskFromJson(const nlohmann::json& j, const std::string& where) {
  data::SyntheticTaskConfig t;
  if (!j.is_object()) throw std::invalid_argument(where + ": must be a JSON object");
  JsonReader r{j, where, {}};
  r.read("kind", t.kind);
  r.read("vocab_size", t.vocabSize);
  r.read("sequence_length", t.sequenceLength);
  r.read("train_samples", t.trainSamples);
  r.read("test_samples", t.testSamples);
  r.read("seed", t.seed);
  r.read("supervision", t.supervision);
  r.checkUnknownKeys();
  if (t.enabled()) {
    try {
      data::validateSyntheticTask(t);
    } catch (const std::invalid_argument& e) {
      const std::string what = e.what(), prefix = "synthetic task: ";
      throw std::invalid_argument(where + ": " + (what.rfind(prefix, 0) == 0 ? what.substr(prefix.size()) : what));
    }
  }
  return t;
}

namespace {

// Train's own plain keys (kOptimizationKeys has the rest).
constexpr auto kTrainKeys = [](auto& c, auto&& key) {
  key("model", c.modelDir);
  key("tokenizer", c.tokenizer);
  key("output_dir", c.outputDir);
  key("run_dir", c.runDir);
  key("feature_map", c.featureMap);
  key("rule", c.rule);
  key("layers", c.layers);
  key("exp_t", c.expT);
  key("beta1", c.beta1);
  key("beta2", c.beta2);
};

}  // namespace

nlohmann::json toJson(const TrainConfig& c) {
  nlohmann::json j{{"architecture", toJson(c.architecture)}, {"data", toJson(c.data)}, {"task", toJson(c.task)}};
  writeKeys(j, c, kTrainKeys);
  writeKeys(j, c, kOptimizationKeys);
  return j;
}

TrainConfig trainConfigFromJson(const nlohmann::json& j) {
  TrainConfig c;
  JsonReader r{j, "train config", {}};
  readKeys(r, c, kTrainKeys);
  readKeys(r, c, kOptimizationKeys);
  checkComputeDtype(c.dtype, r.where);
  r.read("debug_nan_at_step", c.debugNanAtStep);
  r.seen.insert("architecture");
  r.seen.insert("data");
  r.seen.insert("task");
  if (j.contains("architecture") && !j.at("architecture").is_null())
    c.architecture = architectureConfigFromJson(j.at("architecture"), "train config \"architecture\"");
  if (j.contains("data")) c.data = dataConfigFromJson(j.at("data"), "train config \"data\"");
  if (j.contains("task") && !j.at("task").is_null()) c.task = syntheticTaskFromJson(j.at("task"), "train config \"task\"");
  r.checkUnknownKeys();
  if (c.task.enabled() && !c.tokenizer.empty())
    throw std::invalid_argument("train config: \"tokenizer\" must be empty with a \"task\" (task runs have no tokenizer)");
  if (!(c.expT > 0) || !std::isfinite(c.expT)) throw std::invalid_argument("train config: exp_t must be positive");
  if (!c.featureMap.empty() && c.featureMap != "softmax") {  // train takes a map's name; exp_t is a key of its own
    if (c.featureMap.find('=') != std::string::npos)
      throw std::invalid_argument("train config: feature_map is a name (" + c.featureMap + "); give exp_t's t as \"exp_t\"");
    models::checkPlanKeys({c.featureMap, c.rule, 0, c.layers, {}, c.seed}, r.where);
  } else if (c.rule != "additive" || !c.layers.empty()) {  // they shape a linear map: ignored, they would mislead
    throw std::invalid_argument("train config: rule and layers apply to a linear feature_map; with feature_map \"" +
                                c.featureMap + "\" (" + (c.featureMap.empty() ? "the model's own plan" : "softmax") +
                                ") they would be ignored");
  }
  checkOptimizationKeys(c, r.where);
  return c;
}

}  // namespace hh::jobs
