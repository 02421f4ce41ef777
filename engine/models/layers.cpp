#include "engine/models/layers.h"

#include <torch/nn/functional/activation.h>
#include <torch/nn/functional/linear.h>
#include <torch/nn/functional/normalization.h>
#include <torch/types.h>

#include <cmath>

#include "engine/attention/initial_values.h"

namespace hh::models {

torch::Tensor activate(const torch::Tensor& x, const std::string& name) {
  namespace F = torch::nn::functional;
  if (name == "gelu_new" || name == "gelu_pytorch_tanh" || name == "gelu_fast")
    return F::gelu(x, F::GELUFuncOptions().approximate("tanh"));
  if (name == "gelu") return F::gelu(x);
  if (name == "relu") return torch::relu(x);
  if (name == "silu" || name == "swish") return F::silu(x);
  throw std::invalid_argument("unknown activation \"" + name + "\"");
}

torch::Tensor rmsNorm(const torch::Tensor& x, const torch::Tensor& weight, double eps) {
  // At least fp32 (bf16 / fp16 activations are normalised in fp32); an fp64 model stays fp64.
  const auto x32 = x.scalar_type() == torch::kDouble ? x : x.to(torch::kFloat);
  const auto normed = x32 * torch::rsqrt(x32.pow(2).mean(-1, /*keepdim=*/true) + eps);
  return weight.to(x.scalar_type()) * normed.to(x.scalar_type());
}

torch::Tensor layerNorm(const torch::nn::LayerNorm& norm, const torch::Tensor& x) {
  const auto type = x.scalar_type() == torch::kDouble ? torch::kDouble : torch::kFloat;
  const auto& o = norm->options;
  const auto cast = [&](const torch::Tensor& t) { return t.defined() ? t.to(type) : t; };
  return torch::nn::functional::layer_norm(
             x.to(type), torch::nn::functional::LayerNormFuncOptions(o.normalized_shape())
                             .weight(cast(norm->weight)).bias(cast(norm->bias)).eps(o.eps()))
      .to(x.scalar_type());
}

torch::Tensor ropeInverseFrequencies(const ModelConfig& c) {
  const int64_t d = c.headDim;
  auto inv = 1.0 / torch::pow(torch::tensor(c.ropeTheta, torch::kDouble),
                              torch::arange(0, d, 2, torch::kDouble) / double(d));  // [D/2]
  const auto& s = c.ropeScaling;
  if (s.type == "linear") {
    inv = inv / s.factor;
  } else if (s.type == "llama3") {
    // Long wavelengths are divided by the factor, short ones kept, the band between blended.
    const double lowWavelen = double(s.originalMaxPositions) / s.lowFreqFactor;
    const double highWavelen = double(s.originalMaxPositions) / s.highFreqFactor;
    auto acc = inv.accessor<double, 1>();
    for (int64_t i = 0; i < inv.size(0); ++i) {
      const double f = acc[i], wavelen = 2.0 * M_PI / f;
      if (wavelen < highWavelen) continue;
      if (wavelen > lowWavelen) {
        acc[i] = f / s.factor;
      } else {
        const double smooth = (double(s.originalMaxPositions) / wavelen - s.lowFreqFactor) /
                              (s.highFreqFactor - s.lowFreqFactor);
        acc[i] = (1 - smooth) * f / s.factor + smooth * f;
      }
    }
  }
  return inv;  // float64; ropeTables rounds it to fp32 except for an fp64 model
}

RopeTables ropeTables(const ModelConfig& config, int64_t length, int64_t offset, torch::Device device,
                      torch::ScalarType dtype) {
  // fp32 as Hugging Face computes them (the references match it); fp64 for an fp64 model.
  const auto type = dtype == torch::kDouble ? torch::kDouble : torch::kFloat;
  const auto inv = ropeInverseFrequencies(config).to(device, type);                        // [D/2]
  const auto pos = torch::arange(offset, offset + length, torch::TensorOptions(torch::kLong).device(device));  // [T]
  return ropeTables(pos, inv);
}

RopeTables ropeTables(const torch::Tensor& positions, const torch::Tensor& inverseFrequencies) {
  const auto freqs = torch::outer(positions.to(inverseFrequencies.scalar_type()), inverseFrequencies);  // [T, D/2]
  const auto emb = torch::cat({freqs, freqs}, -1);                                                       // [T, D]
  return {emb.cos(), emb.sin()};
}

torch::Tensor applyRope(const torch::Tensor& x, const RopeTables& t) {
  const int64_t half = x.size(-1) / 2;
  const auto x1 = x.narrow(-1, 0, half), x2 = x.narrow(-1, half, half);
  const auto rotated = torch::cat({-x2, x1}, -1);
  const auto cos = t.cos.to(x.scalar_type()), sin = t.sin.to(x.scalar_type());
  return x * cos + rotated * sin;
}

torch::Tensor projectRows(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias) {
  // x [..., in] -> [..., out]
  if (weight.scalar_type() != x.scalar_type())
    return projectRows(x, weight.to(x.scalar_type()), bias.defined() ? bias.to(x.scalar_type()) : bias);
  if (x.numel() != x.size(-1) || !x.device().is_cpu()) {
    return bias.defined() ? torch::nn::functional::linear(x, weight, bias) : torch::matmul(x, weight.t());
  }
  auto shape = x.sizes().vec();
  shape.back() = weight.size(0);
  const auto row = x.reshape({x.size(-1)});
  const auto y = bias.defined() ? torch::addmv(bias, weight, row) : torch::mv(weight, row);
  return y.view(shape);
}

torch::Tensor applyLinear(const torch::nn::Linear& linear, const torch::Tensor& x) {
  return projectRows(x, linear->weight, linear->options.bias() ? linear->bias : torch::Tensor());
}

void initialiseFromScratch(torch::nn::Module& model, const std::string& normKey) {
  at::NoGradGuard noGrad;
  for (auto& item : model.named_parameters()) {
    if (item.key().find(normKey) != std::string::npos) continue;
    if (item.value().dim() >= 2)
      item.value().normal_(0.0, 0.02, attn::initialValuesGenerator());
    else
      item.value().zero_();
  }
}

torch::Tensor splitHeads(const torch::Tensor& x, int64_t heads) {
  // [B,T,H*D] -> [B,H,T,D]
  return x.view({x.size(0), x.size(1), heads, x.size(2) / heads}).transpose(1, 2);
}

torch::Tensor mergeHeads(const torch::Tensor& x) {
  // [B,H,T,D] -> [B,T,H*D]
  return x.transpose(1, 2).contiguous().view({x.size(0), x.size(2), x.size(1) * x.size(3)});
}

}  // namespace hh::models
