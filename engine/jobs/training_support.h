// Pieces the training jobs (train, finetune) share: the learning-rate schedule (linear warmup,
// then cosine decay to a floor), the next-token loss, held-out LM evaluation, and the AdamW step
// with gradient clipping that refuses to apply a non-finite update.
//   lr(step) = lr * step / warmup                                   for step < warmup
//            = floor + (lr - floor) * (1 + cos(pi * p)) / 2,        p = (step - warmup) / (steps - warmup)
//   with floor = lr * minLrRatio; `step` counts from 0 (the step about to be taken).
#pragma once
#include <torch/optim/optimizer.h>

#include <cstdint>
#include <string>
#include <vector>

#include "engine/attention/initial_values.h"
#include "engine/jobs/job_observer.h"
#include "engine/models/transformer_model.h"

namespace hh::dist {
class Communicator;
}

namespace hh::jobs {

double scheduledLr(double lr, int64_t step, int64_t warmupSteps, int64_t totalSteps, double minLrRatio);
void setLr(torch::optim::Optimizer& optimizer, double lr);

// logits [B, T, V], ids [B, T] int64: mean cross-entropy of logits[:, :-1] against ids[:, 1:]
// (nats per token).
torch::Tensor nextTokenLoss(const torch::Tensor& logits, const torch::Tensor& ids);

// Mean over positions of KL(teacher || student) between the next-token distributions of two
// logits [B, T, V] (the teacher's without gradient), in fp32: sum_v p_t (log p_t - log p_s).
torch::Tensor teacherKlLoss(const torch::Tensor& studentLogits, const torch::Tensor& teacherLogits);

// Mean next-token loss over up to `maxBatches` batches of `rows` (0 = all), in eval mode and
// without gradients; polls the observer's cancel flag between batches (throws JobCancelled).
// With a distributed `world` each rank evaluates its rows of every batch and the token-weighted
// sum is exchanged, so every rank returns the same value (and the cancel poll is left to the
// caller's agreed check: a rank alone must not leave a collective).
double heldOutLmLoss(models::TransformerModel& model, const torch::Tensor& rows, int64_t batchSize, int64_t maxBatches,
                     JobObserver& observer, dist::Communicator* world = nullptr);

// The same for the teacher_kl loss: mean over every position of `rows` of KL(teacher || model)
// between the next-token distributions (modelTeacherKlLoss), batched, in eval mode and without
// gradients, distributed as above. The held-out counterpart of finetuning's teacher_kl loss.
double heldOutTeacherKl(models::TransformerModel& model, models::TransformerModel& teacher, const torch::Tensor& rows,
                        int64_t batchSize, int64_t maxBatches, JobObserver& observer, dist::Communicator* world = nullptr);

// Clips the gradients of `params` to total norm `maxNorm` (<= 0: no clipping) and returns the
// norm before clipping (NaN/inf when some gradient is not finite; the caller then skips the step).
double clipGradients(const std::vector<torch::Tensor>& params, double maxNorm);

void throwIfCancelled(JobObserver& observer);

// What every training job does first: the runtime set up (threads) and the job's own generator
// for initial values seeded and installed for the thread that makes and runs the job
// (engine/attention/initial_values.h). A job class's first member, so that the members after it
// are made with the seed in force, and the last one destroyed.
struct JobStart {
  explicit JobStart(uint64_t seed);
  attn::SeededInitialValues initialValues;
};

}  // namespace hh::jobs
