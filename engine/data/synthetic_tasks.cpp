// Generators of the synthetic tasks; the layouts and formulas are in synthetic_tasks.h.
#include "engine/data/synthetic_tasks.h"

#include <torch/types.h>

#include <algorithm>
#include <random>
#include <stdexcept>

namespace hh::data {

namespace {

// Uniform in [0, n) by rejection (std::uniform_int_distribution differs between standard
// libraries; this does not).
int64_t below(std::mt19937_64& rng, int64_t n) {
  const uint64_t range = static_cast<uint64_t>(n);
  const uint64_t limit = std::mt19937_64::max() - std::mt19937_64::max() % range;
  uint64_t x = rng();
  while (x >= limit) x = rng();
  return static_cast<int64_t>(x % range);
}

// Independent streams of one seed: stream 1 = train, 2 = test, 3 = validation.
std::mt19937_64 streamOf(uint64_t seed, uint32_t stream) {
  std::seed_seq seq{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32), stream};
  return std::mt19937_64(seq);
}

// One associative-recall row into ids/targets (T entries each).
void recallRow(std::mt19937_64& rng, int64_t V, int64_t T, bool everyRecall, int64_t* ids, int64_t* targets) {
  const int64_t keys = V / 2;
  std::vector<int64_t> valueOf(static_cast<size_t>(keys));
  for (auto& v : valueOf) v = keys + below(rng, keys);
  std::vector<char> seen(static_cast<size_t>(keys), 0);
  std::vector<int64_t> distinct;  // keys in the pairs, in order of first appearance
  int64_t t = 0;
  if (T % 2 == 1) ids[t++] = below(rng, keys);  // filler (odd T)
  for (int64_t p = 0; p < (T - 2) / 2; ++p) {
    const int64_t k = below(rng, keys);
    ids[t++] = k;
    ids[t++] = valueOf[static_cast<size_t>(k)];
    if (!seen[static_cast<size_t>(k)]) seen[static_cast<size_t>(k)] = 1, distinct.push_back(k);
  }
  const int64_t query = distinct[static_cast<size_t>(below(rng, static_cast<int64_t>(distinct.size())))];
  ids[T - 2] = query;
  ids[T - 1] = valueOf[static_cast<size_t>(query)];
  for (int64_t i = 0; i < T; ++i) targets[i] = kIgnoreTarget;
  targets[T - 2] = ids[T - 1];
  if (everyRecall) {  // every pair whose key was seen before predicts its value
    std::fill(seen.begin(), seen.end(), 0);
    for (int64_t i = T % 2; i + 1 < T - 2; i += 2) {
      if (seen[static_cast<size_t>(ids[i])]) targets[i] = ids[i + 1];
      seen[static_cast<size_t>(ids[i])] = 1;
    }
  }
}

// One copy row (symbols 0..V-3, separator V-2, padding V-1).
void copyRow(std::mt19937_64& rng, int64_t V, int64_t T, int64_t* ids, int64_t* targets) {
  const int64_t symbols = V - 2, sep = V - 2, pad = V - 1;
  const int64_t n = 1 + below(rng, (T - 1) / 2);  // [1, (T-1)/2]
  for (int64_t i = 0; i < n; ++i) ids[i] = below(rng, symbols);
  ids[n] = sep;
  for (int64_t i = 0; i < n; ++i) ids[n + 1 + i] = ids[i];
  for (int64_t i = 2 * n + 1; i < T; ++i) ids[i] = pad;
  for (int64_t i = 0; i < T; ++i) targets[i] = (i >= n && i < 2 * n) ? ids[i + 1] : kIgnoreTarget;
}

TaskSplit generate(const SyntheticTaskConfig& c, int64_t rows, uint32_t stream, bool everyRecall) {
  const int64_t V = c.resolvedVocabSize(), T = c.sequenceLength;
  auto rng = streamOf(c.seed, stream);
  TaskSplit split;
  split.ids = torch::empty({rows, T}, torch::kLong);      // [N,T]
  split.targets = torch::empty({rows, T}, torch::kLong);  // [N,T]
  int64_t* ids = split.ids.data_ptr<int64_t>();
  int64_t* targets = split.targets.data_ptr<int64_t>();
  const bool recall = c.kind == kAssociativeRecall;
  for (int64_t n = 0; n < rows; ++n) {
    if (recall) recallRow(rng, V, T, everyRecall, ids + n * T, targets + n * T);
    else copyRow(rng, V, T, ids + n * T, targets + n * T);
  }
  return split;
}

}  // namespace

TaskDataset buildSyntheticTask(const SyntheticTaskConfig& c) {
  validateSyntheticTask(c);
  TaskDataset out;
  out.vocabSize = c.resolvedVocabSize();
  out.train = generate(c, c.trainSamples, 1, c.supervision == kEveryRecall);
  out.test = generate(c, c.testSamples, 2, false);
  out.validation = generate(c, c.testSamples, 3, false);
  const int64_t V = out.vocabSize;
  if (c.kind == kAssociativeRecall) {
    for (int64_t i = 0; i < V / 2; ++i) out.tokenNames.push_back("k" + std::to_string(i));
    for (int64_t i = 0; i < V / 2; ++i) out.tokenNames.push_back("v" + std::to_string(i));
  } else {
    for (int64_t i = 0; i < V - 2; ++i) out.tokenNames.push_back("s" + std::to_string(i));
    out.tokenNames.push_back("sep");
    out.tokenNames.push_back("pad");
  }
  return out;
}

}  // namespace hh::data
