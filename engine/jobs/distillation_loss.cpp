// Stage 1's loss and the layer-by-layer forward (see distillation_loss.h).
#include "engine/jobs/distillation_loss.h"

#include <torch/autograd.h>
#include <torch/types.h>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <string>

#include "engine/attention/fused_distill_loss_cpu.h"
#include "engine/attention/linear_attention.h"
#include "engine/attention/softmax_attention.h"
#if HH_CUDA_KERNELS
#include "engine/cuda/distill_loss_torch.h"
#endif

namespace hh::jobs {
namespace {

constexpr double kLogFloor = 1e-10;  // log(a + 1e-10): a zero weight costs 23 nats, not infinity
// The fused CPU loss from a layer's 2^20 query-key pairs (4 MiB of fp32 weights) on: below, the
// materialised weights stay in cache and measured faster (the demo teacher at 8 x 128 tokens,
// 0.5 M pairs: 47.3 ms a step against 48.7; stories260K at 8 x 256, 4.2 M pairs: 173.4 against
// 123.3 fused; docs/performance.md).
constexpr int64_t kFusedCpuMinPairs = int64_t(1) << 20;

// -sum over every pair of p log(a + 1e-10), p, a [B,H,T,T] fp32 (p without a gradient), and its
// gradient -g p / (a + 1e-10): three passes over the weights forward and three backward, where the
// composed ops (add, log, negate, multiply, mask, sums, and their backward) took about eleven.
class SoftCrossEntropy : public torch::autograd::Function<SoftCrossEntropy> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& a, const torch::Tensor& p) {
    ctx->save_for_backward({a, p});
    return (a + kLogFloor).log_().mul_(p).sum().neg();
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    auto ga = saved[0] + kLogFloor;
    at::div_out(ga, saved[1], ga);  // p / (a + eps), in place
    return {ga.mul_(-grads[0]), torch::Tensor()};
  }
};

// The layer's loss where no key mask applies: every row has a valid key (itself when causal, all
// keys otherwise), and the softmax weights are exactly zero on every pair that is not valid (the
// student's are finite there), so the sum over valid pairs is the sum over all pairs and the
// per-head row mean is the sum over heads divided by B * T.
torch::Tensor maskFreeLoss(const torch::Tensor& p, const torch::Tensor& a, const std::string& loss) {
  const double rows = double(p.size(0)) * double(p.size(2));
  const auto crossEntropy = SoftCrossEntropy::apply(a, p) / rows;
  if (loss != "kl") return crossEntropy;
  torch::Tensor negEntropy;  // sum p log p / rows: the teacher's, a constant
  {
    at::NoGradGuard noGrad;
    negEntropy = (p + kLogFloor).log_().mul_(p).sum() / rows;
  }
  return crossEntropy + negEntropy;
}

// The layer's loss under a key mask: pairs and rows the mask leaves out do not count.
torch::Tensor maskedLoss(const torch::Tensor& p, const torch::Tensor& a, bool causal, const torch::Tensor& mask,
                         const std::string& loss) {
  const int64_t T = p.size(-1);
  const auto valid = attn::validPairs(T, T, causal, mask.to(torch::kBool), p.device());
  auto perPair = -p * torch::log(a + kLogFloor);  // soft cross-entropy
  if (loss == "kl") perPair = perPair + p * torch::log(p + kLogFloor);
  perPair = perPair.masked_fill(valid.logical_not(), 0.0);
  // Rows with at least one valid key count in the mean; heads are summed (paper eq. 4).
  const auto rowValid = valid.any(-1).to(torch::kFloat).expand({p.size(0), p.size(1), T});  // [B,H,T]
  const std::vector<int64_t> batchAndRows{0, 2};
  const auto perHead = perPair.sum(-1).mul(rowValid).sum(batchAndRows) / rowValid.sum(batchAndRows).clamp_min(1.0);  // [H]
  return perHead.sum();
}

// The layer's mask-free loss from its features (CaptureRequest::additiveFeatures): the fused
// kernel where it takes them, else both weights made here, as the capture would have made them.
torch::Tensor featureLoss(const models::LayerCapture& c, bool causal, const std::string& loss) {
  const double scale = 1.0 / std::sqrt(double(c.queries.size(-1)));  // softmaxWeights' (q carries the rest)
  if (attn::fusedDistillLossCpuAccepts(c.queries, c.queryFeatures)) {
    const auto f = attn::fusedDistillLossCpu(c.queries, c.keys, c.queryFeatures, c.keyFeatures, scale, c.normaliserEps, causal);
    return loss == "kl" ? f.crossEntropy + f.negEntropy : f.crossEntropy;
  }
#if HH_CUDA_KERNELS
  if (cuda::fusedDistillLossAccepts(c.queries, c.queryFeatures)) {
    const auto f = cuda::fusedDistillLoss(c.queries, c.keys, c.queryFeatures, c.keyFeatures, scale, c.normaliserEps, causal);
    return loss == "kl" ? f.crossEntropy + f.negEntropy : f.crossEntropy;
  }
#endif
  torch::Tensor p;
  {
    at::NoGradGuard noGrad;
    p = attn::softmaxWeights(c.queries, c.keys, causal, {}).to(torch::kFloat);
  }
  attn::RuleOptions rule;
  rule.causal = causal;
  rule.eps = c.normaliserEps;
  return maskFreeLoss(p, attn::linearWeights(c.queryFeatures, c.keyFeatures, {}, rule).to(torch::kFloat), loss);
}

}  // namespace

