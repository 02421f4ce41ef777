// A synthetic task's settings (associative recall, copy; the layouts are in
// engine/data/synthetic_tasks.h, which generates them) and their validation; no Torch.
#pragma once
#include <cstdint>
#include <string>

namespace hh::data {

// The task kinds and the dense supervision mode, as spelled in project files.
constexpr const char* kAssociativeRecall = "associative_recall";
constexpr const char* kCopy = "copy";
constexpr const char* kEveryRecall = "every_recall";

struct SyntheticTaskConfig {
  std::string kind;             // "" (no task) | "associative_recall" | "copy"
  int64_t vocabSize = 0;        // V; 0 = the kind's default (40 for associative_recall, 12 for copy)
  int64_t sequenceLength = 128; // T
  int64_t trainSamples = 10000;
  int64_t testSamples = 2000;
  uint64_t seed = 0;
  std::string supervision = "query";  // train targets, associative recall: "query" | "every_recall"
  bool enabled() const { return !kind.empty(); }
  int64_t resolvedVocabSize() const;  // V after resolving 0
};

// Throws std::invalid_argument naming the field ("kind", "vocab_size", "sequence_length",
// "train_samples", "test_samples", "supervision") for an unknown kind, V odd or < 4 (associative recall), V < 4
// (copy), T < 4, train_samples < 1 or test_samples < 1.
void validateSyntheticTask(const SyntheticTaskConfig& config);

}  // namespace hh::data
