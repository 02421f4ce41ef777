#include "engine/models/bert.h"

#include <torch/types.h>

#include "engine/models/layers.h"

namespace hh::models {
namespace nn = torch::nn;

BertModel::BertModel(const ModelConfig& config) : TransformerModel(config) {
  const auto& c = config_;
  const int64_t C = c.hiddenSize, I = c.intermediateSize;
  auto layerNorm = [&](const std::string& name) {
    return register_module(name, nn::LayerNorm(nn::LayerNormOptions({C}).eps(c.normEps)));
  };
  words_ = register_module("word_embeddings", nn::Embedding(c.vocabSize, C));
  positions_ = register_module("position_embeddings", nn::Embedding(c.maxPositions, C));
  types_ = register_module("token_type_embeddings", nn::Embedding(std::max<int64_t>(c.typeVocabSize, 1), C));
  embedNorm_ = layerNorm("embeddings_LayerNorm");
  for (int64_t l = 0; l < c.layers; ++l) {
    const auto p = "layer_" + std::to_string(l) + "_";
    Layer L;
    L.query = register_module(p + "query", nn::Linear(C, C));
    L.key = register_module(p + "key", nn::Linear(C, C));
    L.value = register_module(p + "value", nn::Linear(C, C));
    L.attnOut = register_module(p + "attention_output", nn::Linear(C, C));
    L.attnNorm = layerNorm(p + "attention_LayerNorm");
    L.inter = register_module(p + "intermediate", nn::Linear(C, I));
    L.out = register_module(p + "output", nn::Linear(I, C));
    L.outNorm = layerNorm(p + "output_LayerNorm");
    layers_.push_back(L);
  }
  if (c.head == HeadKind::MaskedLM || c.head == HeadKind::CausalLM) {
    transform_ = register_module("cls_transform", nn::Linear(C, C));
    transformNorm_ = layerNorm("cls_transform_LayerNorm");
    decoderBias_ = register_parameter("cls_bias", torch::zeros({c.vocabSize}));
  } else if (c.head == HeadKind::SequenceClassification) {
    pooler_ = register_module("pooler", nn::Linear(C, C));
    classifier_ = register_module("classifier", nn::Linear(C, c.numLabels));
  }
  initialiseFromScratch(*this, "LayerNorm");  // for a model trained from scratch
  setAttentionPlan(c.plan);
}

ModelOutput BertModel::forward(const torch::Tensor& ids, const ForwardOptions& options) {
  // ids [B,T]
  const int64_t T = ids.size(1);
  TORCH_CHECK(T <= config_.maxPositions, "sequence of ", T, " tokens is longer than max_position_embeddings = ",
              config_.maxPositions);
  TORCH_CHECK(!options.cache, "BERT is an encoder: generation needs a decoder (GPT-2, Llama)");
  ModelOutput out;
  const auto context = makeContext(ids, options, &out.captures);
  const auto types = options.tokenTypes.defined() ? options.tokenTypes.to(torch::kLong) : torch::zeros_like(ids);
  TORCH_CHECK(types.sizes() == ids.sizes(), "token types must be [B,T] like the ids");
  auto x = layerNorm(embedNorm_, toCompute(words_->forward(ids) + positions_->forward(context.positions).unsqueeze(0) +
                                           types_->forward(types)));  // [B,T,C]
  const int64_t lastLayer = options.stopAfterLayer >= 0 ? std::min(options.stopAfterLayer, config_.layers - 1) : config_.layers - 1;
  for (int64_t l = 0; l <= lastLayer; ++l) {
    auto& L = layers_[static_cast<size_t>(l)];
    const auto y = attend(l, splitHeads(applyLinear(L.query, x), config_.heads), splitHeads(applyLinear(L.key, x), config_.heads),
                          splitHeads(applyLinear(L.value, x), config_.heads), x, context);  // [B,H,T,D]
    const auto a = layerNorm(L.attnNorm, applyLinear(L.attnOut, mergeHeads(y)) + x);
    x = layerNorm(L.outNorm, applyLinear(L.out, activate(applyLinear(L.inter, a), config_.activation)) + a);
  }
  if (lastLayer < config_.layers - 1) {
    out.hidden = x;
    return out;
  }
  out.hidden = x;
  if (!options.computeLogits) return out;
  if (transform_) {
    const auto h = layerNorm(transformNorm_, activate(applyLinear(transform_, x), config_.activation));
    out.logits = projectRows(h, words_->weight, decoderBias_);  // [B,T,V]
  } else if (classifier_) {
    const auto pooled = torch::tanh(applyLinear(pooler_, x.select(1, 0)));  // [CLS]: [B,C]
    out.logits = applyLinear(classifier_, pooled);                         // [B,labels]
  } else {
    out.logits = x;
  }
  return out;
}

namespace {

void loadBertLinear(WeightSource& s, nn::Linear& m, const std::string& name, int64_t in, int64_t out,
                    const char* what) {
  s.load(m->weight, s.body(name + ".weight"), {out, in}, what);
  s.load(m->bias, s.body(name + ".bias"), {out}, what);
}

void loadBertNorm(WeightSource& s, nn::LayerNorm& norm, const std::string& name, int64_t hidden) {
  s.load(norm->weight, name + ".weight", {hidden}, "hidden_size");
  s.load(norm->bias, name + ".bias", {hidden}, "hidden_size");
}

}  // namespace

void BertModel::loadWeights(WeightSource& s) {
  at::NoGradGuard noGrad;
  const auto& c = config_;
  const int64_t C = c.hiddenSize;
  s.detectPrefix("embeddings.word_embeddings.weight", {"bert.", ""});
  s.load(words_->weight, s.body("embeddings.word_embeddings.weight"), {c.vocabSize, C}, "vocab_size x hidden_size");
  s.load(positions_->weight, s.body("embeddings.position_embeddings.weight"), {c.maxPositions, C},
         "max_position_embeddings x hidden_size");
  s.load(types_->weight, s.body("embeddings.token_type_embeddings.weight"), {c.typeVocabSize, C},
         "type_vocab_size x hidden_size");
  loadBertNorm(s, embedNorm_, s.body("embeddings.LayerNorm"), C);
  for (int64_t l = 0; l < c.layers; ++l) loadEncoderLayer(s, l);
  if (transform_) loadMaskedLmHead(s);
  if (classifier_) loadClassifierHead(s);
  if (c.plan.anyLinear()) loadAdapters(s);
}

void BertModel::loadEncoderLayer(WeightSource& s, int64_t layer) {
  const int64_t C = config_.hiddenSize, I = config_.intermediateSize;
  auto& L = layers_[static_cast<size_t>(layer)];
  const auto p = "encoder.layer." + std::to_string(layer) + ".";
  loadBertLinear(s, L.query, p + "attention.self.query", C, C, "hidden_size x hidden_size");
  loadBertLinear(s, L.key, p + "attention.self.key", C, C, "hidden_size x hidden_size");
  loadBertLinear(s, L.value, p + "attention.self.value", C, C, "hidden_size x hidden_size");
  loadBertLinear(s, L.attnOut, p + "attention.output.dense", C, C, "hidden_size x hidden_size");
  loadBertNorm(s, L.attnNorm, s.body(p + "attention.output.LayerNorm"), C);
  loadBertLinear(s, L.inter, p + "intermediate.dense", C, I, "intermediate_size x hidden_size");
  loadBertLinear(s, L.out, p + "output.dense", I, C, "hidden_size x intermediate_size");
  loadBertNorm(s, L.outNorm, s.body(p + "output.LayerNorm"), C);
}

// cls.predictions: transform, its norm, the decoder bias (either name); the decoder is tied to the
// word embeddings, so a stored copy must agree.
void BertModel::loadMaskedLmHead(WeightSource& s) {
  const int64_t C = config_.hiddenSize, V = config_.vocabSize;
  s.load(transform_->weight, "cls.predictions.transform.dense.weight", {C, C}, "hidden_size x hidden_size");
  s.load(transform_->bias, "cls.predictions.transform.dense.bias", {C}, "hidden_size");
  loadBertNorm(s, transformNorm_, "cls.predictions.transform.LayerNorm", C);
  auto bias = s.takeOptional("cls.predictions.bias", {V}, "vocab_size");
  if (!bias.defined()) bias = s.take("cls.predictions.decoder.bias", {V}, "vocab_size");
  decoderBias_.copy_(bias);
  auto decoder = s.takeOptional("cls.predictions.decoder.weight", {V, C}, "vocab_size x hidden_size");
  if (decoder.defined() && !torch::allclose(decoder, words_->weight))
    throw io::FormatError(s.path() +
                          ": cls.predictions.decoder.weight differs from the word embeddings; untied BERT "
                          "decoders are not supported");
}

void BertModel::loadClassifierHead(WeightSource& s) {
  const int64_t C = config_.hiddenSize;
  s.load(pooler_->weight, s.body("pooler.dense.weight"), {C, C}, "hidden_size x hidden_size");
  s.load(pooler_->bias, s.body("pooler.dense.bias"), {C}, "hidden_size");
  s.load(classifier_->weight, "classifier.weight", {config_.numLabels, C}, "num_labels x hidden_size");
  s.load(classifier_->bias, "classifier.bias", {config_.numLabels}, "num_labels");
}

std::vector<std::pair<std::string, torch::Tensor>> BertModel::exportWeights() const {
  std::vector<std::pair<std::string, torch::Tensor>> w;
  auto add = [&](const std::string& name, const torch::Tensor& t) { w.emplace_back(name, t.detach().contiguous()); };
  auto linear = [&](const std::string& name, const nn::Linear& m) {
    add(name + ".weight", m->weight);
    add(name + ".bias", m->bias);
  };
  auto norm = [&](const std::string& name, const nn::LayerNorm& m) {
    add(name + ".weight", m->weight);
    add(name + ".bias", m->bias);
  };
  add("bert.embeddings.word_embeddings.weight", words_->weight);
  add("bert.embeddings.position_embeddings.weight", positions_->weight);
  add("bert.embeddings.token_type_embeddings.weight", types_->weight);
  norm("bert.embeddings.LayerNorm", embedNorm_);
  for (int64_t l = 0; l < config_.layers; ++l) {
    const auto& L = layers_[static_cast<size_t>(l)];
    const auto p = "bert.encoder.layer." + std::to_string(l) + ".";
    linear(p + "attention.self.query", L.query);
    linear(p + "attention.self.key", L.key);
    linear(p + "attention.self.value", L.value);
    linear(p + "attention.output.dense", L.attnOut);
    norm(p + "attention.output.LayerNorm", L.attnNorm);
    linear(p + "intermediate.dense", L.inter);
    linear(p + "output.dense", L.out);
    norm(p + "output.LayerNorm", L.outNorm);
  }
  if (transform_) {
    linear("cls.predictions.transform.dense", transform_);
    norm("cls.predictions.transform.LayerNorm", transformNorm_);
    add("cls.predictions.bias", decoderBias_);
  }
  if (classifier_) {
    linear("bert.pooler.dense", pooler_);
    linear("classifier", classifier_);
  }
  for (const auto& [name, t] : adapterTensors()) add(name, t);
  return w;
}

}  // namespace hh::models
