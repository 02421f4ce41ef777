// Synthetic sequence tasks for training small models from scratch (docs/design.md, "Uses", 5), generated
// in memory, deterministic for a seed (std::mt19937_64 with our own unbiased integer draws, no
// Torch RNG, so the data is the same on every platform and Torch version).
//
// Associative recall (Hedgehog paper Sec. 3.2 / App. B.1, the H3-style task), vocab V (even, >= 4),
// length T (>= 4). Ids 0 .. V/2-1 are keys ("k0".."k{V/2-1}"), V/2 .. V-1 values ("v0"..). Per
// sequence: a fresh random map key -> value (each key's value uniform over the V/2 values, drawn
// independently, so two keys may share a value), then P = (T-2)/2 pairs "key value" with the key
// uniform over all keys, then a query key uniform over the distinct keys that appeared in the pairs,
// then its value:
//   even T:  k v k v ... k v | q a          (positions 0 .. T-3 pairs, T-2 query, T-1 answer)
//   odd T:   x k v k v ... k v | q a        (x at position 0: one uniform key that is never paired
//                                           nor queried unless it also appears in a pair; it only
//                                           fills the slot, so the pairs keep their even/odd phase)
// The test split's only target is the answer, predicted at the query's position:
// targets[n, T-2] = ids[n, T-1]. The train split has the same with supervision "query"; with
// "every_recall" every pair whose key already appeared earlier in the row is scored too (the key's
// position predicts its value: the same recall, at every repeat), a denser signal for the same data.
//
// Copy (Katharopoulos et al. 2020, Sec. 4.1), vocab V >= 4 (12 by default: 10 symbols): ids
// 0 .. V-3 are symbols ("s0".."s9"), V-2 the separator ("sep"), V-1 padding ("pad"). Per sequence:
// a length n uniform in [1, (T-1)/2], n uniform symbols, the separator, the same n symbols, then
// padding up to T:
//   s1 .. sn sep s1 .. sn pad .. pad       (sep at position n, the copy at n+1 .. 2n)
// Targets are the next tokens of the positions that predict the copy: targets[t] = ids[t+1] for
// t in [n, 2n-1] (the separator predicts s1, the copy of s_i predicts s_{i+1}); n targets per row.
// Padding is never a target.
//
// Shapes: N sequences, T length. ids [N, T] int64; targets [N, T] int64, kIgnoreTarget (-100, the
// ignore_index of cross-entropy) everywhere except at the predicting positions, so a model's
// logits[:, t] are scored against targets[:, t] (already shifted, unlike the LM next-token loss).
// Train, test and validation come from three independent streams derived from the seed: the test
// split does not depend on trainSamples (nor the train split on testSamples). Validation has the
// test split's size and layout; training watches it (held-out curves, early stopping) so that the
// test split is scored only once, at the end.
#pragma once
#include <ATen/core/Tensor.h>

#include "engine/config/synthetic_task_config.h"

#include <cstdint>
#include <string>
#include <vector>

namespace hh::data {

constexpr int64_t kIgnoreTarget = -100;


struct TaskSplit {
  at::Tensor ids;      // [N, T] int64
  at::Tensor targets;  // [N, T] int64, kIgnoreTarget = not scored
};

struct TaskDataset {
  TaskSplit train, test, validation;
  int64_t vocabSize = 0;                // V
  std::vector<std::string> tokenNames;  // [V]: "k3", "v12" / "s7", "sep", "pad"
};

// Validates (see above) and generates the three splits.
TaskDataset buildSyntheticTask(const SyntheticTaskConfig& config);

}  // namespace hh::data
