#include "engine/config/model_config.h"
#include "engine/io/text_file.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

namespace hh::models {
namespace {

using nlohmann::json;

[[noreturn]] void fail(const std::string& source, const std::string& what) {
  throw ConfigError(source + ": " + what);
}

// Typed readers that name the key in the error. `null` counts as absent.
bool has(const json& j, const char* key) { return j.contains(key) && !j.at(key).is_null(); }

int64_t intKey(const json& j, const char* key, const std::string& source) {
  const auto& v = j.at(key);
  if (v.is_number_integer() || v.is_number_unsigned()) return v.get<int64_t>();
  // A whole float (32.0) counts; converting one outside int64's range is undefined behaviour, so
  // the range is checked first (2^63 itself is out; NaN fails every comparison).
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (d >= -9223372036854775808.0 && d < 9223372036854775808.0 && d == std::trunc(d)) return static_cast<int64_t>(d);
  }
  fail(source, std::string("\"") + key + "\" must be an integer, got " + v.dump());
}
int64_t intOr(const json& j, const char* key, int64_t fallback, const std::string& source) {
  return has(j, key) ? intKey(j, key, source) : fallback;
}
int64_t requiredInt(const json& j, const char* key, const std::string& source) {
  if (!has(j, key)) fail(source, std::string("missing \"") + key + "\"");
  return intKey(j, key, source);
}
// The first present of several spellings (GPT-2 and the generic names).
int64_t requiredIntOf(const json& j, std::initializer_list<const char*> keys, const std::string& source) {
  for (const char* key : keys)
    if (has(j, key)) return intKey(j, key, source);
  fail(source, std::string("missing \"") + *keys.begin() + "\"");
}
double numberOr(const json& j, const char* key, double fallback, const std::string& source) {
  if (!has(j, key)) return fallback;
  const auto& v = j.at(key);
  if (!v.is_number()) fail(source, std::string("\"") + key + "\" must be a number, got " + v.dump());
  return v.get<double>();
}
bool boolOr(const json& j, const char* key, bool fallback, const std::string& source) {
  if (!has(j, key)) return fallback;
  const auto& v = j.at(key);
  if (!v.is_boolean()) fail(source, std::string("\"") + key + "\" must be true or false, got " + v.dump());
  return v.get<bool>();
}
std::string stringOr(const json& j, const char* key, const std::string& fallback, const std::string& source) {
  if (!has(j, key)) return fallback;
  const auto& v = j.at(key);
  if (!v.is_string()) fail(source, std::string("\"") + key + "\" must be a string, got " + v.dump());
  return v.get<std::string>();
}
// A token id key: one id, or a list of them (Llama 3's eos_token_id); absent or null = none.
std::vector<int64_t> tokenIdsOf(const json& j, const char* key, const std::string& source) {
  if (!has(j, key)) return {};
  const auto& v = j.at(key);
  if (!v.is_array()) return {intKey(j, key, source)};
  std::vector<int64_t> ids;
  for (const auto& id : v)
    if (id.is_number_integer()) ids.push_back(id.get<int64_t>());
  return ids;
}
// The first id of the key, -1 when none.
int64_t tokenIdOr(const json& j, const char* key, const std::string& source) {
  const auto ids = tokenIdsOf(j, key, source);
  return ids.empty() ? -1 : ids.front();
}

void checkPositive(int64_t value, const std::string& key, const std::string& source) {
  if (value <= 0) fail(source, "\"" + key + "\" must be positive, got " + std::to_string(value));
}

// The keys behind the sizes, as this family's config.json spells them, for error messages
// (GPT-2 writes n_embd / n_layer / n_head / n_inner / n_positions / activation_function, and
// also accepts the generic names).
struct SizeKeys {
  std::string hidden = "hidden_size", layers = "num_hidden_layers", heads = "num_attention_heads",
              kvHeads = "num_key_value_heads", intermediate = "intermediate_size",
              positions = "max_position_embeddings", activation = "hidden_act";
};
SizeKeys sizeKeys(const json& j, Architecture arch) {
  SizeKeys k;
  auto spelled = [&](std::initializer_list<const char*> keys) {
    for (const char* key : keys)
      if (has(j, key)) return std::string(key);
    return std::string(*keys.begin());
  };
  if (arch == Architecture::Gpt2) {
    k.hidden = spelled({"n_embd", "hidden_size"});
    k.layers = spelled({"n_layer", "num_hidden_layers"});
    k.heads = spelled({"n_head", "num_attention_heads"});
    k.intermediate = "n_inner";
    k.positions = spelled({"n_positions", "n_ctx"});
    k.activation = "activation_function";
  }
  if (arch != Architecture::Llama) k.kvHeads = k.heads;
  return k;
}

// The head a Hugging Face architecture name ("GPT2LMHeadModel", "LlamaForSequenceClassification")
// stands for in this family; nothing for a head the engine does not run.
std::optional<HeadKind> headOfArchitecture(const std::string& name, Architecture arch) {
  const auto contains = [&](const char* part) { return name.find(part) != std::string::npos; };
  if (contains("ForSequenceClassification")) return HeadKind::SequenceClassification;
  if (contains("ForCausalLM") || contains("LMHeadModel"))
    return arch == Architecture::Bert ? HeadKind::MaskedLM : HeadKind::CausalLM;
  if (arch == Architecture::Bert && (contains("ForMaskedLM") || contains("ForPreTraining"))) return HeadKind::MaskedLM;
  if (arch == Architecture::Gpt2 && contains("DoubleHeadsModel"))
    return HeadKind::CausalLM;  // its LM head; the choice head unused
  return std::nullopt;
}

// A bare body ("GPT2Model", "LlamaModel", "BertModel"): no head of its own.
bool isBareBody(const std::string& name) {
  const std::string suffix = "Model";
  return name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0 &&
         name.find("For") == std::string::npos && name.find("Head") == std::string::npos;
}

// The head the "architectures" list names (the family's default when the list is empty or names a
// bare body, whose weights then decide: a tied LM head loads, a missing one is named). A head the
// engine does not run (token classification, question answering) is refused: loading it as an LM
// would drop its head and give unrelated outputs.
HeadKind headFromArchitectures(const std::vector<std::string>& names, Architecture arch, HeadKind fallback,
                               const std::string& source) {
  for (const auto& name : names) {
    if (const auto head = headOfArchitecture(name, arch)) return *head;
    if (isBareBody(name)) return fallback;
    fail(source, "architecture \"" + name + "\" is not supported (" + toString(arch) +
                     " models load with a language-model or sequence-classification head)");
  }
  return fallback;
}

// Classes of a sequence-classification head: num_labels, else the size of id2label (what
// Hugging Face writes), else its default of 2.
int64_t labelCount(const json& j, const std::string& source) {
  if (has(j, "num_labels")) return intKey(j, "num_labels", source);
  if (has(j, "id2label") && j.at("id2label").is_object()) return static_cast<int64_t>(j.at("id2label").size());
  return 2;
}

void readGpt2(const json& j, ModelConfig& c, const std::string& source) {
  c.architecture = Architecture::Gpt2;
  c.vocabSize = requiredInt(j, "vocab_size", source);
  c.hiddenSize = requiredIntOf(j, {"n_embd", "hidden_size"}, source);
  c.layers = requiredIntOf(j, {"n_layer", "num_hidden_layers"}, source);
  c.heads = requiredIntOf(j, {"n_head", "num_attention_heads"}, source);
  c.kvHeads = c.heads;
  c.intermediateSize = has(j, "n_inner") ? intKey(j, "n_inner", source) : 4 * c.hiddenSize;  // null = 4C
  c.maxPositions = has(j, "n_positions") ? intKey(j, "n_positions", source) : intOr(j, "n_ctx", 1024, source);
  c.normEps = numberOr(j, "layer_norm_epsilon", 1e-5, source);
  c.activation = stringOr(j, "activation_function", "gelu_new", source);
  if (!boolOr(j, "scale_attn_weights", true, source)) c.attentionScale = 1.0;
  c.scaleByInverseLayer = boolOr(j, "scale_attn_by_inverse_layer_idx", false, source);
  c.tieWordEmbeddings = boolOr(j, "tie_word_embeddings", true, source);
  c.causal = true;
  c.positions = PositionalScheme::Learned;
  c.head = headFromArchitectures(c.architectures, c.architecture, HeadKind::CausalLM, source);
  if (c.head == HeadKind::SequenceClassification) c.numLabels = labelCount(j, source);
}

void readBert(const json& j, ModelConfig& c, const std::string& source) {
  c.architecture = Architecture::Bert;
  c.vocabSize = requiredInt(j, "vocab_size", source);
  c.hiddenSize = requiredInt(j, "hidden_size", source);
  c.layers = requiredInt(j, "num_hidden_layers", source);
  c.heads = requiredInt(j, "num_attention_heads", source);
  c.kvHeads = c.heads;
  c.intermediateSize = requiredInt(j, "intermediate_size", source);
  c.maxPositions = intOr(j, "max_position_embeddings", 512, source);
  c.typeVocabSize = intOr(j, "type_vocab_size", 2, source);
  c.normEps = numberOr(j, "layer_norm_eps", 1e-12, source);
  c.activation = stringOr(j, "hidden_act", "gelu", source);
  const auto posType = stringOr(j, "position_embedding_type", "absolute", source);
  if (posType != "absolute")
    fail(source, "position_embedding_type \"" + posType + "\" is not supported (only \"absolute\")");
  c.tieWordEmbeddings = boolOr(j, "tie_word_embeddings", true, source);
  // is_decoder (BertLMHeadModel as a decoder): every token attends to itself and the tokens before it.
  c.causal = boolOr(j, "is_decoder", false, source);
  c.positions = PositionalScheme::Learned;
  c.head = headFromArchitectures(c.architectures, c.architecture, HeadKind::MaskedLM,
                                 source);  // BertLMHeadModel: the same head
  if (c.head == HeadKind::SequenceClassification) c.numLabels = labelCount(j, source);
}

void readRopeScaling(const json& j, ModelConfig& c, const std::string& source) {
  // rope_scaling (older) or rope_parameters (newer, which may also hold rope_theta).
  const json* rope = nullptr;
  if (has(j, "rope_parameters")) rope = &j.at("rope_parameters");
  else if (has(j, "rope_scaling")) rope = &j.at("rope_scaling");
  if (!rope) return;
  if (!rope->is_object()) fail(source, "\"rope_scaling\"/\"rope_parameters\" must be an object");
  c.ropeTheta = numberOr(*rope, "rope_theta", c.ropeTheta, source);
  auto type = stringOr(*rope, "rope_type", stringOr(*rope, "type", "default", source), source);
  if (type != "default" && type != "linear" && type != "llama3")
    fail(source, "rope type \"" + type + "\" is not supported (default, linear, llama3)");
  c.ropeScaling.type = type;
  c.ropeScaling.factor = numberOr(*rope, "factor", 1.0, source);
  c.ropeScaling.lowFreqFactor = numberOr(*rope, "low_freq_factor", 1.0, source);
  c.ropeScaling.highFreqFactor = numberOr(*rope, "high_freq_factor", 4.0, source);
  c.ropeScaling.originalMaxPositions = intOr(*rope, "original_max_position_embeddings", 8192, source);
  if (c.ropeScaling.factor <= 0) fail(source, "rope scaling factor must be positive");
}

void readLlama(const json& j, ModelConfig& c, const std::string& source) {
  c.architecture = Architecture::Llama;
  c.vocabSize = requiredInt(j, "vocab_size", source);
  c.hiddenSize = requiredInt(j, "hidden_size", source);
  c.layers = requiredInt(j, "num_hidden_layers", source);
  c.heads = requiredInt(j, "num_attention_heads", source);
  c.kvHeads = intOr(j, "num_key_value_heads", c.heads, source);
  checkPositive(c.heads, "num_attention_heads", source);
  c.headDim = intOr(j, "head_dim", c.hiddenSize / c.heads, source);
  if (has(j, "head_dim")) checkPositive(c.headDim, "head_dim", source);
  c.intermediateSize = requiredInt(j, "intermediate_size", source);
  c.maxPositions = intOr(j, "max_position_embeddings", 2048, source);
  c.normEps = numberOr(j, "rms_norm_eps", 1e-6, source);
  c.activation = stringOr(j, "hidden_act", "silu", source);
  c.ropeTheta = numberOr(j, "rope_theta", 10000.0, source);
  readRopeScaling(j, c, source);
  // Qwen2 has q/k/v biases and no o_proj bias, with no key saying so; the others read
  // attention_bias for all four.
  const bool qwen2 = stringOr(j, "model_type", "", source) == "qwen2";
  c.outputBias = !qwen2 && boolOr(j, "attention_bias", false, source);
  c.qkvBias = qwen2 || c.outputBias;
  c.mlpBias = boolOr(j, "mlp_bias", false, source);
  c.tieWordEmbeddings = boolOr(j, "tie_word_embeddings", false, source);
  c.causal = true;
  c.positions = PositionalScheme::Rotary;
  c.head = headFromArchitectures(c.architectures, c.architecture, HeadKind::CausalLM, source);
  if (c.head == HeadKind::SequenceClassification) c.numLabels = labelCount(j, source);
}

}  // namespace

