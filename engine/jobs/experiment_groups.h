// An experiment's declared variants over their repeats (experiment_config.h, "repeats"): for each
// metric of the completed runs, its mean, sample standard deviation and range, and with a
// "baseline" each other variant's paired comparison with it (paired_comparison.h). What the
// summary files and the CLI's table show beside the runs themselves; no Torch.
#pragma once
#include <nlohmann/json.hpp>

#include <map>
#include <string>
#include <vector>

#include "engine/config/experiment_config.h"
#include "engine/jobs/experiment_job.h"
#include "engine/jobs/paired_comparison.h"

namespace hh::jobs {

struct MetricSpread {
  int n = 0;  // completed runs with a finite value
  double mean = 0;
  double sd = 0;  // sample standard deviation (n - 1); NaN for n < 2
  double min = 0, max = 0;
};

struct VariantGroup {
  std::string name;               // the declared variant
  std::vector<std::string> runs;  // its repeats in the summary, in order
  int completed = 0;              // of which completed: the ones the spreads are over
  std::map<std::string, MetricSpread> metrics;
  // With a baseline, for every variant but the baseline itself: per metric, this variant minus
  // the baseline over the repeats where both completed with finite values.
  std::string baseline;
  std::map<std::string, PairedComparison> againstBaseline;
};

// One group per declared variant with a run among `variants`; empty without repeats.
std::vector<VariantGroup> variantGroups(const ExperimentConfig& config, const std::vector<VariantResult>& variants);
// The groups as summary.json's "groups" and as summary_groups.csv (group, runs, completed, then
// "<metric>:mean", "<metric>:sd", "<metric>:min", "<metric>:max", "<metric>:n" per metric; with a
// baseline also "<metric>:diff_mean", ":diff_sd", ":p", ":lower", ":higher", ":pairs").
nlohmann::json groupsJson(const std::vector<VariantGroup>& groups);
std::string groupsCsv(const std::vector<VariantGroup>& groups);
// A number as the summary files write it: %.9g, or nan, inf, -inf.
std::string csvNumber(double v);

}  // namespace hh::jobs
