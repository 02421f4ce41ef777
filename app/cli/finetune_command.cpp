// `hedgehog finetune MODEL_DIR [--config FILE] [options]`: stage 2 of the conversion (full or
// LoRA finetuning on an LM or classification task); the finetuned model is saved into --output,
// the run file into --run-dir. `--print-config` writes the full config (every default) as JSON.
#include "app/cli/ranked_job.h"
#include "engine/jobs/finetune_job.h"

namespace hh::cli {

namespace {

struct FinetuneFlags {
  std::string model, adapters, configFile, runDir, outputDir, mode, task, loss, classData, device, dtype;
  TrainingFlags training;
  std::optional<int64_t> rank;
  std::optional<double> alpha;
  bool printConfig = false;
  int processes = 1;
};

// The config file (if any) with the flags over it.
jobs::FinetuneConfig finetuneConfigFromFlags(const FinetuneFlags& a) {
  jobs::FinetuneConfig c;
  if (!a.configFile.empty()) c = jobs::parseConfigFile(a.configFile, "finetune", jobs::finetuneConfigFromJson);
  if (!a.model.empty()) c.modelDir = a.model;
  if (!a.device.empty()) c.device = a.device;
  if (!a.dtype.empty()) c.dtype = a.dtype;
  if (!a.adapters.empty()) c.adapters = a.adapters;
  if (!a.runDir.empty()) c.runDir = a.runDir;
  if (!a.outputDir.empty()) c.outputDir = a.outputDir;
  if (!a.mode.empty()) c.mode = a.mode;
  if (a.rank) c.loraRank = *a.rank;
  if (a.alpha) c.loraAlpha = *a.alpha;
  if (!a.task.empty()) c.task = a.task;
  if (!a.loss.empty()) c.loss = a.loss;
  if (!a.classData.empty()) c.classification.path = a.classData;
  a.training.applyTo(c);
  if (a.training.seqLen) c.classification.sequenceLength = *a.training.seqLen;  // both tasks
  if (c.runDir.empty()) c.runDir = "runs/finetune";
  return c;
}

void runFinetuneCommand(const FinetuneFlags& a) {
  auto c = finetuneConfigFromFlags(a);
  if (recheckConfig(c, jobs::finetuneConfigFromJson, a.printConfig)) return;
  if (c.modelDir.empty())
    throw std::runtime_error("finetune: no model folder (give MODEL_DIR or \"model\" in --config)");
  runRankedJob(
      a.processes, c.runDir,
      [&](CliObserver& observer, dist::Communicator* world) { return jobs::runFinetune(c, observer, world); },
      [](const jobs::FinetuneResult& r) {
        return JobEnd::Outputs{{"model", r.modelDir}};
      });
}

}  // namespace

void addFinetuneCommand(CLI::App& app) {
  auto a = std::make_shared<FinetuneFlags>();
  auto* cmd = app.add_subcommand("finetune", "Stage 2: finetune a converted model (full or LoRA; LM or classification)");
  cmd->add_option("model", a->model, "Converted model folder (or the teacher, with --adapters)");
  cmd->add_option("--adapters", a->adapters, "adapters.safetensors from `hedgehog distill`");
  cmd->add_option("--config", a->configFile, "JSON config (see --print-config); flags override it")->check(CLI::ExistingFile);
  cmd->add_option("--run-dir", a->runDir, "Folder for run.h5");
  cmd->add_option("--output", a->outputDir, "Folder for the finetuned model (default: <run-dir>/model)");
  cmd->add_option("--mode", a->mode, "full | lora (default full)");
  cmd->add_option("--lora-rank", a->rank, "LoRA rank r");
  cmd->add_option("--lora-alpha", a->alpha, "LoRA alpha (scale alpha / r)")->check(finiteNumber());
  cmd->add_option("--task", a->task, "lm | classification (default lm)");
  cmd->add_option("--loss", a->loss,
                  "lm: next_token | teacher_kl (KL to the original model's next-token distribution)");
  cmd->add_option("--classification-data", a->classData, "Classification data: a .tsv/.jsonl file or spam_assassin");
  a->training.addTo(cmd);
  cmd->add_flag("--print-config", a->printConfig, "Print the full config as JSON and exit");
  addProcessCountOption(cmd, a->processes);
  addDeviceOption(cmd, a->device);
  addDtypeOption(cmd, a->dtype);
  cmd->callback([a] { runFinetuneCommand(*a); });
}

}  // namespace hh::cli