std::string toString(Architecture arch) {
  switch (arch) {
    case Architecture::Gpt2: return "gpt2";
    case Architecture::Bert: return "bert";
    case Architecture::Llama: return "llama";
  }
  return "?";
}
std::string toString(PositionalScheme scheme) {
  return scheme == PositionalScheme::Learned ? "learned absolute" : "rotary (RoPE, half-split)";
}
std::string toString(HeadKind head) {
  switch (head) {
    case HeadKind::CausalLM: return "causal LM";
    case HeadKind::MaskedLM: return "masked LM";
    case HeadKind::SequenceClassification: return "sequence classification";
    case HeadKind::None: return "none";
  }
  return "?";
}

std::string ModelConfig::describe() const {
  std::ostringstream s;
  s << modelType << ", " << layers << " layers, " << heads << " heads";
  if (kvHeads != heads) s << " (" << kvHeads << " kv)";
  s << " x " << headDim << ", C=" << hiddenSize << ", vocab " << vocabSize;
  if (plan.anyLinear()) s << ", " << plan.linearLayerCount() << " linear-attention layers";
  return s.str();
}

namespace {

// model_type and architectures, then the family's own keys.
void readFamily(const json& j, ModelConfig& c, const std::string& source) {
  c.modelType = stringOr(j, "model_type", "", source);
  if (has(j, "architectures")) {
    if (!j.at("architectures").is_array()) fail(source, "\"architectures\" must be a list");
    for (const auto& a : j.at("architectures"))
      if (a.is_string()) c.architectures.push_back(a.get<std::string>());
  }
  const auto& t = c.modelType;
  if (t == "gpt2") readGpt2(j, c, source);
  else if (t == "bert") readBert(j, c, source);
  else if (t == "llama" || t == "mistral" || t == "qwen2" || t == "smollm" || t == "tinyllama") readLlama(j, c, source);
  else if (t.empty()) fail(source, "missing \"model_type\" (expected gpt2, bert or llama)");
  else fail(source, "model_type \"" + t + "\" is not supported (gpt2, bert, llama and Llama-style models)");
  if (t == "mistral" && has(j, "sliding_window")) fail(source, "Mistral's sliding-window attention is not supported");
  if (t == "qwen2" && boolOr(j, "use_sliding_window", false, source))
    fail(source, "Qwen2's sliding-window attention (use_sliding_window) is not supported");
}

// Every size positive and plausible, the head dim derived where absent, heads a multiple of the
// KV heads, an even head dim under RoPE; errors name the family's own keys.
void checkSizes(const json& j, ModelConfig& c, const std::string& source) {
  const auto keys = sizeKeys(j, c.architecture);
  checkPositive(c.vocabSize, "vocab_size", source);
  checkPositive(c.hiddenSize, keys.hidden, source);
  checkPositive(c.layers, keys.layers, source);
  checkPositive(c.heads, keys.heads, source);
  checkPositive(c.kvHeads, keys.kvHeads, source);
  checkPositive(c.intermediateSize, keys.intermediate, source);
  checkPositive(c.maxPositions, keys.positions, source);
  if (c.layers > 4096 || c.heads > 4096 || c.hiddenSize > (1 << 20) || c.vocabSize > (1LL << 31))
    fail(source, "sizes are implausibly large (" + c.describe() + ")");
  if (c.headDim == 0) {
    if (c.hiddenSize % c.heads != 0)
      fail(source, "\"" + keys.hidden + "\" = " + std::to_string(c.hiddenSize) + " is not divisible by \"" +
                       keys.heads + "\" = " + std::to_string(c.heads));
    c.headDim = c.hiddenSize / c.heads;
  }
  checkPositive(c.headDim, "head_dim", source);
  if (c.heads % c.kvHeads != 0)
    fail(source, "\"" + keys.heads + "\" = " + std::to_string(c.heads) + " is not a multiple of \"" + keys.kvHeads +
                     "\" = " + std::to_string(c.kvHeads));
  if (c.positions == PositionalScheme::Rotary && c.headDim % 2 != 0)
    fail(source, "RoPE needs an even \"head_dim\", got " + std::to_string(c.headDim));
  static const std::vector<std::string> kActivations{"gelu_new", "gelu", "gelu_pytorch_tanh", "relu", "silu", "swish", "gelu_fast"};
  if (std::find(kActivations.begin(), kActivations.end(), c.activation) == kActivations.end()) {
    std::string known;
    for (const auto& a : kActivations) known += (known.empty() ? "" : ", ") + a;
    fail(source, "\"" + keys.activation + "\" = \"" + c.activation + "\" is not supported (" + known + ")");
  }
}

}  // namespace

