// Feature maps phi for linear attention (docs/design.md, "The math"); one module per attention layer,
// applied to queries and keys alike (Hedgehog shares one MLP per head between them).
//   forward(x [B, H, T, D], positionOffset) -> [B, H, T, F]
// positionOffset is the absolute position of x[:, :, 0] (CosFormer's reweighting; the recurrent
// form passes the running position).
#pragma once
#include <torch/nn/module.h>

#include "engine/config/attention_types.h"

namespace hh::attn {

class FeatureMapImpl : public torch::nn::Module {
 public:
  explicit FeatureMapImpl(FeatureMapConfig config);

  torch::Tensor forward(const torch::Tensor& x, int64_t positionOffset = 0);

  const FeatureMapConfig& config() const { return config_; }
  int64_t featureDim() const { return featureDim_; }
  bool trainable() const { return isTrainable(config_.kind); }

  // Trainable maps: per-head W [H, D, D] and b [H, D]; Performer: projection [m, D] (buffer).
  torch::Tensor weight() const { return weight_; }
  torch::Tensor bias() const { return bias_; }
  torch::Tensor projection() const { return projection_; }

 private:
  torch::Tensor linearPerHead(const torch::Tensor& x) const;  // [B,H,T,D] -> [B,H,T,D]

  FeatureMapConfig config_;
  int64_t featureDim_ = 0;
  torch::Tensor weight_, bias_, projection_;
};
TORCH_MODULE(FeatureMap);

}  // namespace hh::attn
