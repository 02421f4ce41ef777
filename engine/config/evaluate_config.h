// The evaluate job's configuration (engine/jobs/evaluate_job.h) as read from and written to
// project files; no Torch.
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "engine/config/distill_config.h"

namespace hh::jobs {

struct EvaluateConfig {
  std::string modelDir;                  // teacher folder (the original, all softmax)
  std::string converted;                 // converted folder or adapters file; empty = `featureMap` untrained
  std::string featureMap = "hedgehog";   // the converted model's map when `converted` is empty
  std::string runDir;                    // where run.h5 goes
  std::string task = "lm";               // lm | classification
  std::vector<std::string> featureMaps;  // table rows: kinds, "exp_t=<t>", "trained"; empty = every kind + "trained" (if converted)
  std::vector<int64_t> layers;           // layers the table's maps go into; empty = the converted model's linear layers
  int64_t maxSequences = 64;             // held-out sequences for perplexity / accuracy (0 = all)
  int64_t tableSequences = 16;           // of those, how many the attention table uses (0 = all)
  int64_t batchSize = 8;
  uint64_t seed = 0;                     // performer projections
  std::string device = "auto";           // auto | cpu | cuda | cuda:N (engine/core/device.h)
  std::string dtype = "float32";       // float32 | bfloat16 | float64: the compute dtype (engine/config/compute_dtype.h)
  DataConfig data;  // lm: brown or a text path; classification: spamassassin (or spam_assassin) or .tsv/.jsonl
};

nlohmann::json toJson(const EvaluateConfig& config);
// Every key optional (defaults above); unknown keys, wrong types and bad values throw
// std::invalid_argument.
EvaluateConfig evaluateConfigFromJson(const nlohmann::json& json);

// The table rows a config asks for (its list, or the default one), validated.
std::vector<std::string> evaluateFeatureMapNames(const EvaluateConfig& config);

}  // namespace hh::jobs
