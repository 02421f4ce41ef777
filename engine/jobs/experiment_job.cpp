#include "engine/jobs/experiment_job.h"
#include "engine/core/error_text.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <stdexcept>

#include "engine/core/process_memory.h"
#include "engine/io/durable_file.h"
#include "engine/jobs/convert_job.h"
#include "engine/jobs/experiment_groups.h"
#include "engine/jobs/run_support.h"
#include "engine/jobs/train_job.h"
#include "engine/runs/run_chain.h"
#include "engine/runs/run_reader.h"

namespace hh::jobs {
namespace fs = std::filesystem;

namespace {

struct Outcome {
  JobStatus status;
  std::string message;
};

Outcome runJob(const std::string& job, const nlohmann::json& config, JobObserver& observer) {
  auto outcome = [](const auto& r) { return Outcome{r.status, r.message}; };
  if (job == "train") return outcome(runTrain(trainConfigFromJson(config), observer));
  if (job == "convert") return outcome(runConvert(convertConfigFromJson(config), observer));
  if (job == "distill") return outcome(runDistill(distillConfigFromJson(config), observer));
  if (job == "finetune") return outcome(runFinetune(finetuneConfigFromJson(config), observer));
  return outcome(runEvaluate(evaluateConfigFromJson(config), observer));
}

// The config the job runs with: the variant's, plus "resume" when asked for and the job has it
// (train, distill, finetune; a convert or evaluate variant starts afresh, and so does one --force
// picked: it is run again). The record keeps the variant's own config, so a resumed variant is
// reused like any other.
nlohmann::json jobConfig(const std::string& job, nlohmann::json config, const ExperimentOptions& options) {
  if (options.resume && !options.force && job != "evaluate" && job != "convert") config["resume"] = true;
  return config;
}

// Passes everything through, naming the variant in progress phases and log lines.
class VariantObserver : public ForwardingObserver {
 public:
  VariantObserver(JobObserver& inner, std::string prefix) : ForwardingObserver(inner), prefix_(std::move(prefix)) {}
  void progress(int64_t step, int64_t totalSteps, const std::string& phase) override {
    inner_.progress(step, totalSteps, prefix_ + phase);
  }
  void log(const std::string& line) override { inner_.log(prefix_ + line); }

 private:
  std::string prefix_;
};

}  // namespace

std::map<std::string, double> finalMetrics(const std::string& dir) {
  std::map<std::string, double> out;
  std::vector<std::pair<std::string, fs::path>> folders{{"", fs::path(dir)}};  // (prefix, a job's run folder)
  std::error_code ec;
  if (fs::is_directory(dir, ec)) {
    std::vector<fs::path> subdirs;
    for (const auto& entry : fs::directory_iterator(dir, ec))
      if (entry.is_directory(ec) && fs::exists(entry.path() / "run.h5", ec)) subdirs.push_back(entry.path());
    std::sort(subdirs.begin(), subdirs.end());
    for (const auto& d : subdirs) folders.emplace_back(d.filename().string() + "/", d);
  }
  for (const auto& [prefix, folder] : folders) {
    // A resumed job's last values are in its last continuation (engine/runs/run_chain.h).
    const auto chain = runs::runChain(folder.string());
    if (chain.empty()) continue;
    // A file that cannot be read contributes nothing; the variant's status says why.
    for (const auto& [name, series] : runs::chainedAllScalars(chain))
      if (!series.values.empty()) out[prefix + name] = series.values.back();
  }
  return out;
}

nlohmann::json experimentSummary(const ExperimentConfig& c, const std::vector<VariantResult>& variants) {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& v : variants) {
    nlohmann::json metrics = nlohmann::json::object();
    for (const auto& [k, value] : v.metrics) metrics[k] = std::isfinite(value) ? nlohmann::json(value) : nlohmann::json(csvNumber(value));
    list.push_back({{"name", v.name}, {"run_dir", v.runDir}, {"status", toString(v.status)}, {"message", v.message},
                    {"seconds", v.seconds}, {"reused", v.reused}, {"metrics", metrics}});
  }
  nlohmann::json summary{
      {"name", c.name}, {"description", c.description}, {"job", c.job}, {"run_dir", c.runDir}, {"variants", list}};
  if (!c.repeats.empty()) summary["groups"] = groupsJson(variantGroups(c, variants));
  return summary;
}

