// The LM head fused with the next-token loss (linear_cross_entropy.h).
#include "engine/jobs/linear_cross_entropy.h"

#include <torch/autograd.h>

#include <algorithm>

#include "engine/jobs/training_support.h"

namespace hh::jobs {
namespace {

constexpr int64_t kChunkLogitBytes = int64_t(64) << 20;

// hidden [N, C], weight [V, C], targets [N] -> the mean loss; the gradients the flags ask for are
// made here and saved, scaled by the upstream gradient in backward.
class LinearCrossEntropy : public torch::autograd::Function<LinearCrossEntropy> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& hidden,
                               const torch::Tensor& weight, const torch::Tensor& targets, int64_t chunkRows,
                               bool gradHidden, bool gradWeight) {
    const int64_t n = hidden.size(0), vocab = weight.size(0);
    const auto w = weight.to(hidden.scalar_type());  // [V, C]
    if (chunkRows <= 0) chunkRows = std::max<int64_t>(1, kChunkLogitBytes / (4 * vocab));
    torch::Tensor gHidden = gradHidden ? torch::empty_like(hidden) : torch::Tensor();
    torch::Tensor gWeight =
        gradWeight ? torch::zeros(weight.sizes(), weight.options().dtype(torch::kFloat)) : torch::Tensor();
    auto total = torch::zeros({}, hidden.options().dtype(torch::kFloat));
    for (int64_t start = 0; start < n; start += chunkRows) {
      const int64_t rows = std::min(chunkRows, n - start);
      const auto h = hidden.narrow(0, start, rows), t = targets.narrow(0, start, rows).unsqueeze(1);  // [r, C], [r, 1]
      auto logits = torch::matmul(h, w.t()).to(torch::kFloat);                                        // [r, V]
      const auto lse = logits.logsumexp(-1, true);                                                    // [r, 1]
      total += (lse - logits.gather(1, t)).sum();
      if (!gradHidden && !gradWeight) continue;
      auto g = logits.sub_(lse).exp_();  // softmax, in place of the logits
      g.scatter_add_(1, t, torch::full({rows, 1}, -1.0f, g.options())).div_(double(n));
      const auto gc = g.to(hidden.scalar_type());
      if (gradHidden) gHidden.narrow(0, start, rows).copy_(torch::matmul(gc, w));
      if (gradWeight) gWeight.add_(torch::matmul(gc.t(), h));
    }
    ctx->save_for_backward({gHidden, gWeight});
    return total / double(n);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto scale = grads[0];  // scalar
    const auto gHidden = saved[0].defined() ? saved[0] * scale.to(saved[0].scalar_type()) : torch::Tensor();
    const auto gWeight = saved[1].defined() ? saved[1] * scale : torch::Tensor();
    return {gHidden, gWeight, torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor linearCrossEntropy(const torch::Tensor& hidden, const torch::Tensor& weight, const torch::Tensor& targets,
                                 int64_t chunkRows) {
  TORCH_CHECK(hidden.dim() == 2 && weight.dim() == 2 && hidden.size(1) == weight.size(1),
              "linearCrossEntropy: hidden [N, C] and weight [V, C]");
  TORCH_CHECK(targets.dim() == 1 && targets.size(0) == hidden.size(0), "linearCrossEntropy: targets [N]");
  const bool grads = torch::GradMode::is_enabled();
  return LinearCrossEntropy::apply(hidden, weight, targets, chunkRows, grads && hidden.requires_grad(),
                                   grads && weight.requires_grad());
}

torch::Tensor modelNextTokenLoss(models::TransformerModel& model, const torch::Tensor& ids,
                                 models::ForwardOptions options) {
  const auto head = model.outputEmbedding();
  if (!head.defined()) return nextTokenLoss(model.forward(ids, options).logits, ids);
  options.computeLogits = false;
  const auto hidden = model.forward(ids, options).hidden;  // [B, T, C], after the final norm
  const int64_t T = ids.size(1), C = hidden.size(-1);
  return linearCrossEntropy(hidden.narrow(1, 0, T - 1).reshape({-1, C}), head, ids.narrow(1, 1, T - 1).reshape({-1}));
}

}  // namespace hh::jobs
