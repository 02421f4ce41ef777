// Loss, accuracy and own-attention measurements of a task run; formulas in task_evaluation.h.
#include "engine/jobs/task_evaluation.h"

#include <torch/nn/functional/loss.h>
#include <torch/types.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <limits>
#include <stdexcept>

#include "engine/io/durable_file.h"
#include "engine/jobs/job_support.h"
#include "engine/jobs/training_support.h"
#include "engine/metrics/attention_metrics.h"
#include "engine/runs/run_layout.h"

namespace hh::jobs {

namespace {

// Restores the module's training flag when it goes out of scope.
struct EvalModeGuard {
  explicit EvalModeGuard(models::TransformerModel& m) : model(m), wasTraining(m.is_training()) { model.eval(); }
  ~EvalModeGuard() { model.train(wasTraining); }
  models::TransformerModel& model;
  bool wasTraining;
};

}  // namespace

torch::Tensor targetLoss(const torch::Tensor& logits, const torch::Tensor& targets) {
  // logits [B,T,V], targets [B,T]
  const int64_t V = logits.size(-1);
  namespace F = torch::nn::functional;
  return F::cross_entropy(logits.reshape({-1, V}).to(torch::kFloat), targets.reshape({-1}),
                          F::CrossEntropyFuncOptions().ignore_index(data::kIgnoreTarget));
}

TaskScore scoreTask(models::TransformerModel& model, const data::TaskSplit& split, int64_t batchSize,
                    int64_t maxBatches, JobObserver& observer) {
  at::NoGradGuard noGrad;
  EvalModeGuard evalMode(model);
  namespace F = torch::nn::functional;
  double lossSum = 0;
  int64_t correct = 0, scored = 0, batches = 0;
  const int64_t n = split.ids.size(0);
  for (int64_t start = 0; start < n && (maxBatches <= 0 || batches < maxBatches); start += batchSize, ++batches) {
    throwIfCancelled(observer);
    const int64_t rows = std::min(batchSize, n - start);
    const auto ids = split.ids.narrow(0, start, rows);          // [B,T]
    const auto targets = split.targets.narrow(0, start, rows);  // [B,T]
    const auto logits = model.forward(ids).logits;              // [B,T,V]
    const int64_t V = logits.size(-1);
    lossSum += F::cross_entropy(logits.reshape({-1, V}).to(torch::kFloat), targets.reshape({-1}),
                                F::CrossEntropyFuncOptions().ignore_index(data::kIgnoreTarget).reduction(torch::kSum))
                   .item<double>();
    const auto scoredMask = targets.ne(data::kIgnoreTarget);  // [B,T]
    correct += (logits.argmax(-1).eq(targets) & scoredMask).sum().item<int64_t>();
    scored += scoredMask.sum().item<int64_t>();
  }
  TaskScore score;
  score.scored = scored;
  score.loss = lossSum / double(std::max<int64_t>(scored, 1));
  score.accuracy = double(correct) / double(std::max<int64_t>(scored, 1));
  return score;
}

OwnAttention probeOwnAttention(models::TransformerModel& model, const torch::Tensor& ids,
                               const std::vector<std::pair<int, int>>& snapshotPairs, int snapshotSize) {
  // ids [B,T]
  at::NoGradGuard noGrad;
  EvalModeGuard evalMode(model);
  const int L = static_cast<int>(model.config().layers), H = static_cast<int>(model.config().heads);
  const int64_t T = ids.size(1);
  models::CaptureRequest capture;  // softmax weights of every layer, linear weights of linear layers
  models::ForwardOptions options;
  options.capture = &capture;
  options.teacher = false;  // the weights the model uses: linear layers propagate their linear output
  options.computeLogits = false;
  const auto out = model.forward(ids, options);

  OwnAttention result;
  result.entropy = {"entropy", L, H, std::vector<double>(static_cast<size_t>(L * H), kNaN)};
  const auto valid = metrics::causalMask(T, ids.device());  // [T,T]
  for (const auto& c : out.captures) {
    const int l = static_cast<int>(c.layer);
    const auto& used = c.linearWeights.defined() ? c.linearWeights : c.softmaxWeights;  // [B,H,T,T]
    const auto perHead = metrics::headEntropy(used, valid).cpu();                        // [H] float64
    for (int h = 0; h < H; ++h) result.entropy.values[static_cast<size_t>(l * H + h)] = perHead[h].item<double>();
  }
  double sum = 0;
  for (double v : result.entropy.values) sum += v;
  result.meanEntropy = sum / double(std::max<size_t>(result.entropy.values.size(), 1));

  const int size = static_cast<int>(std::min<int64_t>(T, snapshotSize));
  for (const auto& [pl, ph] : snapshotPairs) {
    if (pl < 0 || pl >= static_cast<int>(out.captures.size()) || ph < 0 || ph >= H)
      throw std::invalid_argument("probeOwnAttention: no (layer " + std::to_string(pl) + ", head " + std::to_string(ph) + ")");
    const auto& c = out.captures[static_cast<size_t>(pl)];
    AttentionSnapshot snap;
    snap.layer = pl;
    snap.head = ph;
    snap.size = size;
    snap.softmax = runs::poolMaps(toFloats(c.softmaxWeights[0][ph]), 1, static_cast<int>(T), size);
    if (c.linearWeights.defined()) snap.linear = runs::poolMaps(toFloats(c.linearWeights[0][ph]), 1, static_cast<int>(T), size);
    result.snapshots.push_back(std::move(snap));
  }
  return result;
}

std::vector<std::pair<int, int>> taskSnapshotPairs(int layers, int heads) {
  std::vector<std::pair<int, int>> pairs;
  for (int l = 0; l + 1 < layers; ++l) pairs.emplace_back(l, 0);
  for (int h = 0; h < heads && layers > 0; ++h) pairs.emplace_back(layers - 1, h);
  return pairs;
}

void writeTaskFile(const std::string& dir, const nlohmann::json& task, int64_t vocabSize,
                   const std::vector<std::string>& tokenNames) {
  const auto path = std::filesystem::path(dir) / "task.json";
  const nlohmann::json file{{"task", task}, {"vocab_size", vocabSize}, {"token_names", tokenNames}};
  io::writeFileAtomically(path.string(), file.dump(2) + "\n");
}

}  // namespace hh::jobs