ModelConfig parseModelConfig(const json& j, const std::string& source) {
  if (!j.is_object()) fail(source, "config must be a JSON object");
  ModelConfig c;
  c.raw = j;
  readFamily(j, c, source);
  checkSizes(j, c, source);
  c.bosTokenId = tokenIdOr(j, "bos_token_id", source);
  c.eosTokenIds = tokenIdsOf(j, "eos_token_id", source);
  c.eosTokenId = c.eosTokenIds.empty() ? -1 : c.eosTokenIds.front();
  c.padTokenId = tokenIdOr(j, "pad_token_id", source);
  c.torchDtype = stringOr(j, "torch_dtype", stringOr(j, "dtype", "float32", source), source);
  if (has(j, "hedgehog_attention")) c.plan = parseAttentionPlan(j.at("hedgehog_attention"), c.layers, source);
  return c;
}

ModelConfig loadModelConfig(const std::string& dirOrFile) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path path = fs::is_directory(dirOrFile, ec) ? fs::path(dirOrFile) / "config.json" : fs::path(dirOrFile);
  if (fs::is_directory(path, ec))
    throw ConfigError(path.string() + ": is a folder, not a file (a model folder needs a Hugging Face config.json)");
  const auto text = io::readWholeFile(path.string());
  if (!text) throw ConfigError(path.string() + ": cannot open (a model folder needs a Hugging Face config.json)");
  json j;
  try {
    j = json::parse(*text);
  } catch (const json::exception& e) {
    throw ConfigError(path.string() + ": not valid JSON (" + e.what() + ")");
  }
  return parseModelConfig(j, path.string());
}

