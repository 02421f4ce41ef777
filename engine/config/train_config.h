// The train job's configuration (engine/jobs/train_job.h) as read from and written to project
// files; no Torch.
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "engine/config/distill_config.h"
#include "engine/config/synthetic_task_config.h"

namespace hh::jobs {

// A new model's shape; vocab_size comes from the tokenizer (or the task).
struct ArchitectureConfig {
  std::string modelType = "gpt2";  // gpt2 | llama
  int64_t nEmbd = 128;
  int64_t nLayer = 4;
  int64_t nHead = 4;
  int64_t nKvHead = 0;             // llama: key/value heads (0 = n_head)
  int64_t nInner = 0;              // MLP width (0 = 4 n_embd for gpt2, 8/3 n_embd rounded to 8 for llama)
  int64_t nPositions = 256;
  std::string activation;          // "" = gelu_new (gpt2) / silu (llama)
  double ropeTheta = 10000.0;      // llama
};

nlohmann::json toJson(const ArchitectureConfig& config);
ArchitectureConfig architectureConfigFromJson(const nlohmann::json& json, const std::string& where);
// The Hugging Face-style config.json of a new model (parsed with parseModelConfig).
nlohmann::json architectureToHfJson(const ArchitectureConfig& config, int64_t vocabSize, int64_t bosId, int64_t eosId);

struct TrainConfig {
  std::string modelDir;               // continue from this folder; empty = new model from `architecture`
  ArchitectureConfig architecture;
  std::string tokenizer;              // folder | "gpt2" | "" (see above)
  std::string outputDir;              // the trained model folder; empty = <run_dir>/model
  std::string runDir;                 // run.h5, checkpoint.pt, checkpoint.json
  std::string featureMap;             // "" = keep the folder's plan (softmax for a new model); "softmax" = none
  std::string rule = "additive";
  std::vector<int64_t> layers;        // linear layers; empty = all
  double expT = 1.0;                  // t of the exp_t feature map (exp(t x))
  double lr = 1e-3;
  double minLrRatio = 0.1;            // cosine floor as a fraction of lr
  int64_t warmupSteps = 50;
  double weightDecay = 0.01;
  double beta1 = 0.9, beta2 = 0.95;
  double gradClip = 1.0;              // max global gradient norm (0 = none)
  int64_t steps = 1000;
  int64_t batchSize = 16;
  int64_t evalEvery = 100;
  int64_t evalBatches = 8;            // 0 = the whole validation split
  int64_t patience = 0;               // evaluations without improvement before stopping (0 = never)
  uint64_t seed = 0;
  bool resume = false;
  std::string device = "auto";         // auto | cpu | cuda | cuda:N (engine/core/device.h)
  std::string dtype = "float32";       // float32 | bfloat16 | float64: the compute dtype (engine/config/compute_dtype.h)
  int64_t debugNanAtStep = -1;        // testing aid: poison the loss at this step
  DataConfig data;                    // corpus runs
  data::SyntheticTaskConfig task;     // kind "" = a corpus run (`data`)
};

// JSON key "task": {kind, vocab_size, sequence_length, train_samples, test_samples, seed}.
nlohmann::json toJson(const data::SyntheticTaskConfig& task);
// Every key optional; unknown keys, wrong types and (for a non-empty kind) bad values throw
// std::invalid_argument naming `where` and the key.
data::SyntheticTaskConfig syntheticTaskFromJson(const nlohmann::json& json, const std::string& where);

nlohmann::json toJson(const TrainConfig& config);
// Every key optional (defaults above); unknown keys and wrong types throw std::invalid_argument.
TrainConfig trainConfigFromJson(const nlohmann::json& json);

}  // namespace hh::jobs
