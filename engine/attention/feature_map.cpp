#include "engine/attention/feature_map.h"

#include <torch/csrc/autograd/custom_function.h>
#include <torch/types.h>

#include <cmath>
#include <stdexcept>

namespace hh::attn {

namespace {
constexpr double kPi = 3.14159265358979323846;

// Orthogonal random features (FAVOR+): blocks of D orthonormal rows from the QR of a Gaussian
// matrix, each row rescaled to the norm of an independent Gaussian vector. -> [m, D]
torch::Tensor orthogonalGaussian(int64_t m, int64_t d, uint64_t seed) {
  auto gen = at::detail::createCPUGenerator(seed);
  std::vector<torch::Tensor> blocks;
  for (int64_t rows = 0; rows < m; rows += d) {
    auto g = at::normal(0.0, 1.0, {d, d}, gen, torch::TensorOptions().dtype(torch::kDouble));
    auto [q, r] = torch::linalg_qr(g);
    // Householder QR fixes the signs of R's diagonal, which biases Q; multiplying each column by
    // sign(R_ii) makes Q Haar-distributed (uniformly random rotation), so each row is an
    // unbiased random direction.
    q = q * torch::sign(r.diagonal()).unsqueeze(0);
    blocks.push_back(q.transpose(0, 1));  // rows orthonormal
  }
  auto w = torch::cat(blocks, 0).narrow(0, 0, m);
  auto norms = at::normal(0.0, 1.0, {m, d}, gen, torch::TensorOptions().dtype(torch::kDouble)).norm(2, 1, true);
  return (w * norms).to(torch::kFloat);
}
// Hedgehog's [exp(u), exp(-u)], u = clamp(x W^T + b, +-kHedgehogClamp) per head, with a backward
// that needs one product forward and two backward and saves x, e = exp(u) (exp(-u) = 1 / e) and
// where u was inside the clamp (the gradient is 0 elsewhere).
struct HedgehogFunction : public torch::autograd::Function<HedgehogFunction> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x, const torch::Tensor& w,
                               const torch::Tensor& b) {
    // x [B,H,T,D]; w [H,D,D]; b [H,D] -> [B,H,T,2D]
    auto u = torch::matmul(x, w.transpose(-2, -1).unsqueeze(0));
    u.add_(b.unsqueeze(0).unsqueeze(2));
    const auto inside = u.abs().lt(kHedgehogClamp);
    const auto e = u.clamp_(-kHedgehogClamp, kHedgehogClamp).exp_();
    ctx->save_for_backward({x, w, e, inside});
    return torch::cat({e, e.reciprocal()}, -1);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto &x = saved[0], &w = saved[1], &e = saved[2], &inside = saved[3];
    const int64_t d = e.size(-1);
    const auto g = grads[0];
    // d/du: g1 * e - g2 * exp(-u) = g1 * e - g2 / e, inside the clamp
    const auto gu = (g.narrow(-1, 0, d) * e - g.narrow(-1, d, d) / e) * inside;  // [B,H,T,D]
    const auto gx = torch::matmul(gu, w.unsqueeze(0));                 // [B,H,T,D]
    const auto gw = torch::matmul(gu.transpose(-2, -1), x).sum(0);     // [H,D,D]
    const auto gb = gu.sum(std::vector<int64_t>{0, 2});                 // [H,D]
    return {gx, gw, gb};
  }
};
}  // namespace

FeatureMapImpl::FeatureMapImpl(FeatureMapConfig config) : config_(config) {
  if (config_.heads < 1 || config_.headDim < 1)
    throw std::invalid_argument("feature map: heads and head dim must be positive");
  if (config_.kind == FeatureMapKind::CosFormer && config_.cosformerMaxLength < 1)
    throw std::invalid_argument("feature map: cosformer max length must be positive");
  featureDim_ = featureDimOf(config_);
  const int64_t h = config_.heads, d = config_.headDim;
  if (trainable()) {
    // One MLP per head, initialised to the identity map (Hedgehog); T2R and Linear likewise.
    weight_ = register_parameter("weight", torch::eye(d).unsqueeze(0).repeat({h, 1, 1}));  // [H,D,D]
    bias_ = register_parameter("bias", torch::zeros({h, d}));                              // [H,D]
  }
  if (config_.kind == FeatureMapKind::Performer) {
    projection_ = register_buffer("projection", orthogonalGaussian(featureDim_, d, config_.seed));  // [m,D]
  }
}