bool fusedDistillLossRequested(const torch::Device& device, int64_t pairs) {
  const char* env = std::getenv("HH_FUSED_DISTILL_LOSS");
  const std::string setting = env ? env : "";
  if (setting == "off") return false;
  if (device.is_cpu()) return attn::fusedDistillLossCpuAvailable() && (setting == "on" || pairs >= kFusedCpuMinPairs);
#if HH_CUDA_KERNELS
  return device.is_cuda() && setting == "on";
#else
  return false;
#endif
}

torch::Tensor distillationLoss(const std::vector<models::LayerCapture>& captures, bool causal, const torch::Tensor& mask,
                               const std::string& loss, double outputMse) {
  torch::Tensor total;
  for (const auto& c : captures) {
    torch::Tensor layerLoss;
    if (c.queryFeatures.defined()) {
      if (mask.defined()) throw std::invalid_argument("distillation loss: features captured under a key mask");
      layerLoss = featureLoss(c, causal, loss);
    } else if (c.linearWeights.defined()) {
      const auto p = c.softmaxWeights.to(torch::kFloat);  // [B,H,T,T] target, no gradient
      const auto a = c.linearWeights.to(torch::kFloat);   // [B,H,T,T]
      layerLoss = mask.defined() ? maskedLoss(p, a, causal, mask, loss) : maskFreeLoss(p, a, loss);
    } else {
      continue;
    }
    if (outputMse > 0 && c.linearOutput.defined())
      layerLoss = layerLoss + outputMse * (c.linearOutput.to(torch::kFloat) - c.softmaxOutput.to(torch::kFloat)).pow(2).mean();
    total = total.defined() ? total + layerLoss : layerLoss;
  }
  if (!total.defined()) throw std::invalid_argument("no converted layer in the captures: nothing to distill");
  return total;
}

double distillLayerByLayer(models::TransformerModel& model, const torch::Tensor& ids, models::CaptureRequest& capture,
                           models::ForwardOptions options, const std::string& loss, double outputMse, LayerPass pass,
                           bool poison) {
  const bool causal = model.config().causal;
  // The layers' terms stay on the device and are read once, after the last layer: reading each
  // (item()) waited for the GPU at every layer, so it idled while the next layer was launched.
  // A non-finite term is backpropagated too; its step fails on the non-finite loss before the
  // optimizer moves (TrainingSession::train).
  torch::Tensor total;
  capture.consume = [&](models::LayerCapture& c) {
    auto term = distillationLoss({c}, causal, {}, loss, outputMse);
    if (poison) term = term * std::numeric_limits<float>::quiet_NaN();
    total = total.defined() ? total + term.detach() : term.detach();
    // A layer with nothing to train (a performer's fixed projection beside a trained Hedgehog
    // layer) has a term without a graph: it is reported, not backpropagated.
    if (pass == LayerPass::Backward && term.requires_grad()) term.backward();
  };
  options.capture = &capture;
  try {
    model.forward(ids, options);
  } catch (...) {
    capture.consume = nullptr;
    throw;
  }
  capture.consume = nullptr;
  return total.defined() ? total.item<double>() : 0.0;
}

void calibrateWindowMix(models::TransformerModel& model, const torch::Tensor& ids) {
  models::CaptureRequest capture;
  for (int64_t l = 0; l < model.layerCount(); ++l)
    if (auto linear = model.linearAttention(l); linear && linear->config().window > 0) capture.layers.push_back(l);
  if (capture.layers.empty()) return;
  at::NoGradGuard noGrad;
  capture.queriesKeys = true;
  capture.softmaxWeights = false;
  capture.linearWeights = false;
  capture.consume = [&](models::LayerCapture& c) { model.linearAttention(c.layer)->calibrateWindowMix(c.queries, c.keys); };
  models::ForwardOptions options;
  options.capture = &capture;
  options.teacher = true;
  options.computeLogits = false;
  options.stopAfterLayer = capture.layers.back();
  model.forward(ids, options);
}

}  // namespace hh::jobs
