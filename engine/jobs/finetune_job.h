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
//   and accuracy. Data: a TSV/JSONL file or "spam_assassin" (engine/data/classification_data.h).
//   A model without a classification head gets one (num_labels from the data, fresh weights).
// AdamW with linear warmup + cosine decay, gradient clipping, evaluation every `evalEvery` steps
// with early stopping, a run file (scalars loss, lr, grad_norm, val_loss, perplexity | accuracy),
// the finetuned folder saved with saveModel at the end. NaN/inf stops the job before the update
// (the saved weights are the last good ones); cancel stops within a step.
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>

#include "engine/jobs/distill_job.h"

namespace hh::dist {
class Communicator;
}

namespace hh::jobs {

struct ClassificationDataConfig {
  std::string path = "spam_assassin";  // .tsv | .jsonl | "spam_assassin"
  int64_t sequenceLength = 128;
  double validationFraction = 0.2;
  int64_t maxExamples = 0;             // 0 = all
  uint64_t seed = 0;
};

nlohmann::json toJson(const ClassificationDataConfig& config);
ClassificationDataConfig classificationDataConfigFromJson(const nlohmann::json& json, const std::string& where);

struct FinetuneConfig {
  std::string modelDir;               // converted folder, or the teacher when `adapters` is set
  std::string adapters;               // adapters.safetensors from distill (optional)
  std::string outputDir;              // the finetuned model folder; empty = <run_dir>/model
  std::string runDir;                 // run.h5
  std::string mode = "full";          // full | lora
  int64_t loraRank = 8;
  double loraAlpha = 16;
  std::string task = "lm";            // lm | classification
  double lr = 1e-4;
  double minLrRatio = 0.1;
  int64_t warmupSteps = 20;
  double weightDecay = 0.0;
  double gradClip = 1.0;
  int64_t steps = 200;
  int64_t batchSize = 8;
  int64_t evalEvery = 50;
  int64_t evalBatches = 8;            // 0 = the whole validation split
  int64_t patience = 0;               // evaluations without improvement before stopping (0 = never)
  uint64_t seed = 0;
  bool resume = false;                // continue from <run_dir>/checkpoint.safetensors (when there)
  int64_t debugNanAtStep = -1;        // testing aid: poison the loss at this step
  DataConfig data;                    // task lm
  ClassificationDataConfig classification;  // task classification
};

nlohmann::json toJson(const FinetuneConfig& config);
// Every key optional (defaults above); unknown keys and wrong types throw std::invalid_argument.
FinetuneConfig finetuneConfigFromJson(const nlohmann::json& json);

struct FinetuneResult {
  JobStatus status = JobStatus::Completed;
  std::string message;
  int64_t steps = 0;
  int64_t bestStep = 0;
  double initialValidationLoss = 0, finalValidationLoss = 0, bestValidationLoss = 0;
  double initialMetric = 0, finalMetric = 0;  // perplexity (lm) or accuracy (classification)
  int64_t trainableParameters = 0;
  std::string runFile, modelDir;
  double seconds = 0;
};

// `world`: as for runDistill (distill_job.h): null trains alone; otherwise this process is one
// data-parallel rank (batchSize is the global batch; rank 0 writes the run file and the model).
FinetuneResult runFinetune(const FinetuneConfig& config, JobObserver& observer, dist::Communicator* world = nullptr);

}  // namespace hh::jobs