namespace {

void writeSummary(const ExperimentConfig& c, const std::vector<VariantResult>& variants, ExperimentResult& result) {
  fs::create_directories(c.runDir);
  result.summaryJson = (fs::path(c.runDir) / "summary.json").string();
  result.summaryCsv = (fs::path(c.runDir) / "summary.csv").string();
  io::writeFileAtomically(result.summaryJson, experimentSummary(c, variants).dump(2) + "\n");
  std::set<std::string> keys;
  for (const auto& v : variants)
    for (const auto& [k, value] : v.metrics) keys.insert(k);
  std::ostringstream csv;
  csv << "variant,status,seconds,reused";
  for (const auto& k : keys) csv << "," << k;
  csv << "\n";
  for (const auto& v : variants) {
    csv << v.name << "," << toString(v.status) << "," << csvNumber(v.seconds) << "," << (v.reused ? "true" : "false");
    for (const auto& k : keys) {
      const auto it = v.metrics.find(k);
      csv << "," << (it == v.metrics.end() ? std::string() : csvNumber(it->second));
    }
    csv << "\n";
  }
  io::writeFileAtomically(result.summaryCsv, csv.str());
  if (!c.repeats.empty())
    io::writeFileAtomically((fs::path(c.runDir) / "summary_groups.csv").string(),
                            groupsCsv(variantGroups(c, variants)));
}

// The record of a variant run with `config` (any status): how it ended, its message and time.
bool recorded(const fs::path& record, const nlohmann::json& config, VariantResult& out) {
  std::ifstream in(record);
  if (!in) return false;
  try {
    const auto j = nlohmann::json::parse(in);
    if (j.at("config") != config) return false;
    const auto status = j.at("status").get<std::string>();
    out.status = status == "completed"   ? JobStatus::Completed
                 : status == "cancelled" ? JobStatus::Cancelled
                                         : JobStatus::Failed;
    out.message = j.value("message", std::string());
    out.seconds = j.value("seconds", 0.0);
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

// The record of a completed variant, when its config equals `config`.
bool reusable(const fs::path& record, const nlohmann::json& config, VariantResult& out) {
  VariantResult found;
  if (!recorded(record, config, found) || found.status != JobStatus::Completed) return false;
  out.status = found.status;
  out.message = found.message;
  out.seconds = found.seconds;
  return true;
}

}  // namespace

bool variantRecord(const ExperimentConfig& c, const std::string& name, VariantResult& out) {
  const auto config = variantConfig(c, name);
  return recorded(fs::path(config.at("run_dir").get<std::string>()) / "variant.json", config, out);
}

namespace {

// Throws on an --only name that is no variant of `c`.
void checkOnlyNames(const ExperimentConfig& c, const ExperimentOptions& options) {
  for (const auto& name : options.only) variantConfig(c, name);
}

// Runs one variant's job into its run folder and records how it ended in `record` (written whole
// or not at all, so a killed experiment never leaves a half record).
void runVariant(const ExperimentConfig& c, const nlohmann::json& config, const fs::path& record,
                const ExperimentOptions& options, VariantObserver& observer, VariantResult& vr) {
  fs::create_directories(record.parent_path());
  fs::remove(record);
  releaseFreeMemory();  // what the variant before freed, back to the system before this one allocates
  const auto t0 = std::chrono::steady_clock::now();
  Outcome outcome{JobStatus::Failed, ""};
  try {
    outcome = runJob(c.job, jobConfig(c.job, config, options), observer);
  } catch (const std::exception& e) {
    outcome = {JobStatus::Failed, errorText(e)};
  }
  vr.status = outcome.status;
  vr.message = outcome.message;
  vr.seconds = secondsSince(t0);
  const nlohmann::json entry{
      {"config", config}, {"status", toString(vr.status)}, {"message", vr.message}, {"seconds", vr.seconds}};
  io::writeFileAtomically(record.string(), entry.dump(2) + "\n");
}

// The overall status and message once the variants are in the summary.
void finishResult(ExperimentResult& result, size_t variants) {
  int failed = 0;
  for (const auto& v : result.variants) failed += v.status == JobStatus::Failed;
  if (result.status != JobStatus::Cancelled && failed > 0) result.status = JobStatus::Failed;
  result.message = std::to_string(result.variants.size()) + " of " + std::to_string(variants) +
                   " variants in the summary" + (failed ? ", " + std::to_string(failed) + " failed" : "") + " (" +
                   result.summaryCsv + ")";
}

}  // namespace

std::vector<std::string> pendingVariants(const ExperimentConfig& c, const ExperimentOptions& options) {
  checkOnlyNames(c, options);
  const std::set<std::string> only(options.only.begin(), options.only.end());
  std::vector<std::string> pending;
  for (const auto& v : c.variants) {
    if (!only.empty() && !only.count(v.name)) continue;
    const auto config = variantConfig(c, v.name);
    VariantResult ignored;
    if (options.force || !reusable(fs::path(config.at("run_dir").get<std::string>()) / "variant.json", config, ignored))
      pending.push_back(v.name);
  }
  return pending;
}

ExperimentResult runExperiment(const ExperimentConfig& c, JobObserver& observer, const ExperimentOptions& options) {
  const auto started = std::chrono::steady_clock::now();
  ExperimentResult result;
  checkOnlyNames(c, options);
  const std::set<std::string> only(options.only.begin(), options.only.end());
  const std::set<std::string> ranInChildren(options.ranInChildren.begin(), options.ranInChildren.end());
  const size_t n = c.variants.size();
  bool cancelled = false;  // once cancelled, no variant starts; those done earlier stay listed
  for (size_t i = 0; i < n; ++i) {
    const auto& v = c.variants[i];
    const auto config = variantConfig(c, v.name);
    const fs::path dir = config.at("run_dir").get<std::string>();
    const fs::path record = dir / "variant.json";
    VariantResult vr;
    vr.name = v.name;
    vr.runDir = dir.string();
    bool ran = false;
    const bool selected = !options.summaryOnly && (only.empty() || only.count(v.name));
    const std::string prefix = "[" + std::to_string(i + 1) + "/" + std::to_string(n) + " " + v.name + "] ";
    const bool ranInChild = options.summaryOnly && ranInChildren.count(v.name);
    const auto childFailure = options.childFailures.find(v.name);
    if (ranInChild && recorded(record, config, vr)) {
      // Run by a child process just now (experiment --jobs): listed with how it ended, failed included.
    } else if (ranInChild && childFailure != options.childFailures.end()) {
      vr.status = JobStatus::Failed;  // its child died without a record (kill -9, the OOM killer)
      vr.message = childFailure->second;
    } else if ((!options.force || !selected) && reusable(record, config, vr)) {
      vr.reused = true;
      observer.log(prefix + "done earlier with this config (" + csvNumber(vr.seconds) + " s): reused");
    } else if (options.summaryOnly && (only.empty() || only.count(v.name)) && recorded(record, config, vr)) {
      // Failed or cancelled in an earlier run: listed with how it ended.
    } else if (!selected || cancelled) {
      continue;  // not asked for (or cancelled before it started), not done: absent from the summary
    } else if (observer.cancelled()) {
      cancelled = true;
      continue;
    } else {
      observer.log(prefix + "running " + c.job + " into " + dir.string());
      VariantObserver inner(observer, prefix);
      runVariant(c, config, record, options, inner, vr);
      observer.log(prefix + toString(vr.status) + " in " + csvNumber(vr.seconds) + " s: " + vr.message);
      ran = true;
    }
    vr.metrics = finalMetrics(vr.runDir);
    result.variants.push_back(vr);
    // The summary as it stands after each variant that ran: a reader (the workbench) sees the
    // results as they come.
    if (ran) writeSummary(c, result.variants, result);
    cancelled = cancelled || vr.status == JobStatus::Cancelled;
  }
  if (cancelled) result.status = JobStatus::Cancelled;
  writeSummary(c, result.variants, result);
  finishResult(result, n);
  result.seconds = secondsSince(started);
  return result;
}

}  // namespace hh::jobs
