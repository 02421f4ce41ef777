// An experiment's project file (engine/jobs/experiment_job.h: what it runs and how): one job
// kind, a base config and named variants; no Torch.
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace hh::jobs {

struct ExperimentVariant {
  std::string name;     // a folder name: letters, digits, '-', '_', '.'
  nlohmann::json set;   // merge patch over the base config
  // With "repeats": the declared variant this run repeats ("" without repeats) and the repeat's
  // own patch, applied after `set`.
  std::string group;
  std::string repeat;  // the repeat's name ("" without repeats)
  nlohmann::json repeatSet;
};

// "repeats": [{"name": "seed1", "set": {"data": {"seed": 1}}}, ...] runs every declared variant
// once per repeat, as variant "<variant>.<repeat>" with config
// merge_patch(merge_patch(base, variant.set), repeat.set); the summary then adds each declared
// variant's mean, spread and range over its repeats (experiment_groups.h). With "baseline": "<a
// declared variant>" as well, every other variant is also compared with it repeat by repeat (the
// paired differences, a paired t-test and how many repeats came out lower or higher).
struct ExperimentConfig {
  std::string name;
  std::string description;
  std::string job;      // train | convert | distill | finetune | evaluate
  std::string runDir;
  nlohmann::json base = nlohmann::json::object();
  std::vector<ExperimentVariant> variants;  // what runs: the declared ones, times the repeats
  std::vector<ExperimentVariant> declared;  // as the file lists them
  std::vector<ExperimentVariant> repeats;   // empty: each declared variant runs once
  std::string baseline;                     // a declared variant, or "" (needs repeats)
};

// Throws std::invalid_argument naming the key or the variant (unknown keys, wrong types, an
// unknown job, duplicate or unsafe variant names, a variant whose merged config the job refuses).
ExperimentConfig experimentConfigFromJson(const nlohmann::json& json);
nlohmann::json toJson(const ExperimentConfig& config);
// The job config variant `name` runs with (merged, run_dir filled in).
nlohmann::json variantConfig(const ExperimentConfig& config, const std::string& name);

}  // namespace hh::jobs
