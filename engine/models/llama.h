// Llama-family decoders (Llama 2/3, TinyLlama, SmolLM, Mistral without sliding windows, Qwen2
// with attention biases) on Hugging Face weights:
//   x = x + o(attn(rope(q(n1(x))), rope(k(n1(x))), v(n1(x)))); x = x + down(silu(gate(n2(x))) * up(n2(x)))
// n = RMSNorm computed in fp32; RoPE half-split (rotate_half) on the weights as stored — the
// Hugging Face conversion already permuted q/k, so nothing is permuted here; grouped-query
// attention (kv head j serves query heads j*g .. (j+1)*g-1); tied or untied LM head.
#pragma once
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>

#include "engine/models/transformer_model.h"

namespace hh::models {

class LlamaModel : public TransformerModel {
 public:
  explicit LlamaModel(const ModelConfig& config);

  ModelOutput forward(const torch::Tensor& ids, const ForwardOptions& options = {}) override;
  void loadWeights(WeightSource& source) override;
  std::vector<std::pair<std::string, torch::Tensor>> exportWeights() const override;
  torch::Tensor outputEmbedding() const override;

 private:
  struct Layer {
    torch::Tensor inputNorm, postNorm;  // [C]
    torch::nn::Linear q{nullptr}, k{nullptr}, v{nullptr}, o{nullptr}, gate{nullptr}, up{nullptr}, down{nullptr};
  };
  torch::nn::Embedding embed_{nullptr};
  std::vector<Layer> layers_;
  torch::Tensor norm_;                     // [C]
  torch::nn::Linear lmHead_{nullptr};      // absent when tied, and for a classifier
  torch::nn::Linear classifier_{nullptr};  // LlamaForSequenceClassification "score"
  // The rotary inverse frequencies on the device and in the dtype last asked for (not a weight):
  // computed on the host once, not copied to the device at every forward.
  torch::Tensor ropeInverse_;
  const torch::Tensor& ropeInverse(torch::Device device, torch::ScalarType dtype);
};

}  // namespace hh::models
