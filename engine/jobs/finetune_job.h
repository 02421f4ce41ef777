// Stage 2 of the Hedgehog conversion: finetune a converted model on a task loss.
//   Model: a converted folder (its config.json carries the attention plan), or a teacher folder
//   plus an adapters file from stage 1 (loadAdaptersFile).
//   Mode "full": every weight trains (feature maps included; Performer's fixed projections stay
//   fixed). Mode "lora": the body is frozen; LoRA A/B (engine/models/lora.h, rank r, scale
//   alpha / r) on the q/k/v/o projections, the feature maps / rule gates, and a new
//   classification head train; the adapters are merged into the weights before saving, so the
//   saved folder is a plain model.
//   Task "lm": next-token loss; held-out val_loss and perplexity = exp(val_loss).
//   Task "classification": cross-entropy on the head's logits [B, labels]; held-out val_loss
//   and accuracy. Data: a TSV/JSONL file or "spam_assassin" (or "spamassassin") (engine/data/classification_data.h).
//   A model without a classification head gets one (num_labels from the data, fresh weights).
// AdamW with linear warmup + cosine decay, gradient clipping, evaluation every `evalEvery` steps
// with early stopping, a run file (scalars loss, lr, grad_norm, val_loss, perplexity | accuracy),
// the finetuned folder saved with saveModel at the end. NaN/inf stops the job before the update
// (the saved weights are the last good ones); cancel stops within a step.
#pragma once
#include <cstdint>
#include <limits>
#include <string>

#include "engine/config/finetune_config.h"
#include "engine/jobs/job_observer.h"

namespace hh::dist {
class Communicator;
}

namespace hh::jobs {

struct FinetuneResult {
  JobStatus status = JobStatus::Completed;
  std::string message;
  int64_t steps = 0;
  int64_t bestStep = 0;
  // NaN where not measured (cancelled or failed before the evaluation): never a made-up 0.
  static constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
  double initialValidationLoss = kNaN, finalValidationLoss = kNaN, bestValidationLoss = kNaN;
  double initialMetric = kNaN, finalMetric = kNaN;  // perplexity (lm) or accuracy (classification)
  int64_t trainableParameters = 0;
  std::string runFile, modelDir;
  std::string device;  // where it computed: "cpu", "cuda:0 (NAME)", with ", bfloat16" in bf16 (engine/core/device.h)
  double seconds = 0;
};

// `world`: as for runDistill (distill_job.h): null trains alone; otherwise this process is one
// data-parallel rank (batchSize is the global batch; rank 0 writes the run file and the model).
FinetuneResult runFinetune(const FinetuneConfig& config, JobObserver& observer, dist::Communicator* world = nullptr);

}  // namespace hh::jobs
