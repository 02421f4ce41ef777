// An experiment: one job kind, a base config and named variants, run one after another, then a
// summary of every variant's final metrics (what the results pages and the workbench's
// experiment view read). A project file:
//   {"name": "associative_recall", "description": "...", "job": "train",
//    "run_dir": "runs/experiments/associative_recall",
//    "base": { <a train config, without run_dir> },
//    "variants": [{"name": "softmax", "set": {"feature_map": "softmax"}},
//                 {"name": "exp_t2", "set": {"feature_map": "exp_t", "exp_t": 2}}, ...]}
// Variant v runs the job with config = merge_patch(base, v.set) (RFC 7396: objects merge key by
// key, null deletes, anything else replaces) and run_dir = <run_dir>/<v.name>. Every variant's
// config is parsed before the first one runs, so a typo fails at once, naming the variant.
// After a variant completes, <run_dir>/<name>/variant.json records its config, status and wall
// time; a later run with the same config reuses it (unless `force`), so an interrupted
// experiment continues where it stopped. The summary (<run_dir>/summary.json and summary.csv;
// rewritten after each variant that runs, so it lists the results so far, and at the end) has,
// per variant, the last value of every scalar of every run file in its folder, keyed by the
// run file's folder relative to the variant's ("" for the variant's own run.h5):
//   train:   test_accuracy, attention_entropy, val_loss, ...
//   convert: perplexity_converted, ... and "evaluate/kl_mean_hedgehog", "distill/kl_mean", ...
// With "repeats" (experiment_config.h) the variants are the declared ones times the repeats, and
// the summary adds each declared variant's spreads over them (experiment_groups.h).
#pragma once
#include <nlohmann/json.hpp>

#include <map>
#include <string>
#include <vector>

#include "engine/config/experiment_config.h"
#include "engine/jobs/job_observer.h"

namespace hh::jobs {


struct VariantResult {
  std::string name;
  std::string runDir;
  JobStatus status = JobStatus::Completed;
  std::string message;
  double seconds = 0;   // wall time of the run that produced it (also when reused)
  bool reused = false;  // completed earlier with the same config: not run again
  std::map<std::string, double> metrics;
};

struct ExperimentOptions {
  bool force = false;               // run every variant again
  std::vector<std::string> only;    // run only these variants (the others are reused if done)
  bool summaryOnly = false;         // run nothing: summarise the variants run earlier with their
                                    // config (completed, failed or cancelled, as their record says)
  std::vector<std::string> ranInChildren;  // with summaryOnly: the variants this invocation's child
                                           // processes ran (experiment --jobs), listed as run, not reused
  // With ranInChildren: why a child failed, per variant. One that left no record (killed while its
  // job ran: a child removes the record first) is listed as failed with this reason.
  std::map<std::string, std::string> childFailures;
  bool resume = false;              // a variant left unfinished continues from its checkpoint (train,
                                    // distill, finetune); it starts afresh where there is none, and a
                                    // convert or evaluate variant always does
};

struct ExperimentResult {
  JobStatus status = JobStatus::Completed;
  std::string message;
  std::vector<VariantResult> variants;  // in the config's order; variants not run yet are absent
  std::string summaryJson, summaryCsv;
  double seconds = 0;                   // this invocation's wall time
};

// Runs the variants on the calling thread. A failed variant is recorded and the next one runs; a
// cancel stops the experiment (the summary still lists what finished).
ExperimentResult runExperiment(const ExperimentConfig& config, JobObserver& observer, const ExperimentOptions& options = {});

// The variants runExperiment would run now with these options (not reusable, or forced), in order.
std::vector<std::string> pendingVariants(const ExperimentConfig& config, const ExperimentOptions& options = {});

// The record <run_dir>/<name>/variant.json of variant `name` when it was written for the variant's
// current config (its status, message and seconds into `out`); false when there is none, it is
// unreadable, or it records another config.
bool variantRecord(const ExperimentConfig& config, const std::string& name, VariantResult& out);

// The summary of the variants found under config.runDir (completed or not), as runExperiment writes it.
nlohmann::json experimentSummary(const ExperimentConfig& config, const std::vector<VariantResult>& variants);
// The last value of every scalar of every run.h5 under `dir` (at most two folders deep), keyed
// "<relative folder>/<scalar>" ("<scalar>" for dir/run.h5). Unreadable files are skipped.
std::map<std::string, double> finalMetrics(const std::string& dir);

}  // namespace hh::jobs
