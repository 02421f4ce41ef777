// What the train job measures on a synthetic task (engine/data/synthetic_tasks.h): the loss and
// accuracy on scored positions, and the attention the model actually uses.
//
// Shapes: B batch, T length, V vocab, L layers, H heads, S snapshot side.
//   targetLoss:  logits [B, T, V], targets [B, T] int64 (kIgnoreTarget = -100 skipped):
//                loss = mean over scored (b, t) of -log softmax(logits[b, t])[targets[b, t]]  (nats)
//                (logits[:, t] against targets[:, t]: the targets are already aligned to the
//                position that predicts them).
//   accuracy  =  #{scored (b, t) : argmax_v logits[b, t, v] == targets[b, t]} / #{scored (b, t)}
//   entropy   =  per layer l and head h, the mean over rows (queries i of every sequence) of
//                H_i = -sum_{j <= i} a_ij log a_ij  (hh::metrics::headEntropy over causal pairs),
//                where a is the attention the model's own forward uses (teacher = false): the
//                linear weights phi(q_i)^T phi(k_j) / sum_m phi(q_i)^T phi(k_m) on a linear layer,
//                softmax(q k^T / sqrt(D)) on a softmax layer. Table [L, H] in nats; the scalar is
//                the mean over all L x H entries (NaN propagates: a diverged head shows).
//   snapshots =  for chosen (layer, head) pairs, the first sequence's maps, average-pooled from
//                [T, T] to [S, S] (runs::poolMaps): "softmax" = softmax(q k^T / sqrt(D)) of the
//                layer's own q, k; "linear" = the linear weights on a linear layer, empty on a
//                softmax layer.
#pragma once
#include <ATen/core/Tensor.h>

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "engine/data/synthetic_tasks.h"
#include "engine/jobs/head_tables.h"
#include "engine/jobs/job_observer.h"
#include "engine/models/transformer_model.h"

namespace hh::jobs {

// logits [B, T, V], targets [B, T]: mean cross-entropy over scored positions (a scalar tensor
// with gradient; NaN when nothing is scored).
at::Tensor targetLoss(const at::Tensor& logits, const at::Tensor& targets);

struct TaskScore {
  double loss = 0.0;      // mean over scored positions (nats)
  double accuracy = 0.0;  // fraction of scored positions predicted exactly
  int64_t scored = 0;     // scored positions seen
};

// Up to `maxBatches` batches (0 = the whole split) of `split` in eval mode without gradients;
// polls the observer's cancel flag between batches (throws JobCancelled).
TaskScore scoreTask(models::TransformerModel& model, const data::TaskSplit& split, int64_t batchSize,
                    int64_t maxBatches, JobObserver& observer);

struct OwnAttention {
  HeadTable entropy;                         // "entropy", [L, H] nats
  double meanEntropy = 0.0;                  // mean over every layer and head
  std::vector<AttentionSnapshot> snapshots;  // of ids[0], in the order of the requested pairs
};

// ids [B, T]: one forward in eval mode without gradients, capturing every layer (see above).
OwnAttention probeOwnAttention(models::TransformerModel& model, const at::Tensor& ids,
                               const std::vector<std::pair<int, int>>& snapshotPairs, int snapshotSize);

// The heatmap pairs of a task run: head 0 of every layer and every head of the last layer,
// sorted by (layer, head), no duplicates.
std::vector<std::pair<int, int>> taskSnapshotPairs(int layers, int heads);

// Writes <dir>/task.json: {"task": <task config>, "vocab_size": V, "token_names": [...]}, so later
// tools can rebuild the data and name the tokens of a model trained on the task.
void writeTaskFile(const std::string& dir, const nlohmann::json& task, int64_t vocabSize,
                   const std::vector<std::string>& tokenNames);

}  // namespace hh::jobs
