#include "engine/models/model_shapes.h"

#include <algorithm>
#include <stdexcept>

namespace hh::models {

const std::vector<std::string>& benchmarkShapeNames() {
  static const std::vector<std::string> names{"demo", "gpt2-small", "llama-1b"};
  return names;
}

nlohmann::json benchmarkShapeConfig(const std::string& shape, int64_t positions) {
  if (shape == "llama-1b")
    return {{"model_type", "llama"},          {"architectures", {"LlamaForCausalLM"}},
            {"vocab_size", 128256},           {"hidden_size", 2048},
            {"intermediate_size", 8192},      {"num_hidden_layers", 16},
            {"num_attention_heads", 32},      {"num_key_value_heads", 8},
            {"max_position_embeddings", std::max<int64_t>(positions, 131072)},
            {"rms_norm_eps", 1e-5},           {"rope_theta", 500000.0},
            {"hidden_act", "silu"},           {"tie_word_embeddings", true}};
  const bool small = shape == "gpt2-small";
  if (!small && shape != "demo") throw std::invalid_argument("unknown shape \"" + shape + "\" (demo, gpt2-small, llama-1b)");
  return {{"model_type", "gpt2"},       {"architectures", {"GPT2LMHeadModel"}},
          {"vocab_size", 50257},        {"n_embd", small ? 768 : 128},
          {"n_layer", small ? 12 : 4},  {"n_head", small ? 12 : 4},
          {"n_inner", small ? 3072 : 512}, {"n_positions", std::max<int64_t>(positions, small ? 1024 : 256)},
          {"activation_function", "gelu_new"}, {"layer_norm_epsilon", 1e-5},
          {"tie_word_embeddings", true}};
}

}  // namespace hh::models
