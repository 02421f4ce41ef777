// The LM head fused with the next-token loss and the teacher KL (linear_cross_entropy.h).
#include "engine/jobs/linear_cross_entropy.h"

#include <torch/autograd.h>

#include <algorithm>

#include "engine/jobs/training_support.h"

namespace hh::jobs {
namespace {

constexpr int64_t kChunkLogitBytes = int64_t(64) << 20;

// The loss of one chunk's logits z [r, V] fp32 against hard targets t [r, 1] (-log softmax(z)[t])
// or a teacher's logits zt [r, V] fp32 (sum softmax(zt) (log softmax(zt) - log softmax(z))),
// summed; with `gradient`, z becomes the loss's gradient in place (softmax(z) minus the target).
torch::Tensor chunkLoss(torch::Tensor& z, const torch::Tensor& t, torch::Tensor zt, bool gradient) {
  const auto lse = z.logsumexp(-1, true);  // [r, 1]
  torch::Tensor sum, target;
  if (zt.defined()) {
    zt.sub_(zt.logsumexp(-1, true));  // log softmax, in place
    target = zt.exp();
    sum = (target * (zt - z + lse)).sum();
  } else {
    sum = (lse - z.gather(1, t)).sum();
  }
  if (gradient) {
    z.sub_(lse).exp_();  // softmax, in place of the logits
    if (target.defined())
      z.sub_(target);
    else
      z.scatter_add_(1, t, torch::full({z.size(0), 1}, -1.0f, z.options()));
  }
  return sum;
}

// hidden [N, C], weight [V, C] and either targets [N] or the teacher's hidden [N, C'] and head
// [V, C'] (the other side empty) -> the mean loss; the gradients the flags ask for are made here
// and saved, scaled by the upstream gradient in backward.
class LinearHeadLoss : public torch::autograd::Function<LinearHeadLoss> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& hidden,
                               const torch::Tensor& weight, const torch::Tensor& targets,
                               const torch::Tensor& teacherHidden, const torch::Tensor& teacherWeight,
                               int64_t chunkRows, bool gradHidden, bool gradWeight) {
    const int64_t n = hidden.size(0), vocab = weight.size(0);
    const auto w = weight.to(hidden.scalar_type());  // [V, C]
    const bool soft = teacherHidden.numel() > 0;     // else hard targets
    const auto wt = soft ? teacherWeight.to(teacherHidden.scalar_type()) : torch::Tensor();
    if (chunkRows <= 0) chunkRows = std::max<int64_t>(1, kChunkLogitBytes / (4 * vocab));
    torch::Tensor gHidden = gradHidden ? torch::empty_like(hidden) : torch::Tensor();
    torch::Tensor gWeight =
        gradWeight ? torch::zeros(weight.sizes(), weight.options().dtype(torch::kFloat)) : torch::Tensor();
    auto total = torch::zeros({}, hidden.options().dtype(torch::kFloat));
    for (int64_t start = 0; start < n; start += chunkRows) {
      const int64_t rows = std::min(chunkRows, n - start);
      const auto h = hidden.narrow(0, start, rows);        // [r, C]
      auto z = torch::matmul(h, w.t()).to(torch::kFloat);  // [r, V]
      const auto zt =
          soft ? torch::matmul(teacherHidden.narrow(0, start, rows), wt.t()).to(torch::kFloat) : torch::Tensor();
      const auto t = soft ? torch::Tensor() : targets.narrow(0, start, rows).unsqueeze(1);  // [r, 1]
      total += chunkLoss(z, t, zt, gradHidden || gradWeight);
      if (!gradHidden && !gradWeight) continue;
      const auto g = z.div_(double(n)).to(hidden.scalar_type());  // d mean / d logits
      if (gradHidden) gHidden.narrow(0, start, rows).copy_(torch::matmul(g, w));
      if (gradWeight) gWeight.add_(torch::matmul(g.t(), h));
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
    return {gHidden, gWeight, {}, {}, {}, {}, {}, {}};
  }
};

// LinearHeadLoss with an empty tensor for what does not apply (a custom Function takes no
// undefined tensors): the targets, or the teacher's hidden states and head.
torch::Tensor headLoss(const torch::Tensor& hidden, const torch::Tensor& weight, const torch::Tensor& targets,
                       const torch::Tensor& teacherHidden, const torch::Tensor& teacherWeight, int64_t chunkRows) {
  TORCH_CHECK(hidden.dim() == 2 && weight.dim() == 2 && hidden.size(1) == weight.size(1),
              "linear head loss: hidden [N, C] and weight [V, C]");
  const bool grads = torch::GradMode::is_enabled();
  const auto none = [&](const torch::Tensor& t) {
    return t.defined() ? t.detach() : torch::empty({0}, hidden.options());
  };
  return LinearHeadLoss::apply(hidden, weight, none(targets), none(teacherHidden), none(teacherWeight), chunkRows,
                               grads && hidden.requires_grad(), grads && weight.requires_grad());
}

}  // namespace

torch::Tensor linearCrossEntropy(const torch::Tensor& hidden, const torch::Tensor& weight, const torch::Tensor& targets,
                                 int64_t chunkRows) {
  TORCH_CHECK(targets.dim() == 1 && targets.size(0) == hidden.size(0), "linearCrossEntropy: targets [N]");
  return headLoss(hidden, weight, targets, {}, {}, chunkRows);
}

torch::Tensor linearTeacherKl(const torch::Tensor& hidden, const torch::Tensor& weight,
                              const torch::Tensor& teacherHidden, const torch::Tensor& teacherWeight,
                              int64_t chunkRows) {
  TORCH_CHECK(teacherHidden.dim() == 2 && teacherWeight.dim() == 2 && teacherHidden.size(0) == hidden.size(0) &&
                  teacherHidden.size(1) == teacherWeight.size(1) && teacherWeight.size(0) == weight.size(0),
              "linearTeacherKl: teacher hidden [N, C'] and head [V, C'] for the student's N rows and V classes");
  return headLoss(hidden, weight, {}, teacherHidden, teacherWeight, chunkRows);
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

torch::Tensor modelTeacherKlLoss(models::TransformerModel& model, models::TransformerModel& teacher,
                                 const torch::Tensor& ids) {
  models::ForwardOptions teacherOptions;
  teacherOptions.teacher = true;  // every layer softmax: the original model
  const auto head = model.outputEmbedding(), teacherHead = teacher.outputEmbedding();
  if (!head.defined() || !teacherHead.defined()) {
    torch::Tensor teacherLogits;
    {
      at::NoGradGuard noGrad;
      teacherLogits = teacher.forward(ids, teacherOptions).logits;
    }
    return teacherKlLoss(model.forward(ids).logits, teacherLogits);
  }
  torch::Tensor teacherHidden;
  {
    at::NoGradGuard noGrad;
    teacherOptions.computeLogits = false;
    teacherHidden = teacher.forward(ids, teacherOptions).hidden;  // [B, T, C]
  }
  models::ForwardOptions options;
  options.computeLogits = false;
  const auto hidden = model.forward(ids, options).hidden;  // [B, T, C]
  return linearTeacherKl(hidden.reshape({-1, hidden.size(-1)}), head,
                         teacherHidden.reshape({-1, teacherHidden.size(-1)}), teacherHead);
}

}  // namespace hh::jobs