torch::Tensor FeatureMapImpl::linearPerHead(const torch::Tensor& x) const {
  // x [B,H,T,D]; weight [H,D_out,D_in] -> [B,H,T,D_out]: y = x W^T + b per head
  const auto w = weight_.to(x.scalar_type());
  const auto b = bias_.to(x.scalar_type());
  return torch::matmul(x, w.transpose(-2, -1).unsqueeze(0)) + b.unsqueeze(0).unsqueeze(2);
}

torch::Tensor FeatureMapImpl::forward(const torch::Tensor& x, int64_t positionOffset) {
  // x [B,H,T,D] -> [B,H,T,F]
  TORCH_CHECK(x.dim() == 4, "feature map input must be [B,H,T,D], got ", x.sizes());
  TORCH_CHECK(x.size(1) == config_.heads || !trainable(), "feature map has ", config_.heads, " heads, input has ",
              x.size(1));
  TORCH_CHECK(x.size(3) == config_.headDim, "feature map head dim ", config_.headDim, ", input has ", x.size(3));
  const double d = static_cast<double>(config_.headDim);
  switch (config_.kind) {
    case FeatureMapKind::Hedgehog:
      return HedgehogFunction::apply(x, weight_.to(x.scalar_type()), bias_.to(x.scalar_type()));
    case FeatureMapKind::HedgehogSoftmax: {
      auto u = linearPerHead(x);
      return torch::cat({torch::softmax(u, -1), torch::softmax(-u, -1)}, -1);
    }
    case FeatureMapKind::T2R:
      return torch::relu(linearPerHead(x));
    case FeatureMapKind::Linear:
      return linearPerHead(x);
    case FeatureMapKind::Elu:
      return torch::elu(x) + 1.0;
    case FeatureMapKind::ExpT:
      return torch::exp(config_.expT * x);
    case FeatureMapKind::Identity:
      return x;
    case FeatureMapKind::Performer: {
      // phi(x) = exp(w_r . x' - |x'|^2 / 2) / sqrt(m), x' = x / d^(1/4), so that
      // E[phi(q) . phi(k)] = exp(q . k / sqrt(d)).
      const auto xs = x * std::pow(d, -0.25);
      const auto proj = torch::matmul(xs, projection_.to(x.scalar_type()).transpose(0, 1));  // [B,H,T,m]
      const auto sq = 0.5 * xs.pow(2).sum(-1, true);
      return torch::exp(proj - sq) / std::sqrt(static_cast<double>(featureDim_));
    }
    case FeatureMapKind::CosFormer: {
      const int64_t t = x.size(2);
      TORCH_CHECK(positionOffset + t <= config_.cosformerMaxLength, "cosformer: position ", positionOffset + t,
                  " exceeds its max length M = ", config_.cosformerMaxLength, " (raise cosformerMaxLength)");
      const auto pos = torch::arange(positionOffset, positionOffset + t, x.options()).view({1, 1, t, 1});
      const auto angle = pos * (kPi / (2.0 * static_cast<double>(config_.cosformerMaxLength)));
      const auto r = torch::relu(x);
      return torch::cat({r * torch::cos(angle), r * torch::sin(angle)}, -1);
    }
    case FeatureMapKind::Taylor: {
      // phi(q).phi(k) = 1 + s + s^2 / 2 with s = q.k / sqrt(d).
      const auto xs = x * std::pow(d, -0.25);
      const auto outer = (xs.unsqueeze(-1) * xs.unsqueeze(-2)).flatten(-2) / std::sqrt(2.0);  // [B,H,T,D*D]
      return torch::cat({torch::ones_like(x.narrow(-1, 0, 1)), xs, outer}, -1);
    }
  }
  throw std::logic_error("feature map: unhandled kind");
}

}  // namespace hh::attn
