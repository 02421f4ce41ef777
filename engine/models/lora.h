// LoRA (Hu et al. 2021) on a model's attention projections, for stage-2 finetuning.
// For each target nn::Linear with frozen weight W0 [out, in]:
//   W = W0 + (alpha / r) * B A,   A [r, in] ~ N(0, 1/r) (seeded),   B [out, r] = 0,
// so a fresh adapter leaves the model's outputs exactly as they were. The effective weight is
// written into the Linear's `weight` member by apply() (with autograd through A and B) before
// each forward pass; the registered parameter stays W0 (frozen). merge() folds B A into W0 and
// puts W0 back, so exportWeights/saveModel write a plain model.
// Targets (q, k, v and the attention output projection), by the families' module names:
//   GPT-2: h_<l>_c_attn (q, k, v fused) and h_<l>_attn_c_proj
//   BERT : layer_<l>_query, _key, _value, _attention_output
//   Llama: layers_<l>_q_proj, _k_proj, _v_proj, _o_proj
#pragma once
#include <torch/nn/modules/linear.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "engine/models/transformer_model.h"

namespace hh::models {

struct LoraOptions {
  int64_t rank = 8;    // r
  double alpha = 16;   // scale = alpha / r
  uint64_t seed = 0;   // A's initialisation
};

// Module names of the LoRA targets of `model` (see above), in layer order.
std::vector<std::string> loraTargetNames(const TransformerModel& model);

class LoraAdapters {
 public:
  // Attaches A, B to every target of `model` (throws std::invalid_argument when rank < 1 or the
  // model has no target). The model must outlive the adapters.
  LoraAdapters(TransformerModel& model, const LoraOptions& options);

  // Sets every target's weight to W0 + scale * B A (call before each forward pass).
  void apply();
  // Folds the adapters into W0 (no gradient) and restores the plain weights; apply() is then a
  // no-op and parameters() are empty of effect (B is zeroed).
  void merge();

  std::vector<torch::Tensor> parameters() const;  // A and B of every target (trainable)
  // "<module>.lora_A" / "<module>.lora_B", for checkpoints and tests.
  std::vector<std::pair<std::string, torch::Tensor>> namedParameters() const;
  double scale() const { return scale_; }
  size_t targetCount() const { return targets_.size(); }
  bool merged() const { return merged_; }

 private:
  struct Target {
    std::string name;
    std::shared_ptr<torch::nn::LinearImpl> linear;
    torch::Tensor base, a, b;  // W0 [out,in] (the registered parameter), A [r,in], B [out,r]
  };
  std::vector<Target> targets_;
  double scale_ = 1.0;
  bool merged_ = false;
};

}  // namespace hh::models
