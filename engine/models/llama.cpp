#include "engine/models/llama.h"

#include <torch/types.h>

#include "engine/models/layers.h"

namespace hh::models {
namespace nn = torch::nn;

LlamaModel::LlamaModel(const ModelConfig& config) : TransformerModel(config) {
  const auto& c = config_;
  const int64_t C = c.hiddenSize, I = c.intermediateSize, HD = c.heads * c.headDim, KD = c.kvHeads * c.headDim;
  auto linear = [&](const std::string& name, int64_t in, int64_t out, bool bias) {
    return register_module(name, nn::Linear(nn::LinearOptions(in, out).bias(bias)));
  };
  embed_ = register_module("embed_tokens", nn::Embedding(c.vocabSize, C));
  for (int64_t l = 0; l < c.layers; ++l) {
    const auto p = "layers_" + std::to_string(l) + "_";
    Layer L;
    L.inputNorm = register_parameter(p + "input_layernorm", torch::ones({C}));
    L.q = linear(p + "q_proj", C, HD, c.qkvBias);
    L.k = linear(p + "k_proj", C, KD, c.qkvBias);
    L.v = linear(p + "v_proj", C, KD, c.qkvBias);
    L.o = linear(p + "o_proj", HD, C, c.outputBias);
    L.postNorm = register_parameter(p + "post_attention_layernorm", torch::ones({C}));
    L.gate = linear(p + "gate_proj", C, I, c.mlpBias);
    L.up = linear(p + "up_proj", C, I, c.mlpBias);
    L.down = linear(p + "down_proj", I, C, c.mlpBias);
    layers_.push_back(L);
  }
  norm_ = register_parameter("norm", torch::ones({C}));
  // A classifier's scores replace the LM head: it has no lm_head, tied or not.
  if (c.head == HeadKind::SequenceClassification) classifier_ = linear("score", C, c.numLabels, false);
  else if (!c.tieWordEmbeddings)
    lmHead_ = linear("lm_head", C, c.vocabSize, false);
  initialiseFromScratch(*this, "norm");  // for a model trained from scratch
  setAttentionPlan(c.plan);
}

ModelOutput LlamaModel::forward(const torch::Tensor& ids, const ForwardOptions& options) {
  // ids [B,T]
  const int64_t T = ids.size(1);
  ModelOutput out;
  const auto context = makeContext(ids, options, &out.captures);
  // fp32 as Hugging Face computes them (the references match it); fp64 for an fp64 model.
  const auto ropeType = embed_->weight.scalar_type() == torch::kDouble ? torch::kDouble : torch::kFloat;
  const auto rope = ropeTables(context.positions, ropeInverse(ids.device(), ropeType));  // cos, sin [T,D]
  auto x = toCompute(embed_->forward(ids));                    // [B,T,C]
  const int64_t lastLayer = options.stopAfterLayer >= 0 ? std::min(options.stopAfterLayer, config_.layers - 1) : config_.layers - 1;
  for (int64_t l = 0; l <= lastLayer; ++l) {
    auto& L = layers_[static_cast<size_t>(l)];
    const auto h = rmsNorm(x, L.inputNorm, config_.normEps);
    const auto q = applyRope(splitHeads(applyLinear(L.q, h), config_.heads), rope);    // [B,H,T,D]
    const auto k = applyRope(splitHeads(applyLinear(L.k, h), config_.kvHeads), rope);  // [B,Hkv,T,D]
    const auto v = splitHeads(applyLinear(L.v, h), config_.kvHeads);                   // [B,Hkv,T,D]
    x = x + applyLinear(L.o, mergeHeads(attend(l, q, k, v, h, context)));
    const auto m = rmsNorm(x, L.postNorm, config_.normEps);
    x = x + applyLinear(L.down, activate(applyLinear(L.gate, m), config_.activation) * applyLinear(L.up, m));
  }
  advanceCache(context, T);
  if (lastLayer < config_.layers - 1) {
    out.hidden = x;
    return out;
  }
  out.hidden = rmsNorm(x, norm_, config_.normEps);
  if (!options.computeLogits) return out;
  if (classifier_) {
    out.logits = lastTokenScores(applyLinear(classifier_, out.hidden), options.attentionMask);  // [B,labels]
  } else {
    out.logits = projectRows(out.hidden, lmHead_ ? lmHead_->weight : embed_->weight);
  }
  return out;
}

const torch::Tensor& LlamaModel::ropeInverse(torch::Device device, torch::ScalarType dtype) {
  if (!ropeInverse_.defined() || ropeInverse_.device() != device || ropeInverse_.scalar_type() != dtype)
    ropeInverse_ = ropeInverseFrequencies(config_).to(device, dtype);  // [D/2]
  return ropeInverse_;
}

torch::Tensor LlamaModel::outputEmbedding() const {
  if (classifier_) return {};
  return lmHead_ ? lmHead_->weight : embed_->weight;
}

void LlamaModel::loadWeights(WeightSource& s) {
  at::NoGradGuard noGrad;
  const auto& c = config_;
  const int64_t C = c.hiddenSize, I = c.intermediateSize, HD = c.heads * c.headDim, KD = c.kvHeads * c.headDim;
  s.detectPrefix("embed_tokens.weight", {"model.", ""});
  auto linear = [&](nn::Linear& m, const std::string& name, int64_t in, int64_t out, bool bias, const char* what) {
    s.load(m->weight, s.body(name + ".weight"), {out, in}, what);
    if (bias) s.load(m->bias, s.body(name + ".bias"), {out}, what);
  };
  s.load(embed_->weight, s.body("embed_tokens.weight"), {c.vocabSize, C}, "vocab_size x hidden_size");
  for (int64_t l = 0; l < c.layers; ++l) {
    auto& L = layers_[static_cast<size_t>(l)];
    const auto p = "layers." + std::to_string(l) + ".";
    s.load(L.inputNorm, s.body(p + "input_layernorm.weight"), {C}, "hidden_size");
    linear(L.q, p + "self_attn.q_proj", C, HD, c.qkvBias, "num_attention_heads*head_dim x hidden_size");
    linear(L.k, p + "self_attn.k_proj", C, KD, c.qkvBias, "num_key_value_heads*head_dim x hidden_size");
    linear(L.v, p + "self_attn.v_proj", C, KD, c.qkvBias, "num_key_value_heads*head_dim x hidden_size");
    linear(L.o, p + "self_attn.o_proj", HD, C, c.outputBias, "hidden_size x num_attention_heads*head_dim");
    s.load(L.postNorm, s.body(p + "post_attention_layernorm.weight"), {C}, "hidden_size");
    linear(L.gate, p + "mlp.gate_proj", C, I, c.mlpBias, "intermediate_size x hidden_size");
    linear(L.up, p + "mlp.up_proj", C, I, c.mlpBias, "intermediate_size x hidden_size");
    linear(L.down, p + "mlp.down_proj", I, C, c.mlpBias, "hidden_size x intermediate_size");
  }
  s.load(norm_, s.body("norm.weight"), {C}, "hidden_size");
  if (classifier_)
    s.load(classifier_->weight, "score.weight", {c.numLabels, C}, "num_labels x hidden_size");
  else
    loadLmHead(s, embed_->weight, lmHead_, "vocab_size x hidden_size");
  if (c.plan.anyLinear()) loadAdapters(s);
}

std::vector<std::pair<std::string, torch::Tensor>> LlamaModel::exportWeights() const {
  std::vector<std::pair<std::string, torch::Tensor>> w;
  auto add = [&](const std::string& name, const torch::Tensor& t) { w.emplace_back(name, t.detach().contiguous()); };
  auto linear = [&](const std::string& name, const nn::Linear& m) {
    add(name + ".weight", m->weight);
    if (m->options.bias()) add(name + ".bias", m->bias);
  };
  add("model.embed_tokens.weight", embed_->weight);
  for (int64_t l = 0; l < config_.layers; ++l) {
    const auto& L = layers_[static_cast<size_t>(l)];
    const auto p = "model.layers." + std::to_string(l) + ".";
    add(p + "input_layernorm.weight", L.inputNorm);
    linear(p + "self_attn.q_proj", L.q);
    linear(p + "self_attn.k_proj", L.k);
    linear(p + "self_attn.v_proj", L.v);
    linear(p + "self_attn.o_proj", L.o);
    add(p + "post_attention_layernorm.weight", L.postNorm);
    linear(p + "mlp.gate_proj", L.gate);
    linear(p + "mlp.up_proj", L.up);
    linear(p + "mlp.down_proj", L.down);
  }
  add("model.norm.weight", norm_);
  if (lmHead_) add("lm_head.weight", lmHead_->weight);
  if (classifier_) add("score.weight", classifier_->weight);
  for (const auto& [name, t] : adapterTensors()) add(name, t);
  return w;
}

}  // namespace hh::models
