// `hedgehog experiment --config FILE [--only a,b] [--force] [--resume] [--list] [--jobs N]`: runs an
// experiment project (engine/jobs/experiment_job.h: one job kind, a base config, named variants)
// variant after variant, reusing variants already completed with the same config, then prints the
// summary table and where summary.json / summary.csv are. With --jobs N > 1 the pending variants
// run N at a time in child processes (app/cli/variant_processes.h) before the summary. `--status`
// runs nothing and prints where each variant stands (engine/jobs/experiment_status.h), also while
// another invocation runs it.
#include <cstdio>
#include <map>
#include <set>

#include "app/cli/cli_observer.h"
#include "app/cli/commands.h"
#include "app/cli/job_end.h"
#include "app/cli/progress_format.h"
#include "app/cli/variant_processes.h"
#include "engine/config/config_file.h"
#include "engine/jobs/experiment_groups.h"
#include "engine/jobs/experiment_job.h"
#include "engine/jobs/experiment_status.h"

namespace hh::cli {

namespace {

// The keys of every non-empty map that `mapOf` gives for the rows: the table's columns.
template <typename Row, typename MapOf>
std::set<std::string> commonKeys(const std::vector<Row>& rows, MapOf mapOf) {
  std::set<std::string> common;
  bool first = true;
  for (const auto& row : rows) {
    const auto* map = mapOf(row);
    if (map->empty()) continue;
    std::set<std::string> keys;
    for (const auto& entry : *map) keys.insert(entry.first);
    if (first) common = keys;
    else
      for (auto it = common.begin(); it != common.end();) it = keys.count(*it) ? std::next(it) : common.erase(it);
    first = false;
  }
  return common;
}

// A table's columns: the keys every row has, or with --metrics those of them asked for, in the
// order asked.
std::vector<std::string> tableColumns(const std::set<std::string>& common, const std::vector<std::string>& wanted) {
  if (wanted.empty()) return {common.begin(), common.end()};
  std::vector<std::string> out;
  for (const auto& k : wanted)
    if (common.count(k)) out.push_back(k);
  return out;
}

void printSummary(const jobs::ExperimentResult& r, const std::vector<std::string>& wanted) {
  // The metrics every variant with metrics has, as columns (the summary files hold all of them);
  // a variant that failed before its run file has none, and blanks in the table.
  const auto common =
      tableColumns(commonKeys(r.variants, [](const jobs::VariantResult& v) { return &v.metrics; }), wanted);
  std::printf("%-20s %-10s %9s", "variant", "status", "seconds");
  for (const auto& k : common) std::printf(" %s", k.c_str());
  std::printf("\n");
  for (const auto& v : r.variants) {
    std::printf("%-20s %-10s %9.1f", v.name.c_str(), jobs::toString(v.status), v.seconds);
    for (const auto& k : common) {
      const auto it = v.metrics.find(k);
      if (it == v.metrics.end())
        std::printf(" %*s", int(k.size()), "-");
      else
        std::printf(" %*.4g", int(k.size()), it->second);
    }
    std::printf("%s\n", v.reused ? "   (reused)" : "");
  }
}

// With a baseline: each other variant minus the baseline, repeat by repeat: the differences' mean
// +- sd, the paired t-test's p and in how many repeats it came out lower / higher.
void printAgainstBaseline(const std::vector<jobs::VariantGroup>& groups, const std::vector<std::string>& keys) {
  bool header = false;
  for (const auto& g : groups) {
    if (g.baseline.empty()) continue;
    if (!header) {
      std::printf("\nagainst %s, repeat by repeat (difference mean +- sd, paired t-test p, lower/higher):\n%-20s",
                  g.baseline.c_str(), "variant");
      for (const auto& k : keys) std::printf(" %s", k.c_str());
      std::printf("\n");
      header = true;
    }
    std::printf("%-20s", g.name.c_str());
    for (const auto& k : keys) {
      const auto it = g.againstBaseline.find(k);
      char cell[96] = "-";
      if (it != g.againstBaseline.end())
        std::snprintf(cell, sizeof cell, "%+.3g+-%.2g p=%.2g %d/%d", it->second.mean, it->second.sd, it->second.p,
                      it->second.lower, it->second.higher);
      std::printf(" %*s", int(k.size()), cell);
    }
    std::printf("\n");
  }
}

// With repeats: each declared variant's mean +- sample sd over its completed repeats, for the
// metrics every group has (summary_groups.csv holds all of them, with min, max and n).
void printGroups(const jobs::ExperimentConfig& config, const jobs::ExperimentResult& r,
                 const std::vector<std::string>& wanted) {
  const auto groups = jobs::variantGroups(config, r.variants);
  if (groups.empty()) return;
  const auto common = tableColumns(commonKeys(groups, [](const jobs::VariantGroup& g) { return &g.metrics; }), wanted);
  std::printf("\nover the repeats (mean +- sd):\n%-20s %5s", "variant", "runs");
  for (const auto& k : common) std::printf(" %s", k.c_str());
  std::printf("\n");
  for (const auto& g : groups) {
    std::printf("%-20s %2d/%-2zu", g.name.c_str(), g.completed, g.runs.size());
    for (const auto& k : common) {
      const auto& s = g.metrics.at(k);
      char cell[64];
      std::snprintf(cell, sizeof cell, "%.4g+-%.2g", s.mean, s.sd);
      std::printf(" %*s", int(k.size()), cell);
    }
    std::printf("\n");
  }
  printAgainstBaseline(groups, common);
}

struct ExperimentFlags {
  std::string configFile;
  std::vector<std::string> only;
  std::vector<std::string> metrics;  // the tables' columns (empty: every metric all rows have)
  bool force = false, resume = false, list = false, status = false;
  int jobs = 1;
};

// What the child processes of --jobs N left to say: "" or one line naming the first failure.
struct ChildOutcome {
  bool interrupted = false;
  std::string error;
};

// --jobs N > 1 with several pending variants: runs them in child processes, after which the
// experiment only summarises what they recorded.
ChildOutcome runPendingInChildren(const ExperimentFlags& f, const jobs::ExperimentConfig& config,
                                  jobs::ExperimentOptions& options) {
  ChildOutcome out;
  if (f.jobs <= 1) return out;
  const auto pending = jobs::pendingVariants(config, options);  // throws on an unknown --only name
  if (pending.size() <= 1) return out;
  std::vector<std::string> flags;
  if (f.force) flags.push_back("--force");
  if (f.resume) flags.push_back("--resume");
  const auto spawned = runVariantsInProcesses(f.configFile, config, pending, f.jobs, flags);
  options.summaryOnly = true;  // the children ran them: summarise what they recorded
  options.ranInChildren = pending;
  options.childFailures = spawned.failures;
  out.interrupted = spawned.interrupted;
  if (spawned.failed > 0 && !spawned.interrupted) {
    const std::string count =
        std::to_string(spawned.failed) + " variant" + (spawned.failed == 1 ? "" : "s") + " failed";
    sayLine(count + ": see the logs above");
    out.error = count + "; the first, " + spawned.firstFailed +
                (spawned.firstFailedError.empty() ? "" : ": " + spawned.firstFailedError) + " (log " +
                spawned.firstFailedLog + ")";
  }
  return out;
}

// The end: the table and the summary's path, or one "end" event in jsonl mode with every variant.
void reportExperimentEnd(const jobs::ExperimentConfig& config, const jobs::ExperimentResult& r,
                         const std::vector<std::string>& wanted) {
  std::set<std::string> known;
  for (const auto& v : r.variants)
    for (const auto& [k, value] : v.metrics) known.insert(k);
  for (const auto& k : wanted)  // a typo after a long run warns; the summary files have every metric
    if (!known.count(k))
      std::fprintf(stderr, "hedgehog: --metrics: no variant has \"%s\" (summary.csv names them all)\n", k.c_str());
  JobEnd end(r.status, r.message, r.seconds, -1, "", {{"summary", r.summaryJson}, {"summary_csv", r.summaryCsv}});
  const auto summary = jobs::experimentSummary(config, r.variants);
  end.extra["variants"] = summary.at("variants");
  if (summary.contains("groups")) end.extra["groups"] = summary.at("groups");
  end.printHuman = [&r, &config, &wanted] {
    printSummary(r, wanted);
    printGroups(config, r, wanted);
    std::printf("%s (%.1f s): %s\nsummary: %s\n", jobs::toString(r.status), r.seconds, r.message.c_str(),
                r.summaryJson.c_str());
  };
  reportJobEnd(end);
}

// --status: where each variant stands (engine/jobs/experiment_status.h), then the counts.
void printStatus(const jobs::ExperimentConfig& config) {
  std::map<std::string, int> counts;
  std::printf("%-20s %-12s %-24s %9s  %s\n", "variant", "state", "step", "seconds", "run file / message");
  for (const auto& s : jobs::variantStates(config)) {
    ++counts[s.state];
    std::string step;
    if (s.step >= 0 && s.state != "completed")
      step =
          std::to_string(s.step) + (s.totalSteps > 0 ? " / " + std::to_string(s.totalSteps) : "") + " (" + s.kind + ")";
    char seconds[32] = "";
    if (s.seconds > 0) std::snprintf(seconds, sizeof seconds, "%.1f", s.seconds);
    const std::string where = s.message.empty() ? (s.state == "completed" ? "" : s.runFile) : s.message;
    std::printf("%-20s %-12s %-24s %9s  %s\n", s.name.c_str(), s.state.c_str(), step.c_str(), seconds, where.c_str());
  }
  std::string line;
  for (const char* state : {"completed", "running", "paused", "interrupted", "cancelled", "failed", "not started"})
    if (counts[state] > 0) line += (line.empty() ? "" : ", ") + std::to_string(counts[state]) + " " + state;
  std::printf("%s of %zu variants: %s\n", config.name.c_str(), config.variants.size(), line.c_str());
}

void runExperimentCommand(const ExperimentFlags& f) {
  const auto config = jobs::parseConfigFile(f.configFile, "", jobs::experimentConfigFromJson);
  if (f.status) return printStatus(config);
  if (f.list) {
    for (const auto& v : config.variants)
      std::printf("%s\n%s\n", v.name.c_str(), jobs::variantConfig(config, v.name).dump(2).c_str());
    return;
  }
  CliObserver observer;
  jobs::ExperimentOptions options;
  options.force = f.force;
  options.only = f.only;
  options.resume = f.resume;
  const ChildOutcome children = runPendingInChildren(f, config, options);
  const auto r = jobs::runExperiment(config, observer, options);
  reportExperimentEnd(config, r, f.metrics);
  if (children.interrupted)
    throw JobFailed(jobs::JobStatus::Cancelled,
                    "interrupted: the variants that ran were cancelled; --resume continues them");
  if (!children.error.empty()) throw std::runtime_error(children.error);
  if (r.status != jobs::JobStatus::Completed) throw JobFailed(r.status, r.message);
}

}  // namespace

void addExperimentCommand(CLI::App& app) {
  auto f = std::make_shared<ExperimentFlags>();
  auto* cmd = app.add_subcommand("experiment", "Run an experiment project: one job over named variants, then a summary");
  cmd->add_option("--config", f->configFile, "Experiment project (projects/experiments/*.json)")
      ->required()
      ->check(CLI::ExistingFile);
  cmd->add_option("--only", f->only, "Run only these variants (the others are reused when done)")->delimiter(',');
  cmd->add_flag("--force", f->force, "Run the chosen variants again even if done with the same config");
  cmd->add_flag(
      "--resume", f->resume,
      "Continue a variant left unfinished (killed, cancelled) from its checkpoint instead of starting it again");
  cmd->add_option("--jobs", f->jobs, "Run this many variants at once, each in its own process (cores shared out)")
      ->check(CLI::Range(1, 64));
  cmd->add_flag("--list", f->list, "Print the variants and their merged configs, run nothing");
  cmd->add_flag("--status", f->status,
                "Print where each variant stands (completed, running with its step, interrupted, not started...), "
                "run nothing; works while the experiment runs");
  cmd->add_option("--metrics", f->metrics,
                  "The tables' columns, in this order (default: every metric; summary.json and .csv keep all)")
      ->delimiter(',');
  cmd->callback([f] { runExperimentCommand(*f); });
}

}  // namespace hh::cli