json modelConfigToJson(const ModelConfig& c) {
  json j = c.raw.is_object() ? c.raw : json::object();
  j["model_type"] = c.modelType;
  if (!c.architectures.empty()) j["architectures"] = c.architectures;
  j["vocab_size"] = c.vocabSize;
  switch (c.architecture) {
    case Architecture::Gpt2:
      j["n_embd"] = c.hiddenSize;
      j["n_layer"] = c.layers;
      j["n_head"] = c.heads;
      j["n_inner"] = c.intermediateSize;
      j["n_positions"] = c.maxPositions;
      j["layer_norm_epsilon"] = c.normEps;
      j["activation_function"] = c.activation;
      j["scale_attn_by_inverse_layer_idx"] = c.scaleByInverseLayer;
      break;
    case Architecture::Bert:
      j["hidden_size"] = c.hiddenSize;
      j["num_hidden_layers"] = c.layers;
      j["num_attention_heads"] = c.heads;
      j["intermediate_size"] = c.intermediateSize;
      j["max_position_embeddings"] = c.maxPositions;
      j["type_vocab_size"] = c.typeVocabSize;
      j["layer_norm_eps"] = c.normEps;
      j["hidden_act"] = c.activation;
      break;
    case Architecture::Llama:
      j["hidden_size"] = c.hiddenSize;
      j["num_hidden_layers"] = c.layers;
      j["num_attention_heads"] = c.heads;
      j["num_key_value_heads"] = c.kvHeads;
      j["head_dim"] = c.headDim;
      j["intermediate_size"] = c.intermediateSize;
      j["max_position_embeddings"] = c.maxPositions;
      j["rms_norm_eps"] = c.normEps;
      j["hidden_act"] = c.activation;
      j["rope_theta"] = c.ropeTheta;
      if (c.qkvBias == c.outputBias) j["attention_bias"] = c.qkvBias;  // Qwen2's follow from its type
      j["mlp_bias"] = c.mlpBias;
      break;
  }
  j["tie_word_embeddings"] = c.tieWordEmbeddings;
  if (c.numLabels > 0) j["num_labels"] = c.numLabels;  // every family's classification head
  if (c.plan.anyLinear()) j["hedgehog_attention"] = attentionPlanToJson(c.plan);
  else j.erase("hedgehog_attention");
  return j;
}

