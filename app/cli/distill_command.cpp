// `hedgehog distill MODEL_DIR [--config FILE] [options]`: stage 1 of the conversion (train the
// feature maps to match softmax attention), with a run file and adapters in --run-dir.
// `--print-config` writes the full config (every default) as JSON, to start a project file.
#include "app/cli/ranked_job.h"
#include "engine/jobs/distill_job.h"

namespace hh::cli {

namespace {

struct DistillFlags {
  std::string model, configFile, runDir, loss, device, dtype;
  PlanFlags planFlags;
  TrainingFlags training;
  bool printConfig = false;
  int processes = 1;
};

// The config file (if any) with the flags over it.
jobs::DistillConfig distillConfigFromFlags(const DistillFlags& a) {
  jobs::DistillConfig c;
  if (!a.configFile.empty()) c = jobs::parseConfigFile(a.configFile, "distill", jobs::distillConfigFromJson);
  if (!a.model.empty()) c.modelDir = a.model;
  if (!a.device.empty()) c.device = a.device;
  if (!a.dtype.empty()) c.dtype = a.dtype;
  if (!a.runDir.empty()) c.runDir = a.runDir;
  a.planFlags.applyTo(c);
  if (!a.loss.empty()) c.loss = a.loss;
  a.training.applyTo(c);
  if (c.runDir.empty()) c.runDir = "runs/distill";
  return c;
}

void runDistillCommand(const DistillFlags& a) {
  auto c = distillConfigFromFlags(a);
  if (recheckConfig(c, jobs::distillConfigFromJson, a.printConfig)) return;
  if (c.modelDir.empty())
    throw std::runtime_error("distill: no model folder (give MODEL_DIR or \"model\" in --config)");
  runRankedJob(
      a.processes, c.runDir,
      [&](CliObserver& observer, dist::Communicator* world) { return jobs::runDistill(c, observer, world); },
      [](const jobs::DistillResult& r) {
        return JobEnd::Outputs{{"adapters", r.adaptersFile}};
      });
}

}  // namespace

void addDistillCommand(CLI::App& app) {
  auto a = std::make_shared<DistillFlags>();
  auto* cmd = app.add_subcommand("distill", "Stage 1: train feature maps so linear attention matches softmax (Hedgehog)");
  cmd->add_option("model", a->model, "Teacher model folder");
  cmd->add_option("--config", a->configFile, "JSON config (see --print-config); flags override it")->check(CLI::ExistingFile);
  cmd->add_option("--run-dir", a->runDir, "Folder for run.h5, adapters.safetensors and the checkpoint");
  a->planFlags.addTo(cmd);
  cmd->add_option("--loss", a->loss, "soft_ce | kl (default soft_ce)");
  a->training.addTo(cmd, "Maximum optimizer steps");
  cmd->add_flag("--print-config", a->printConfig, "Print the full config as JSON and exit");
  addProcessCountOption(cmd, a->processes);
  addDeviceOption(cmd, a->device);
  addDtypeOption(cmd, a->dtype);
  cmd->callback([a] { runDistillCommand(*a); });
}

}  // namespace hh::cli
