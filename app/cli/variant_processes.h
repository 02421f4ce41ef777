// `hedgehog experiment --jobs N`: the pending variants run as N child processes of this
// executable at a time, one variant each (`experiment --config FILE --only NAME [--force] [--resume]`), so
// a machine with several cores trains several small models at once. Each child gets
// HH_NUM_THREADS = max(1, cores / N) unless the variable is set, and writes its output to
// <variant run_dir>/experiment.log. Ctrl-C or SIGTERM to the launcher is passed on to every child
// as one SIGINT (each child has its own process group): each cancels its job, a second signal
// kills them; no new child starts after the first. A launcher killed outright leaves no child:
// each gets a SIGTERM when it dies, a cancel. A child that fails is named with why (its record,
// its log's error line, or "killed by signal 9"), and the summary lists it as failed. The run
// files are written by one process each (HDF5 here is not thread-safe, hence processes, not threads).
#pragma once
#include <map>
#include <string>
#include <vector>

#include "engine/jobs/experiment_job.h"

namespace hh::cli {

struct VariantProcessesResult {
  int failed = 0;          // children that exited non-zero
  bool interrupted = false;
  std::string firstFailed, firstFailedLog, firstFailedError;  // the first that failed: name, log, its error line
  // Every variant whose child failed (not cancelled): why, as its record, its log's error line or
  // its wait status says ("killed by signal 9").
  std::map<std::string, std::string> failures;
};

// `flags` go to every child as they are (--force, --resume).
VariantProcessesResult runVariantsInProcesses(const std::string& configFile, const jobs::ExperimentConfig& config,
                                              const std::vector<std::string>& names, int jobs,
                                              const std::vector<std::string>& flags);

}  // namespace hh::cli
