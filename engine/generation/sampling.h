// Choosing the next token from a model's logits: greedy, or sampling with temperature, top-k and
// top-p (nucleus), from a seeded generator so that a run can be repeated exactly.
//   logits [V] (any float dtype, any device) -> token id in [0, V)
// Order of the filters (as most tools apply them): temperature scales the logits, top-k keeps the
// k largest, top-p keeps the smallest set of the remaining tokens whose probability reaches p
// (the most likely token always stays), then a token is drawn from what is left, renormalised.
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <random>
#include <string>

namespace hh::gen {

struct SamplingOptions {
  double temperature = 0.0;  // 0 = greedy (argmax; ties go to the lowest id)
  int64_t topK = 0;          // 0 = no limit
  double topP = 1.0;         // 1 = no nucleus cut
  uint64_t seed = 0;

  bool greedy() const { return temperature <= 0.0; }
  // Throws std::invalid_argument naming the setting (negative temperature, top_p outside (0, 1], ...).
  void validate() const;
  std::string describe() const;  // "greedy" or "temperature 0.8, top-k 40, top-p 0.95, seed 1"
};

// The distribution the options sample from: probabilities [V] (double, CPU), zero outside the
// kept set. Greedy gives a one-hot vector. Exposed so tests can check the filters exactly.
at::Tensor samplingDistribution(const at::Tensor& logits, const SamplingOptions& options);

class Sampler {
 public:
  explicit Sampler(SamplingOptions options);
  int64_t next(const at::Tensor& logits);  // logits [V]
  const SamplingOptions& options() const { return options_; }

 private:
  SamplingOptions options_;
  std::mt19937_64 rng_;
};

}  // namespace hh::gen