json linearConfigToJson(const attn::LinearAttentionConfig& c) {
  json j{{"attention", c.window > 0 ? "hedgehog_window" : "linear"},
              {"feature_map", attn::toString(c.featureMap.kind)},
              {"rule", attn::toString(c.rule.rule)},
              {"causal", c.rule.causal},
              {"chunk_size", c.rule.chunkSize},
              {"eps", c.rule.eps},
              {"random_features", c.featureMap.randomFeatures},
              {"exp_t", c.featureMap.expT},
              {"cosformer_max_length", c.featureMap.cosformerMaxLength},
              {"seed", c.featureMap.seed}};
  if (c.window > 0) j["window"] = c.window;
  return j;
}

attn::LinearAttentionConfig parseLinearConfig(const json& j, const std::string& source) {
  if (!j.is_object()) fail(source, "a linear attention spec must be an object");
  attn::LinearAttentionConfig c;
  try {
    c.featureMap.kind = attn::parseFeatureMapKind(stringOr(j, "feature_map", "hedgehog", source));
    c.rule.rule = attn::parseUpdateRule(stringOr(j, "rule", "additive", source));
  } catch (const std::invalid_argument& e) {
    fail(source, e.what());
  }
  c.rule.causal = boolOr(j, "causal", true, source);
  c.rule.chunkSize = intOr(j, "chunk_size", 64, source);
  c.rule.eps = numberOr(j, "eps", 1e-6, source);
  c.featureMap.randomFeatures = intOr(j, "random_features", 0, source);
  c.featureMap.expT = numberOr(j, "exp_t", 1.0, source);
  c.featureMap.cosformerMaxLength = intOr(j, "cosformer_max_length", 4096, source);
  c.featureMap.seed = static_cast<uint64_t>(intOr(j, "seed", 0, source));
  if (c.rule.chunkSize <= 0) fail(source, "chunk_size must be positive");
  // Out of range these gave wrong numbers, not errors (eps -1: a negative KL; exp_t 0: NaN ranks).
  if (!(c.rule.eps > 0) || !std::isfinite(c.rule.eps)) fail(source, "eps must be a positive number");
  if (!(c.featureMap.expT > 0) || !std::isfinite(c.featureMap.expT)) fail(source, "exp_t must be a positive number");
  if (c.featureMap.randomFeatures < 0) fail(source, "random_features must be >= 0 (0 = the head dimension)");
  if (c.featureMap.cosformerMaxLength < 1) fail(source, "cosformer_max_length must be positive");
  if (stringOr(j, "attention", "linear", source) == "hedgehog_window") {
    c.window = intOr(j, "window", attn::kDefaultWindow, source);
    if (c.window < 1) fail(source, "window must be at least 1");
    if (c.rule.rule != attn::UpdateRule::Additive) fail(source, "the window hybrid takes the additive rule");
  }
  if (const auto conflict = attn::ruleFeatureMapConflict(c); !conflict.empty()) fail(source, conflict);
  return c;
}

