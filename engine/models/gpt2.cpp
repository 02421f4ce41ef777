#include "engine/models/gpt2.h"

#include <torch/types.h>

#include "engine/models/layers.h"

namespace hh::models {
namespace nn = torch::nn;

Gpt2Model::Gpt2Model(const ModelConfig& config) : TransformerModel(config) {
  const auto& c = config_;
  const int64_t C = c.hiddenSize, I = c.intermediateSize;
  wte_ = register_module("wte", nn::Embedding(c.vocabSize, C));
  wpe_ = register_module("wpe", nn::Embedding(c.maxPositions, C));
  for (int64_t l = 0; l < c.layers; ++l) {
    const auto p = "h_" + std::to_string(l) + "_";
    Block b;
    b.ln1 = register_module(p + "ln_1", nn::LayerNorm(nn::LayerNormOptions({C}).eps(c.normEps)));
    b.qkv = register_module(p + "c_attn", nn::Linear(C, 3 * C));
    b.attnOut = register_module(p + "attn_c_proj", nn::Linear(C, C));
    b.ln2 = register_module(p + "ln_2", nn::LayerNorm(nn::LayerNormOptions({C}).eps(c.normEps)));
    b.fc = register_module(p + "c_fc", nn::Linear(C, I));
    b.mlpOut = register_module(p + "mlp_c_proj", nn::Linear(I, C));
    blocks_.push_back(b);
  }
  lnF_ = register_module("ln_f", nn::LayerNorm(nn::LayerNormOptions({C}).eps(c.normEps)));
  // A classifier's scores replace the LM head: it has no lm_head, tied or not.
  if (c.head == HeadKind::SequenceClassification)
    classifier_ = register_module("score", nn::Linear(nn::LinearOptions(C, c.numLabels).bias(false)));
  else if (!c.tieWordEmbeddings)
    lmHead_ = register_module("lm_head", nn::Linear(nn::LinearOptions(C, c.vocabSize).bias(false)));
  initialiseFromScratch(*this, "ln_");  // for a model trained from scratch
  setAttentionPlan(c.plan);
}

ModelOutput Gpt2Model::forward(const torch::Tensor& ids, const ForwardOptions& options) {
  // ids [B,T]
  const int64_t T = ids.size(1);
  ModelOutput out;
  const auto context = makeContext(ids, options, &out.captures);
  const int64_t offset = context.positionOffset;  // > 0 when generating
  TORCH_CHECK(offset + T <= config_.maxPositions, "sequence of ", offset + T, " tokens is longer than n_positions = ",
              config_.maxPositions);
  auto x = toCompute(wte_->forward(ids) + wpe_->forward(context.positions).unsqueeze(0));  // [B,T,C]
  const int64_t lastLayer = options.stopAfterLayer >= 0 ? std::min(options.stopAfterLayer, config_.layers - 1) : config_.layers - 1;
  for (int64_t l = 0; l <= lastLayer; ++l) {
    auto& b = blocks_[static_cast<size_t>(l)];
    const auto h = layerNorm(b.ln1, x);
    const auto qkv = applyLinear(b.qkv, h).chunk(3, -1);  // q, k, v in that order, each [B,T,C]
    const auto y = attend(l, splitHeads(qkv[0], config_.heads), splitHeads(qkv[1], config_.heads),
                          splitHeads(qkv[2], config_.heads), h, context);  // [B,H,T,D]
    x = x + applyLinear(b.attnOut, mergeHeads(y));
    x = x + applyLinear(b.mlpOut, activate(applyLinear(b.fc, layerNorm(b.ln2, x)), config_.activation));
  }
  advanceCache(context, T);
  if (lastLayer < config_.layers - 1) {
    out.hidden = x;
    return out;
  }
  out.hidden = layerNorm(lnF_, x);
  if (!options.computeLogits) return out;
  if (classifier_) {
    out.logits = lastTokenScores(applyLinear(classifier_, out.hidden), options.attentionMask);  // [B,labels]
  } else {
    out.logits = projectRows(out.hidden, lmHead_ ? lmHead_->weight : wte_->weight);
  }
  return out;
}

torch::Tensor Gpt2Model::outputEmbedding() const {
  if (classifier_) return {};
  return lmHead_ ? lmHead_->weight : wte_->weight;
}

void Gpt2Model::loadWeights(WeightSource& s) {
  at::NoGradGuard noGrad;
  const auto& c = config_;
  const int64_t C = c.hiddenSize, I = c.intermediateSize;
  s.detectPrefix("wte.weight", {"", "transformer."});
  s.load(wte_->weight, s.body("wte.weight"), {c.vocabSize, C}, "vocab_size x n_embd");
  s.load(wpe_->weight, s.body("wpe.weight"), {c.maxPositions, C}, "n_positions x n_embd");
  auto conv1d = [&](nn::Linear& linear, const std::string& name, int64_t in, int64_t out, const char* what) {
    s.load(linear->weight.t(), s.body(name + ".weight"), {in, out}, what);  // Conv1D [in,out]
    s.load(linear->bias, s.body(name + ".bias"), {out}, what);
  };
  auto norm = [&](nn::LayerNorm& ln, const std::string& name) {
    s.load(ln->weight, s.body(name + ".weight"), {C}, "n_embd");
    s.load(ln->bias, s.body(name + ".bias"), {C}, "n_embd");
  };
  for (int64_t l = 0; l < c.layers; ++l) {
    auto& b = blocks_[static_cast<size_t>(l)];
    const auto p = "h." + std::to_string(l) + ".";
    norm(b.ln1, p + "ln_1");
    conv1d(b.qkv, p + "attn.c_attn", C, 3 * C, "n_embd x 3 n_embd");
    conv1d(b.attnOut, p + "attn.c_proj", C, C, "n_embd x n_embd");
    norm(b.ln2, p + "ln_2");
    conv1d(b.fc, p + "mlp.c_fc", C, I, "n_embd x n_inner (null means 4 n_embd)");
    conv1d(b.mlpOut, p + "mlp.c_proj", I, C, "n_inner x n_embd");
  }
  norm(lnF_, "ln_f");
  if (classifier_)
    s.load(classifier_->weight, "score.weight", {c.numLabels, C}, "num_labels x n_embd");
  else
    loadLmHead(s, wte_->weight, lmHead_, "vocab_size x n_embd");
  if (c.plan.anyLinear()) loadAdapters(s);
}

std::vector<std::pair<std::string, torch::Tensor>> Gpt2Model::exportWeights() const {
  std::vector<std::pair<std::string, torch::Tensor>> w;
  auto add = [&](const std::string& name, const torch::Tensor& t) { w.emplace_back(name, t.detach().contiguous()); };
  add("transformer.wte.weight", wte_->weight);
  add("transformer.wpe.weight", wpe_->weight);
  for (int64_t l = 0; l < config_.layers; ++l) {
    const auto& b = blocks_[static_cast<size_t>(l)];
    const auto p = "transformer.h." + std::to_string(l) + ".";
    add(p + "ln_1.weight", b.ln1->weight);
    add(p + "ln_1.bias", b.ln1->bias);
    add(p + "attn.c_attn.weight", b.qkv->weight.t());
    add(p + "attn.c_attn.bias", b.qkv->bias);
    add(p + "attn.c_proj.weight", b.attnOut->weight.t());
    add(p + "attn.c_proj.bias", b.attnOut->bias);
    add(p + "ln_2.weight", b.ln2->weight);
    add(p + "ln_2.bias", b.ln2->bias);
    add(p + "mlp.c_fc.weight", b.fc->weight.t());
    add(p + "mlp.c_fc.bias", b.fc->bias);
    add(p + "mlp.c_proj.weight", b.mlpOut->weight.t());
    add(p + "mlp.c_proj.bias", b.mlpOut->bias);
  }
  add("transformer.ln_f.weight", lnF_->weight);
  add("transformer.ln_f.bias", lnF_->bias);
  if (lmHead_) add("lm_head.weight", lmHead_->weight);
  if (classifier_) add("score.weight", classifier_->weight);
  for (const auto& [name, t] : adapterTensors()) add(name, t);
  return w;
}

}  // namespace hh::models
