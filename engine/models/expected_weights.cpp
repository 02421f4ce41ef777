#include "engine/models/expected_weights.h"

#include "engine/attention/linear_attention.h"

namespace hh::models {

std::string bodyPrefix(Architecture arch) {
  switch (arch) {
    case Architecture::Gpt2: return "transformer.";
    case Architecture::Bert: return "bert.";
    case Architecture::Llama: return "model.";
  }
  return "";
}

namespace {

struct SpecList {
  std::vector<WeightSpec> specs;
  std::string prefix;
  void body(const std::string& name, std::vector<int64_t> shape, const std::string& what) {
    specs.push_back({prefix + name, std::move(shape), what, true, ""});
  }
  void root(const std::string& name, std::vector<int64_t> shape, const std::string& what) {
    specs.push_back({name, std::move(shape), what, false, ""});
  }
};

void gpt2(const ModelConfig& c, SpecList& s) {
  const int64_t C = c.hiddenSize, I = c.intermediateSize;
  s.body("wte.weight", {c.vocabSize, C}, "vocab_size x n_embd");
  s.body("wpe.weight", {c.maxPositions, C}, "n_positions x n_embd");
  for (int64_t l = 0; l < c.layers; ++l) {
    const auto p = "h." + std::to_string(l) + ".";
    for (const char* ln : {"ln_1", "ln_2"}) {
      s.body(p + ln + ".weight", {C}, "n_embd");
      s.body(p + ln + ".bias", {C}, "n_embd");
    }
    s.body(p + "attn.c_attn.weight", {C, 3 * C}, "n_embd x 3 n_embd");
    s.body(p + "attn.c_attn.bias", {3 * C}, "3 n_embd");
    s.body(p + "attn.c_proj.weight", {C, C}, "n_embd x n_embd");
    s.body(p + "attn.c_proj.bias", {C}, "n_embd");
    s.body(p + "mlp.c_fc.weight", {C, I}, "n_embd x n_inner");
    s.body(p + "mlp.c_fc.bias", {I}, "n_inner");
    s.body(p + "mlp.c_proj.weight", {I, C}, "n_inner x n_embd");
    s.body(p + "mlp.c_proj.bias", {C}, "n_embd");
  }
  s.body("ln_f.weight", {C}, "n_embd");
  s.body("ln_f.bias", {C}, "n_embd");
  if (c.head == HeadKind::SequenceClassification) s.root("score.weight", {c.numLabels, C}, "num_labels x n_embd");
  else if (!c.tieWordEmbeddings)
    s.root("lm_head.weight", {c.vocabSize, C}, "vocab_size x n_embd");
}

void bert(const ModelConfig& c, SpecList& s) {
  const int64_t C = c.hiddenSize, I = c.intermediateSize;
  auto linear = [&](const std::string& name, int64_t in, int64_t out, const std::string& what, bool body) {
    if (body) {
      s.body(name + ".weight", {out, in}, what);
      s.body(name + ".bias", {out}, what);
    } else {
      s.root(name + ".weight", {out, in}, what);
      s.root(name + ".bias", {out}, what);
    }
  };
  auto norm = [&](const std::string& name, bool body) {
    if (body) {
      s.body(name + ".weight", {C}, "hidden_size");
      s.body(name + ".bias", {C}, "hidden_size");
    } else {
      s.root(name + ".weight", {C}, "hidden_size");
      s.root(name + ".bias", {C}, "hidden_size");
    }
  };
  s.body("embeddings.word_embeddings.weight", {c.vocabSize, C}, "vocab_size x hidden_size");
  s.body("embeddings.position_embeddings.weight", {c.maxPositions, C}, "max_position_embeddings x hidden_size");
  s.body("embeddings.token_type_embeddings.weight", {c.typeVocabSize, C}, "type_vocab_size x hidden_size");
  norm("embeddings.LayerNorm", true);
  for (int64_t l = 0; l < c.layers; ++l) {
    const auto p = "encoder.layer." + std::to_string(l) + ".";
    linear(p + "attention.self.query", C, C, "hidden_size x hidden_size", true);
    linear(p + "attention.self.key", C, C, "hidden_size x hidden_size", true);
    linear(p + "attention.self.value", C, C, "hidden_size x hidden_size", true);
    linear(p + "attention.output.dense", C, C, "hidden_size x hidden_size", true);
    norm(p + "attention.output.LayerNorm", true);
    linear(p + "intermediate.dense", C, I, "intermediate_size x hidden_size", true);
    linear(p + "output.dense", I, C, "hidden_size x intermediate_size", true);
    norm(p + "output.LayerNorm", true);
  }
  if (c.head == HeadKind::MaskedLM || c.head == HeadKind::CausalLM) {
    linear("cls.predictions.transform.dense", C, C, "hidden_size x hidden_size", false);
    norm("cls.predictions.transform.LayerNorm", false);
    s.root("cls.predictions.bias", {c.vocabSize}, "vocab_size");
    s.specs.back().alternative = "cls.predictions.decoder.bias";  // the loader takes either
  } else if (c.head == HeadKind::SequenceClassification) {
    linear("pooler.dense", C, C, "hidden_size x hidden_size", true);
    linear("classifier", C, c.numLabels, "num_labels x hidden_size", false);
  }
}

void llama(const ModelConfig& c, SpecList& s) {
  const int64_t C = c.hiddenSize, I = c.intermediateSize, HD = c.heads * c.headDim, KD = c.kvHeads * c.headDim;
  auto linear = [&](const std::string& name, int64_t in, int64_t out, bool bias, const std::string& what) {
    s.body(name + ".weight", {out, in}, what);
    if (bias) s.body(name + ".bias", {out}, what);
  };
  s.body("embed_tokens.weight", {c.vocabSize, C}, "vocab_size x hidden_size");
  for (int64_t l = 0; l < c.layers; ++l) {
    const auto p = "layers." + std::to_string(l) + ".";
    s.body(p + "input_layernorm.weight", {C}, "hidden_size");
    linear(p + "self_attn.q_proj", C, HD, c.qkvBias, "num_attention_heads*head_dim x hidden_size");
    linear(p + "self_attn.k_proj", C, KD, c.qkvBias, "num_key_value_heads*head_dim x hidden_size");
    linear(p + "self_attn.v_proj", C, KD, c.qkvBias, "num_key_value_heads*head_dim x hidden_size");
    linear(p + "self_attn.o_proj", HD, C, c.outputBias, "hidden_size x num_attention_heads*head_dim");
    s.body(p + "post_attention_layernorm.weight", {C}, "hidden_size");
    linear(p + "mlp.gate_proj", C, I, c.mlpBias, "intermediate_size x hidden_size");
    linear(p + "mlp.up_proj", C, I, c.mlpBias, "intermediate_size x hidden_size");
    linear(p + "mlp.down_proj", I, C, c.mlpBias, "hidden_size x intermediate_size");
  }
  s.body("norm.weight", {C}, "hidden_size");
  if (c.head == HeadKind::SequenceClassification) s.root("score.weight", {c.numLabels, C}, "num_labels x hidden_size");
  else if (!c.tieWordEmbeddings)
    s.root("lm_head.weight", {c.vocabSize, C}, "vocab_size x hidden_size");
}

}  // namespace

std::vector<WeightSpec> expectedWeights(const ModelConfig& config) {
  SpecList list;
  list.prefix = bodyPrefix(config.architecture);
  switch (config.architecture) {
    case Architecture::Gpt2: gpt2(config, list); break;
    case Architecture::Bert: bert(config, list); break;
    case Architecture::Llama: llama(config, list); break;
  }
  return list.specs;
}

std::vector<WeightSpec> expectedAdapterWeights(const ModelConfig& config) {
  std::vector<WeightSpec> specs;
  for (size_t l = 0; l < config.plan.layers.size(); ++l) {
    const auto& layer = config.plan.layers[l];
    if (!layer.linear) continue;
    const attn::LinearAttention module(linearAttentionConfigOf(config, l),
                                       config.hiddenSize);  // as the model builds it
    const auto prefix = "hedgehog.layers." + std::to_string(l) + ".";
    auto add = [&](const std::string& name, const torch::Tensor& t) {
      specs.push_back({prefix + name, t.sizes().vec(), "the attention plan in config.json", false, ""});
    };
    for (const auto& item : module->named_parameters(true)) add(item.key(), item.value());
    for (const auto& item : module->named_buffers(true)) add(item.key(), item.value());
  }
  return specs;
}

int64_t expectedParameterCount(const ModelConfig& config) {
  int64_t n = 0;
  for (const auto& spec : expectedWeights(config)) {
    int64_t count = 1;
    for (auto d : spec.shape) count *= d;
    n += count;
  }
  return n;
}

}  // namespace hh::models
