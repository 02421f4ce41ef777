// `hedgehog experiment --config FILE [--only a,b] [--force] [--resume] [--list] [--jobs N]`: runs an
// experiment project (engine/jobs/experiment_job.h: one job kind, a base config, named variants)
// variant after variant, reusing variants already completed with the same config, then prints the
// summary table and where summary.json / summary.csv are. With --jobs N > 1 the pending variants
// run N at a time in child processes (app/cli/variant_processes.h) before the summary.
#include <cstdio>
#include <set>

#include "app/cli/cli_observer.h"
#include "app/cli/commands.h"
#include "app/cli/variant_processes.h"
#include "engine/config/config_file.h"
#include "engine/jobs/experiment_job.h"

namespace hh::cli {

namespace {
void printSummary(const jobs::ExperimentResult& r) {
  // The metrics every variant has, as columns (the summary files hold all of them).
  std::set<std::string> common;
  bool first = true;
  for (const auto& v : r.variants) {
    std::set<std::string> keys;
    for (const auto& [k, value] : v.metrics) keys.insert(k);
    if (first) common = keys;
    else
      for (auto it = common.begin(); it != common.end();) it = keys.count(*it) ? std::next(it) : common.erase(it);
    first = false;
  }
  std::printf("%-20s %-10s %9s", "variant", "status", "seconds");
  for (const auto& k : common) std::printf(" %s", k.c_str());
  std::printf("\n");
  for (const auto& v : r.variants) {
    std::printf("%-20s %-10s %9.1f", v.name.c_str(), jobs::toString(v.status), v.seconds);
    for (const auto& k : common) std::printf(" %*.4g", int(k.size()), v.metrics.at(k));
    std::printf("%s\n", v.reused ? "   (reused)" : "");
  }
}
}  // namespace

void addExperimentCommand(CLI::App& app) {
  struct Args {
    std::string configFile;
    std::vector<std::string> only;
    bool force = false, resume = false, list = false;
    int jobs = 1;
  };
  auto a = std::make_shared<Args>();
  auto* cmd = app.add_subcommand("experiment", "Run an experiment project: one job over named variants, then a summary");
  cmd->add_option("--config", a->configFile, "Experiment project (projects/experiments/*.json)")->required()->check(CLI::ExistingFile);
  cmd->add_option("--only", a->only, "Run only these variants (the others are reused when done)")->delimiter(',');
  cmd->add_flag("--force", a->force, "Run the chosen variants again even if done with the same config");
  cmd->add_flag("--resume", a->resume,
                "Continue a variant left unfinished (killed, cancelled) from its checkpoint instead of starting it again");
  cmd->add_option("--jobs", a->jobs, "Run this many variants at once, each in its own process (cores shared out)")
      ->check(CLI::Range(1, 64));
  cmd->add_flag("--list", a->list, "Print the variants and their merged configs, run nothing");
  cmd->callback([a] {
    const auto config = jobs::parseConfigFile(a->configFile, "", jobs::experimentConfigFromJson);
    if (a->list) {
      for (const auto& v : config.variants)
        std::printf("%s\n%s\n", v.name.c_str(), jobs::variantConfig(config, v.name).dump(2).c_str());
      return;
    }
    CliObserver observer;
    jobs::ExperimentOptions options;
    options.force = a->force;
    options.only = a->only;
    options.resume = a->resume;
    int childFailures = 0;
    std::string childError;  // one line for stderr naming the first failed variant
    if (a->jobs > 1) {
      const auto pending = jobs::pendingVariants(config, options);
      if (pending.size() > 1) {
        std::vector<std::string> flags;
        if (a->force) flags.push_back("--force");
        if (a->resume) flags.push_back("--resume");
        const auto spawned = runVariantsInProcesses(a->configFile, config, pending, a->jobs, flags);
        if (spawned.interrupted)
          throw JobFailed(jobs::JobStatus::Cancelled, "interrupted: the variants that ran were cancelled; --resume continues them");
        options.summaryOnly = true;  // the children ran them: summarise what they completed
        childFailures = spawned.failed;
        if (spawned.failed > 0) {
          std::printf("%d variant%s failed: see the logs above\n", spawned.failed, spawned.failed == 1 ? "" : "s");
          childError = std::to_string(spawned.failed) + " variant" + (spawned.failed == 1 ? "" : "s") + " failed; the first, " +
                       spawned.firstFailed + (spawned.firstFailedError.empty() ? "" : ": " + spawned.firstFailedError) +
                       " (log " + spawned.firstFailedLog + ")";
        }
      }
    }
    const auto r = jobs::runExperiment(config, observer, options);
    printSummary(r);
    std::printf("%s (%.1f s): %s\nsummary: %s\n", jobs::toString(r.status), r.seconds, r.message.c_str(), r.summaryJson.c_str());
    if (childFailures > 0) throw std::runtime_error(childError);
    if (r.status != jobs::JobStatus::Completed) throw JobFailed(r.status, r.message);
  });
}

}  // namespace hh::cli