json attentionPlanToJson(const AttentionPlan& plan) {
  json layers = json::array();
  for (const auto& l : plan.layers) layers.push_back(l.linear ? linearConfigToJson(l.config) : json{{"attention", "softmax"}});
  return json{{"layers", layers}};
}

AttentionPlan parseAttentionPlan(const json& j, int64_t layerCount, const std::string& source) {
  if (!j.is_object() || !j.contains("layers") || !j.at("layers").is_array())
    fail(source, "\"hedgehog_attention\" must be an object with a \"layers\" list");
  const auto& layers = j.at("layers");
  if (static_cast<int64_t>(layers.size()) != layerCount)
    fail(source, "\"hedgehog_attention\" lists " + std::to_string(layers.size()) + " layers, the model has " +
                     std::to_string(layerCount));
  AttentionPlan plan;
  for (size_t i = 0; i < layers.size(); ++i) {
    const auto where = source + " (hedgehog_attention layer " + std::to_string(i) + ")";
    const auto kind = stringOr(layers[i], "attention", "softmax", where);
    if (kind == "softmax") plan.layers.push_back({false, {}});
    else if (kind == "linear" || kind == "hedgehog_window") plan.layers.push_back({true, parseLinearConfig(layers[i], where)});
    else fail(where, "attention must be \"softmax\", \"linear\" or \"hedgehog_window\", got \"" + kind + "\"");
  }
  return plan;
}

attn::LinearAttentionConfig linearAttentionConfigOf(const ModelConfig& config, size_t layer) {
  auto linear = config.plan.layers.at(layer).config;
  linear.featureMap.heads = config.heads;
  linear.featureMap.headDim = config.headDim;
  linear.rule.causal = config.causal;
  if (!config.causal && linear.rule.rule != attn::UpdateRule::Additive)
    throw std::invalid_argument("layer " + std::to_string(layer) + ": the " + attn::toString(linear.rule.rule) +
                                " rule is causal-only, and " + config.modelType + " is bidirectional");
  return linear;
}

}  // namespace hh::models
