// Sub-commands of the `hedgehog` CLI. Each registers itself on the CLI11 app and runs the
// engine; errors surface as exceptions that main() turns into one line on stderr,
// "hedgehog: error: <what, naming the file>", and exit status 1.
#pragma once
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <cstdio>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/config/config_file.h"
#include "engine/jobs/evaluate_job.h"

namespace hh::cli {

// The exit status of a cancelled job (as a shell reports Ctrl-C); main() words its line as a cancel.
inline constexpr int kExitCancelled = 130;

// A job that ended failed or cancelled (its summary is on stdout already): main() prints the
// job's message as the error line and exits with exitCode (1 failed, kExitCancelled cancelled).
struct JobFailed : std::runtime_error {
  int exitCode;
  JobFailed(jobs::JobStatus status, const std::string& message)
      : std::runtime_error(message.empty() ? std::string(jobs::toString(status)) : message),
        exitCode(status == jobs::JobStatus::Cancelled ? kExitCancelled : 1) {}
};

// The evaluation report (perplexity or accuracy, then the per-feature-map table) on stdout.
void printEvaluation(const jobs::EvaluateResult& result);

// --device on the verbs that run a model: auto | cpu | cuda | cuda:N (engine/core/device.h).
// Empty when not given (the config's "device" stands, "auto" by default).
void addDeviceOption(CLI::App* command, std::string& device);
// --dtype (or another `name`) on the same verbs: float32 | bfloat16 | float64, the compute dtype
// (engine/config/compute_dtype.h). Empty when not given (the config's "dtype", float32 by default).
void addDtypeOption(CLI::App* command, std::string& dtype, const std::string& name = "--dtype");

// A floating-point flag's check: a finite number. The configs' checks read JSON, which has no NaN
// or infinity (an infinite --lr became null there, and the default came back silently). With
// `positive`, also > 0 (for flags no config checks).
CLI::Validator finiteNumber(bool positive = false);

// Refuses an output path of `flag` that lies inside `folder` (a model folder the command reads):
// writing there replaced the model's own files (inspect --out model.safetensors, generate -o
// config.json). Nothing happens when either is empty.
void refuseOutputInside(const std::string& output, const char* flag, const std::string& folder);

// `text` to an output file the user named, whole or not at all (io::writeFileAtomically); an
// error names the file and `what` it holds ("samples", "ids").
void writeOutput(const std::string& path, const std::string& text, const char* what);

// The end of a job verb's config (distill, finetune, train): `config` goes through its JSON
// parser again, so that the values flags set get the checks a config file's keys get
// (debug_nan_at_step, which toJson leaves out, is kept). With `print` (--print-config) the checked
// config goes to stdout and the result is true: the command stops there.
template <class Config, class FromJson>
bool recheckConfig(Config& config, FromJson&& fromJson, bool print) {
  const auto nan = config.debugNanAtStep;
  config = fromJson(toJson(config));  // toJson found next to Config (argument-dependent lookup)
  config.debugNanAtStep = nan;
  if (print) std::printf("%s\n", toJson(config).dump(2).c_str());
  return print;
}

// A conversion's attention flags (distill, convert): --feature-map, --rule, --layers, --window,
// --plan; what was not given stays unset.
struct PlanFlags {
  std::string featureMap, rule;
  std::vector<int64_t> layers;
  std::optional<int64_t> window;
  std::vector<std::string> plan;
  void addTo(CLI::App* command);
  // The given flags onto a config with members featureMap, rule, layers, window and plan.
  template <class Config>
  void applyTo(Config& c) const {
    if (!featureMap.empty()) c.featureMap = featureMap;
    if (!rule.empty()) c.rule = rule;
    if (!layers.empty()) c.layers = layers;
    if (window) c.window = *window;
    if (!plan.empty()) c.plan = plan;
  }
};

// The flags every training job takes (distill, finetune, train): --steps, --batch-size,
// --seq-len, --max-train, --eval-every, --lr, --corpus, --resume; what was not given stays unset.
struct TrainingFlags {
  std::string corpus;
  std::optional<int64_t> steps, batch, seqLen, maxTrain, evalEvery;
  std::optional<double> lr;
  bool resume = false;
  void addTo(CLI::App* command, const char* stepsHelp = "Optimizer steps");
  // The given flags onto a config with members steps, batchSize, evalEvery, lr, resume and data.
  template <class Config>
  void applyTo(Config& c) const {
    if (!corpus.empty()) c.data.corpus = corpus;
    if (steps) c.steps = *steps;
    if (batch) c.batchSize = *batch;
    if (seqLen) c.data.sequenceLength = *seqLen;
    if (maxTrain) c.data.maxTrainSequences = *maxTrain;
    if (evalEvery) c.evalEvery = *evalEvery;
    if (lr) c.lr = *lr;
    c.resume = c.resume || resume;
  }
};

void addParityCommand(CLI::App& app);
void addCompareCommand(CLI::App& app);
void addTokenizeCommand(CLI::App& app);
void addForwardCommand(CLI::App& app);
void addPreflightCommand(CLI::App& app);
void addDistillCommand(CLI::App& app);
void addInspectCommand(CLI::App& app);
void addTrainCommand(CLI::App& app);
void addFinetuneCommand(CLI::App& app);
void addEvaluateCommand(CLI::App& app);
void addConvertCommand(CLI::App& app);
void addExportCommand(CLI::App& app);
void addBenchCommand(CLI::App& app);
void addExperimentCommand(CLI::App& app);
void addGenerateCommand(CLI::App& app);
void addRunInfoCommand(CLI::App& app);
void addRankCommand(CLI::App& app);
void addProbeCommand(CLI::App& app);

}  // namespace hh::cli
