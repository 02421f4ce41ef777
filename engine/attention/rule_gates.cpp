// The per-layer gates of the update rules other than the additive one (RuleGates, declared in
// linear_attention.h): their projections of the hidden states and their initial values.
#include "engine/attention/linear_attention.h"

#include <torch/types.h>

#include "engine/attention/initial_values.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace hh::attn {

RuleGatesImpl::RuleGatesImpl(UpdateRule rule, int64_t hiddenSize, int64_t heads, int64_t featureDim, int64_t headDim)
    : rule_(rule), heads_(heads), featureDim_(featureDim), headDim_(headDim) {
  if (rule == UpdateRule::Additive) return;
  if (hiddenSize < 1) throw std::invalid_argument("the " + toString(rule) + " rule needs the model width");
  const bool decay = formRule(rule) == UpdateRule::Decay;
  const int64_t out = decay ? heads * featureDim : heads;
  torch::NoGradGuard noGrad;  // initial values written in place
  first_ = register_module("first", torch::nn::Linear(hiddenSize, out));
  initialiseProjection(first_, 4.0);
  if (decay) {
    second_ = register_module("second", torch::nn::Linear(hiddenSize, heads * headDim));
    initialiseProjection(second_, 4.0);
  }
  if (rule == UpdateRule::DeltaMao)  // beta = sigmoid(b_b) = 0.007 at the start: small, slow writes
    first_->bias.fill_(std::log(kDeltaMaoInitialBeta / (1 - kDeltaMaoInitialBeta)));
  if (rule == UpdateRule::DecayMao) {
    uniformGateBias(first_->bias, featureDim);  // b_f
    uniformGateBias(second_->bias, headDim);    // b_z
    // Mao's W_v rescaling: v times 1 - sigmoid(b_z) as initialised, per head and channel.
    valueScale_ = register_buffer("value_scale", (1 - torch::sigmoid(second_->bias.detach())).view({heads, headDim}));
  }
}

void RuleGatesImpl::initialiseProjection(torch::nn::Linear& projection, double bias) {
  // Torch's default for a Linear weight, U(-1/sqrt(in), 1/sqrt(in)), drawn again from this
  // thread's generator for initial values (engine/attention/initial_values.h).
  const double bound = 1.0 / std::sqrt(double(projection->weight.size(1)));
  projection->weight.uniform_(-bound, bound, initialValuesGenerator());
  projection->bias.fill_(bias);
}

void RuleGatesImpl::uniformGateBias(torch::Tensor& bias, int64_t channels) {
  // Uniform gate initialisation: sigmoid(b) = u, u uniform in [1/n, 1 - 1/n], so the gates span
  // memories of every length from about one token to about n.
  const double n = double(std::max<int64_t>(channels, 2));
  const auto u = torch::rand(bias.sizes(), initialValuesGenerator(), bias.options()) * (1 - 2 / n) + 1 / n;
  bias.copy_(torch::log(u / (1 - u)));
}

torch::Tensor RuleGatesImpl::scaleValues(const torch::Tensor& v) const {
  // v [B,H,T,D]
  if (!valueScale_.defined()) return v;
  return v * valueScale_.to(v.scalar_type()).unsqueeze(0).unsqueeze(2);
}

RuleInputs RuleGatesImpl::forward(const torch::Tensor& hidden) {
  // hidden [B,T,C]
  RuleInputs in;
  if (rule_ == UpdateRule::Additive) return in;
  TORCH_CHECK(hidden.defined() && hidden.dim() == 3, "the ", toString(rule_), " rule needs hidden states [B,T,C]");
  const int64_t b = hidden.size(0), t = hidden.size(1);
  // In the gates' own dtype (fp32 master weights under bf16 activations): the forms take the
  // gates in fp32 anyway.
  const auto h = hidden.to(first_->weight.scalar_type());  // [B,T,C]
  const auto first = torch::sigmoid(first_->forward(h));
  switch (rule_) {
    case UpdateRule::Gated:
      in.gate = first.transpose(1, 2).contiguous();  // [B,H,T]
      break;
    case UpdateRule::Delta:
    case UpdateRule::DeltaMao:
      in.beta = first.transpose(1, 2).contiguous();  // [B,H,T]
      break;
    case UpdateRule::Decay:
    case UpdateRule::DecayMao:  // Decay on values LinearAttention has scaled
      in.keyDecay = first.view({b, t, heads_, featureDim_}).transpose(1, 2).contiguous();  // [B,H,T,F]
      in.valueDecay = torch::sigmoid(second_->forward(h)).view({b, t, heads_, headDim_}).transpose(1, 2).contiguous();
      break;
    case UpdateRule::Additive:
      break;
  }
  return in;
}

}  // namespace hh::attn
