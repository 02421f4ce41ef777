// A Hugging Face `config.json` read into one struct for the three families the engine runs
// (GPT-2, BERT, Llama), plus the attention plan that says, per layer, whether the layer keeps
// softmax or runs a linear attention from engine/attention (a hybrid plan keeps chosen layers
// softmax). The plan is written into config.json under "hedgehog_attention" when a converted
// model is saved, and read back from it.
//
// Keys read, per family (missing keys take the Hugging Face defaults):
//   gpt2 : vocab_size n_embd n_layer n_head n_inner(null = 4 n_embd) n_positions
//          layer_norm_epsilon activation_function(gelu_new|gelu|relu|...) scale_attn_weights
//          scale_attn_by_inverse_layer_idx tie_word_embeddings bos/eos/pad_token_id
//   bert : vocab_size hidden_size num_hidden_layers num_attention_heads intermediate_size
//          max_position_embeddings type_vocab_size layer_norm_eps hidden_act
//          position_embedding_type(absolute only) is_decoder(causal attention) num_labels / id2label
//   llama: vocab_size hidden_size num_hidden_layers num_attention_heads num_key_value_heads
//          head_dim intermediate_size max_position_embeddings rms_norm_eps hidden_act
//          rope_theta (top level, or rope_parameters.rope_theta) rope_scaling / rope_parameters
//          (rope_type default|linear|llama3) attention_bias mlp_bias tie_word_embeddings
//   every family: architectures (a language-model or sequence-classification head; any other
//          head is refused), num_labels or else id2label's size (classification), eos_token_id
//          (one id or a list)
// Every problem (not JSON, missing required key, wrong type, inconsistent sizes) is a
// ConfigError whose message names the file and the key.
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/config/attention_plan.h"

namespace hh::models {

class ConfigError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

enum class Architecture { Gpt2, Bert, Llama };
enum class PositionalScheme { Learned, Rotary };
// What the model's output head computes.
enum class HeadKind { CausalLM, MaskedLM, SequenceClassification, None };

std::string toString(Architecture arch);
std::string toString(PositionalScheme scheme);
std::string toString(HeadKind head);

struct RopeScaling {
  std::string type = "default";  // default | linear | llama3
  double factor = 1.0;
  double lowFreqFactor = 1.0;    // llama3
  double highFreqFactor = 4.0;   // llama3
  int64_t originalMaxPositions = 8192;  // llama3
};

struct ModelConfig {
  Architecture architecture = Architecture::Gpt2;
  std::string modelType;          // as written ("gpt2", "bert", "llama", "mistral", ...)
  std::vector<std::string> architectures;  // HF "architectures" list, for the report
  HeadKind head = HeadKind::CausalLM;

  int64_t vocabSize = 0;
  int64_t hiddenSize = 0;        // C
  int64_t layers = 0;            // L
  int64_t heads = 0;             // H (query heads)
  int64_t kvHeads = 0;           // H_kv (GQA: H % H_kv == 0)
  int64_t headDim = 0;           // D
  int64_t intermediateSize = 0;  // MLP width
  int64_t maxPositions = 0;
  int64_t typeVocabSize = 0;     // BERT token types
  int64_t numLabels = 0;         // sequence classification classes (0 when no such head)

  double normEps = 1e-5;
  std::string activation = "gelu_new";  // gelu_new (tanh) | gelu (erf) | relu | silu
  bool tieWordEmbeddings = true;
  bool causal = true;
  PositionalScheme positions = PositionalScheme::Learned;
  double ropeTheta = 10000.0;
  RopeScaling ropeScaling;
  bool qkvBias = false;          // Llama q/k/v biases (attention_bias; always for Qwen2)
  bool outputBias = false;       // Llama o_proj bias (attention_bias; never for Qwen2)
  bool mlpBias = false;          // Llama gate/up/down biases
  double attentionScale = 0.0;   // 0 means 1/sqrt(D)
  bool scaleByInverseLayer = false;  // GPT-2 scale_attn_by_inverse_layer_idx

  int64_t bosTokenId = -1, eosTokenId = -1, padTokenId = -1;  // eosTokenId: the first of eosTokenIds
  std::vector<int64_t> eosTokenIds;                           // every end-of-text id (Llama 3 lists several)
  std::string torchDtype = "float32";

  AttentionPlan plan;             // per-layer attention; empty = all softmax
  nlohmann::json raw;             // the file as read, for writing back unknown keys

  std::string describe() const;   // one line: "gpt2, 5 layers, 4 heads x 8, C=32, vocab 1000"
};

// Parse a config object. `source` names the file in error messages.
ModelConfig parseModelConfig(const nlohmann::json& json, const std::string& source);

// Layer `layer`'s linear-attention settings as the model builds them: the plan's, with the
// model's heads, head dim and causality. Throws std::invalid_argument for a causal-only update
// rule in a bidirectional model.
attn::LinearAttentionConfig linearAttentionConfigOf(const ModelConfig& config, size_t layer);
// Read `<dir>/config.json` (or a path to a .json file).
ModelConfig loadModelConfig(const std::string& dirOrFile);
// The Hugging Face-style JSON for this config (raw keys kept, sizes and plan written).
nlohmann::json modelConfigToJson(const ModelConfig& config);

// The attention plan as JSON ({"layers": [{"attention": "softmax"} | {"attention": "linear",
// "feature_map": ..., "rule": ..., ...}]}) and back. parse throws ConfigError.
nlohmann::json attentionPlanToJson(const AttentionPlan& plan);
AttentionPlan parseAttentionPlan(const nlohmann::json& json, int64_t layers, const std::string& source);
nlohmann::json linearConfigToJson(const attn::LinearAttentionConfig& config);
attn::LinearAttentionConfig parseLinearConfig(const nlohmann::json& json, const std::string& source);

}  // namespace hh::models
