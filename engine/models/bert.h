// BERT (post-LN encoder, learned absolute positions, token types) on Hugging Face weights.
//   embeddings: LN(word + position + token_type)
//   layer:      a = LN(dense(attn(x)) + x); x = LN(out(act(inter(a))) + a)   (post-LN, eps from config)
// Padding keys are masked out of the (bidirectional) attention. Heads: masked LM
// (cls.predictions.transform -> decoder tied to the word embeddings + bias), sequence
// classification (pooler tanh on [CLS] -> classifier), or none (logits = hidden states).
// Names are read with or without the "bert." prefix.
#pragma once
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>

#include "engine/models/transformer_model.h"

namespace hh::models {

class BertModel : public TransformerModel {
 public:
  explicit BertModel(const ModelConfig& config);

  ModelOutput forward(const torch::Tensor& ids, const ForwardOptions& options = {}) override;
  void loadWeights(WeightSource& source) override;
  std::vector<std::pair<std::string, torch::Tensor>> exportWeights() const override;

 private:
  void loadEncoderLayer(WeightSource& source, int64_t layer);
  void loadMaskedLmHead(WeightSource& source);
  void loadClassifierHead(WeightSource& source);

  struct Layer {
    torch::nn::Linear query{nullptr}, key{nullptr}, value{nullptr}, attnOut{nullptr}, inter{nullptr}, out{nullptr};
    torch::nn::LayerNorm attnNorm{nullptr}, outNorm{nullptr};
  };
  torch::nn::Embedding words_{nullptr}, positions_{nullptr}, types_{nullptr};
  torch::nn::LayerNorm embedNorm_{nullptr};
  std::vector<Layer> layers_;
  // masked LM head
  torch::nn::Linear transform_{nullptr};
  torch::nn::LayerNorm transformNorm_{nullptr};
  torch::Tensor decoderBias_;
  // classification head
  torch::nn::Linear pooler_{nullptr}, classifier_{nullptr};
};

}  // namespace hh::models
