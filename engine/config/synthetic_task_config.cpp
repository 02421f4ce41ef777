// Validation of synthetic-task settings (see synthetic_task_config.h).
#include "engine/config/synthetic_task_config.h"

#include <stdexcept>

namespace hh::data {

int64_t SyntheticTaskConfig::resolvedVocabSize() const {
  if (vocabSize != 0) return vocabSize;
  return kind == kCopy ? 12 : 40;
}

void validateSyntheticTask(const SyntheticTaskConfig& c) {
  const std::string where = "synthetic task: ";
  if (c.kind != kAssociativeRecall && c.kind != kCopy)
    throw std::invalid_argument(where + "\"kind\" must be \"associative_recall\" or \"copy\", got \"" + c.kind + "\"");
  const int64_t V = c.resolvedVocabSize();
  if (c.kind == kAssociativeRecall && (V < 4 || V % 2 != 0))
    throw std::invalid_argument(where + "\"vocab_size\" must be even and >= 4 for associative_recall (keys and values), got " +
                                std::to_string(V));
  if (c.kind == kCopy && V < 4)
    throw std::invalid_argument(where + "\"vocab_size\" must be >= 4 for copy (symbols, separator, padding), got " +
                                std::to_string(V));
  if (c.supervision != "query" && c.supervision != kEveryRecall)
    throw std::invalid_argument(where + "\"supervision\" must be \"query\" or \"every_recall\", got \"" + c.supervision + "\"");
  if (c.sequenceLength < 4)
    throw std::invalid_argument(where + "\"sequence_length\" must be >= 4, got " + std::to_string(c.sequenceLength));
  if (c.trainSamples < 1) throw std::invalid_argument(where + "\"train_samples\" must be >= 1, got " + std::to_string(c.trainSamples));
  if (c.testSamples < 1) throw std::invalid_argument(where + "\"test_samples\" must be >= 1, got " + std::to_string(c.testSamples));
}

}  // namespace hh::data
