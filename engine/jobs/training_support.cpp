#include "engine/jobs/training_support.h"

#include <torch/nn/functional/loss.h>
#include <torch/optim/optimizer.h>
#include <torch/types.h>

#include <algorithm>
#include <cmath>

#include "engine/core/runtime.h"
#include "engine/distributed/communicator.h"
#include "engine/jobs/linear_cross_entropy.h"

namespace hh::jobs {

double scheduledLr(double lr, int64_t step, int64_t warmupSteps, int64_t totalSteps, double minLrRatio) {
  if (warmupSteps > 0 && step < warmupSteps) return lr * double(step + 1) / double(warmupSteps);
  const double floor = lr * minLrRatio;
  const int64_t decaySteps = totalSteps - warmupSteps;
  if (decaySteps <= 0) return lr;
  const double p = std::clamp(double(step - warmupSteps) / double(decaySteps), 0.0, 1.0);
  return floor + (lr - floor) * 0.5 * (1.0 + std::cos(M_PI * p));
}

void setLr(torch::optim::Optimizer& optimizer, double lr) {
  for (auto& group : optimizer.param_groups()) group.options().set_lr(lr);
}

torch::Tensor nextTokenLoss(const torch::Tensor& logits, const torch::Tensor& ids) {
  // logits [B,T,V], ids [B,T]
  const int64_t T = ids.size(1), V = logits.size(-1);
  const auto predicted = logits.narrow(1, 0, T - 1).reshape({-1, V}).to(torch::kFloat);  // [B*(T-1), V]
  const auto targets = ids.narrow(1, 1, T - 1).reshape({-1});                             // [B*(T-1)]
  return torch::nn::functional::cross_entropy(predicted, targets);
}

torch::Tensor teacherKlLoss(const torch::Tensor& studentLogits, const torch::Tensor& teacherLogits) {
  const int64_t V = studentLogits.size(-1);
  const auto logS = torch::log_softmax(studentLogits.reshape({-1, V}).to(torch::kFloat), -1);  // [B*T, V]
  const auto logT = torch::log_softmax(teacherLogits.reshape({-1, V}).to(torch::kFloat), -1).detach();
  return (logT.exp() * (logT - logS)).sum(-1).mean();
}

namespace {

// The mean of a per-batch loss over up to `maxBatches` batches of `rows`, weighted by what each
// batch counts (`count(ids)`: its predictions or positions), in eval mode without gradients. The
// loss of a batch is a mean over its count.
template <typename BatchLoss, typename Count>
double heldOutMean(models::TransformerModel& model, const torch::Tensor& rows, int64_t batchSize, int64_t maxBatches,
                   JobObserver& observer, dist::Communicator* world, BatchLoss batchLoss, Count count) {
  at::NoGradGuard noGrad;
  const bool wasTraining = model.is_training();
  model.eval();
  dist::Communicator& ranks = dist::Communicator::orAlone(world);
  double sum = 0, total = 0;
  int64_t batches = 0;
  const int64_t n = rows.size(0);
  for (int64_t start = 0; start < n && (maxBatches <= 0 || batches < maxBatches); start += batchSize, ++batches) {
    if (!ranks.distributed()) throwIfCancelled(observer);  // a lone rank must not leave a collective
    const auto [first, last] = dist::shardRange(std::min(batchSize, n - start), ranks.rank(), ranks.size());
    if (last == first) continue;
    const auto ids = rows.narrow(0, start + first, last - first);  // [b, T]
    const double weight = double(count(ids));
    sum += batchLoss(ids).template item<double>() * weight;
    total += weight;
  }
  model.train(wasTraining);
  const auto both = ranks.sum(std::vector<double>{sum, total});  // this rank's alone
  return both[0] / std::max(both[1], 1.0);
}

}  // namespace

double heldOutLmLoss(models::TransformerModel& model, const torch::Tensor& rows, int64_t batchSize, int64_t maxBatches,
                     JobObserver& observer, dist::Communicator* world) {
  return heldOutMean(
      model, rows, batchSize, maxBatches, observer, world, [&](const torch::Tensor& ids) { return modelNextTokenLoss(model, ids); },
      [](const torch::Tensor& ids) { return ids.size(0) * (ids.size(1) - 1); });
}

double heldOutTeacherKl(models::TransformerModel& model, models::TransformerModel& teacher, const torch::Tensor& rows,
                        int64_t batchSize, int64_t maxBatches, JobObserver& observer, dist::Communicator* world) {
  return heldOutMean(
      model, rows, batchSize, maxBatches, observer, world,
      [&](const torch::Tensor& ids) { return modelTeacherKlLoss(model, teacher, ids); },
      [](const torch::Tensor& ids) { return ids.size(0) * ids.size(1); });
}

double clipGradients(const std::vector<torch::Tensor>& params, double maxNorm) {
  std::vector<torch::Tensor> norms;
  for (const auto& p : params)
    if (p.grad().defined()) norms.push_back(p.grad().detach().to(torch::kDouble).norm().pow(2));
  if (norms.empty()) return 0.0;
  const double norm = std::sqrt(torch::stack(norms).sum().item<double>());
  if (!std::isfinite(norm)) return norm;
  if (maxNorm > 0 && norm > maxNorm) {
    at::NoGradGuard noGrad;
    const double factor = maxNorm / (norm + 1e-6);
    for (const auto& p : params)
      if (p.grad().defined()) p.grad().mul_(factor);
  }
  return norm;
}

void throwIfCancelled(JobObserver& observer) {
  if (observer.cancelled()) throw JobCancelled();
}

JobStart::JobStart(uint64_t seed) : initialValues(seed) {
  hh::initRuntime();
}

}  // namespace hh::jobs
