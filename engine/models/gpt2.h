// GPT-2 (pre-LN decoder, learned positions) on Hugging Face weights. Conv1D weights are stored
// [in, out] and transposed into nn::Linear on load (and back on export); q, k, v are split in
// that order from c_attn's output; names are read with or without the "transformer." prefix;
// the LM head is tied to wte unless the checkpoint has its own lm_head.weight.
//   block: x = x + c_proj(attn(ln_1(x))); x = x + mlp(ln_2(x)); mlp = c_proj(act(c_fc(x)))
#pragma once
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>

#include "engine/models/transformer_model.h"

namespace hh::models {

class Gpt2Model : public TransformerModel {
 public:
  explicit Gpt2Model(const ModelConfig& config);

  ModelOutput forward(const torch::Tensor& ids, const ForwardOptions& options = {}) override;
  void loadWeights(WeightSource& source) override;
  std::vector<std::pair<std::string, torch::Tensor>> exportWeights() const override;
  torch::Tensor outputEmbedding() const override;

 private:
  struct Block {
    torch::nn::LayerNorm ln1{nullptr}, ln2{nullptr};
    torch::nn::Linear qkv{nullptr}, attnOut{nullptr}, fc{nullptr}, mlpOut{nullptr};
  };
  torch::nn::Embedding wte_{nullptr}, wpe_{nullptr};
  std::vector<Block> blocks_;
  torch::nn::LayerNorm lnF_{nullptr};
  torch::nn::Linear lmHead_{nullptr};      // untied head (absent when tied, and for a classifier)
  torch::nn::Linear classifier_{nullptr};  // GPT2ForSequenceClassification "score"
};

}  // namespace hh::models
