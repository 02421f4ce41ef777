// The finetune job's configuration (engine/jobs/finetune_job.h) as read from and written to
// project files; no Torch.
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "engine/config/distill_config.h"

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
  // lm: next_token (cross-entropy on the text's next tokens) or teacher_kl (KL from the teacher's
  // next-token distribution at every position: the model folder run with every layer softmax,
  // frozen; what to use when the text is the teacher's own, since the whole distribution says
  // more than the one token that was sampled). Held-out val_loss and perplexity stay next-token.
  std::string loss = "next_token";
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
  std::string device = "auto";         // auto | cpu | cuda | cuda:N (engine/core/device.h)
  std::string dtype = "float32";       // float32 | bfloat16 | float64: the compute dtype (engine/config/compute_dtype.h)
  int64_t debugNanAtStep = -1;        // testing aid: poison the loss at this step
  DataConfig data;                    // task lm
  ClassificationDataConfig classification;  // task classification
};

nlohmann::json toJson(const FinetuneConfig& config);
// Every key optional (defaults above); unknown keys and wrong types throw std::invalid_argument.
FinetuneConfig finetuneConfigFromJson(const nlohmann::json& json);

}  // namespace hh::jobs
