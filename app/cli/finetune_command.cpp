// `hedgehog finetune MODEL_DIR [--config FILE] [options]`: stage 2 of the conversion (full or
// LoRA finetuning on an LM or classification task); the finetuned model is saved into --output,
// the run file into --run-dir. `--print-config` writes the full config (every default) as JSON.
#include "app/cli/ranked_job.h"
#include "engine/jobs/finetune_job.h"

namespace hh::cli {

namespace {

struct FinetuneFlags {
  std::string model, adapters, configFile, runDir, outputDir, mode, task, loss, corpus, classData, device, dtype;
  std::optional<int64_t> steps, batch, seqLen, maxTrain, evalEvery, rank;
  std::optional<double> lr, alpha;
  bool resume = false, printConfig = false;
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
  if (!a.corpus.empty()) c.data.corpus = a.corpus;
  if (!a.classData.empty()) c.classification.path = a.classData;
  if (a.steps) c.steps = *a.steps;
  if (a.batch) c.batchSize = *a.batch;
  if (a.seqLen) c.data.sequenceLength = c.classification.sequenceLength = *a.seqLen;
  if (a.maxTrain) c.data.maxTrainSequences = *a.maxTrain;
  if (a.evalEvery) c.evalEvery = *a.evalEvery;
  if (a.lr) c.lr = *a.lr;
  c.resume = c.resume || a.resume;
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
  cmd->add_option("--loss", a->loss, "lm: next_token | teacher_kl (KL to the original model's next-token distribution)");
  cmd->add_option("--corpus", a->corpus, "LM data: brown, or a .txt/.jsonl file or folder of .txt");
  cmd->add_option("--classification-data", a->classData, "Classification data: a .tsv/.jsonl file or spam_assassin");
  cmd->add_option("--steps", a->steps, "Optimizer steps");
  cmd->add_option("--batch-size", a->batch, "Sequences per step");
  cmd->add_option("--seq-len", a->seqLen, "Tokens per sequence (both tasks)");
  cmd->add_option("--max-train", a->maxTrain, "LM: at most this many training sequences");
  cmd->add_option("--eval-every", a->evalEvery, "Steps between evaluations");
  cmd->add_option("--lr", a->lr, "AdamW peak learning rate")->check(finiteNumber());
  cmd->add_flag("--resume", a->resume, "Continue from the checkpoint in --run-dir");
  cmd->add_flag("--print-config", a->printConfig, "Print the full config as JSON and exit");
  addProcessCountOption(cmd, a->processes);
  addDeviceOption(cmd, a->device);
  addDtypeOption(cmd, a->dtype);
  cmd->callback([a] { runFinetuneCommand(*a); });
}

}  // namespace hh::cli
