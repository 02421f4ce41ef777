// `hedgehog convert [MODEL_DIR] --config PROJECT.json [options]`: the whole conversion in one
// command (distill -> finetune -> evaluate -> export, engine/jobs/convert_job.h). The project file
// holds the shared keys at the top and one section per stage; `--print-config` writes it with
// every default. Ends by printing the run file and the exported model.
#include <cstdio>

#include <optional>
#include "app/cli/cli_observer.h"

#include "app/cli/commands.h"
#include "app/cli/job_end.h"
#include "app/cli/rank_processes.h"
#include "engine/jobs/convert_job.h"

namespace hh::cli {

namespace {

struct ConvertFlags {
  std::string model, configFile, runDir, outputDir, corpus, dtype, device, computeDtype;
  PlanFlags planFlags;
  std::optional<int64_t> distillSteps, finetuneSteps, seqLen, maxTrain;
  bool adaptersOnly = false, printConfig = false;
  int processes = 1;
};

// The project file (if any) with the flags over it, checked like a file's values.
jobs::ConvertConfig convertConfigFromFlags(const ConvertFlags& a) {
  jobs::ConvertConfig c;
  if (!a.configFile.empty()) c = jobs::parseConfigFile(a.configFile, "convert", jobs::convertConfigFromJson);
  if (!a.model.empty()) c.modelDir = a.model;
  if (!a.device.empty()) c.device = a.device;
  if (!a.computeDtype.empty()) c.dtype = a.computeDtype;
  if (!a.runDir.empty()) c.runDir = a.runDir;
  if (!a.outputDir.empty()) c.outputDir = a.outputDir;
  a.planFlags.applyTo(c);
  if (!a.corpus.empty()) c.data.corpus = a.corpus;
  if (a.seqLen) c.data.sequenceLength = *a.seqLen;
  if (a.maxTrain) c.data.maxTrainSequences = *a.maxTrain;
  if (a.distillSteps) c.distill.steps = *a.distillSteps;
  if (a.finetuneSteps) c.finetune.steps = *a.finetuneSteps;
  if (!a.dtype.empty()) c.exportOptions.dtype = a.dtype;
  if (a.adaptersOnly) c.exportOptions.adaptersOnly = true;
  if (c.runDir.empty()) c.runDir = "runs/convert";
  return jobs::convertConfigFromJson(jobs::toJson(c));
}

// The main rank's summary: the stages' steps and times, the evaluation, the run file, the export.
void reportConvertEnd(const jobs::ConvertResult& r) {
  JobEnd end{r.status, r.message, r.seconds, -1, r.runFile, {{"export", r.exportPath}}, &r.evaluate};
  end.extra["stages"] = {
      {"distill", {{"steps", r.distill.steps}, {"seconds", r.distill.seconds}, {"run_file", r.distill.runFile}}},
      {"finetune", {{"steps", r.finetune.steps}, {"seconds", r.finetune.seconds}, {"run_file", r.finetune.runFile}}},
      {"evaluate", {{"seconds", r.evaluate.seconds}, {"run_file", r.evaluate.runFile}}}};
  if (!r.failedStage.empty()) end.extra["failed_stage"] = r.failedStage;
  end.printHuman = [&r] {
    std::printf("%s after %.1f s: %s\n", jobs::toString(r.status), r.seconds, r.message.c_str());
    if (r.status == jobs::JobStatus::Completed) {
      std::printf("stages: distill %lld steps (%.1f s), finetune %lld steps (%.1f s), evaluate %.1f s\n",
                  (long long)r.distill.steps, r.distill.seconds, (long long)r.finetune.steps, r.finetune.seconds,
                  r.evaluate.seconds);
      printEvaluation(r.evaluate);
    }
    std::printf("run file: %s\n", r.runFile.c_str());
    if (!r.exportPath.empty()) std::printf("exported model: %s\n", r.exportPath.c_str());
  };
  end.device = r.device;
  reportJobEnd(end);
}

void runConvertCommand(const ConvertFlags& a) {
  const auto c = convertConfigFromFlags(a);
  if (a.printConfig) {
    std::printf("%s\n", jobs::toJson(c).dump(2).c_str());
    return;
  }
  if (c.modelDir.empty())
    throw std::runtime_error("convert: no model folder (give MODEL_DIR or \"model\" in --config)");
  const auto rank = launchOrJoin(a.processes, c.runDir);
  if (!rank) return;  // this process launched the ranks; they did the job
  CliObserver observer;
  const auto r = jobs::runConvert(c, observer, rank->communicator.get());
  if (rank->main()) reportConvertEnd(r);
  // Every rank's last line (or jsonl "memory" event) carries its peak memory, as distill's and
  // finetune's do; a rank > 0 trains in the distill and finetune stages only.
  printRankEnd(*rank, jobs::toString(r.status), r.distill.steps + r.finetune.steps, r.seconds);
  if (r.status != jobs::JobStatus::Completed) throw JobFailed(r.status, r.message);
}

}  // namespace

void addConvertCommand(CLI::App& app) {
  auto a = std::make_shared<ConvertFlags>();
  auto* cmd = app.add_subcommand("convert", "Distill, finetune, evaluate and export: a softmax model to linear attention in one go");
  cmd->add_option("model", a->model, "Teacher model folder (or \"model\" in --config)");
  cmd->add_option("--config", a->configFile, "Project file (see --print-config); flags override it")->check(CLI::ExistingFile);
  cmd->add_option("--run-dir", a->runDir, "Folder for the run files of every stage (default runs/convert)");
  cmd->add_option("--output", a->outputDir, "Folder for the exported model (default: <run-dir>/model)");
  a->planFlags.addTo(cmd);
  cmd->add_option("--distill-steps", a->distillSteps, "Stage 1 optimizer steps");
  cmd->add_option("--finetune-steps", a->finetuneSteps, "Stage 2 optimizer steps (0 skips finetuning)");
  cmd->add_option("--seq-len", a->seqLen, "Tokens per sequence");
  cmd->add_option("--max-train", a->maxTrain, "Use at most this many training sequences");
  cmd->add_option("--corpus", a->corpus, "brown, or a .txt/.jsonl file or folder of .txt");
  cmd->add_option("--dtype", a->dtype, "Exported weights: float32 | float16 | bfloat16 (default float32)");
  cmd->add_flag("--adapters-only", a->adaptersOnly, "Export only the trained feature maps (adapters.safetensors)");
  cmd->add_flag("--print-config", a->printConfig, "Print the full project file as JSON and exit");
  addProcessCountOption(cmd, a->processes);
  addDeviceOption(cmd, a->device);
  addDtypeOption(cmd, a->computeDtype, "--compute-dtype");
  cmd->callback([a] { runConvertCommand(*a); });
}

void addExportCommand(CLI::App& app) {
  struct Args {
    std::string model, adapters, output, dtype = "float32";
    bool adaptersOnly = false;
  };
  auto a = std::make_shared<Args>();
  auto* cmd = app.add_subcommand("export", "Write a converted model as a Hugging Face-style folder (or its adapters alone)");
  cmd->add_option("model", a->model, "Converted model folder, or the teacher with --adapters")->required();
  cmd->add_option("--adapters", a->adapters, "adapters.safetensors from `hedgehog distill`")->check(CLI::ExistingFile);
  cmd->add_option("--output,-o", a->output, "Output folder")->required();
  cmd->add_option("--dtype", a->dtype, "float32 | float16 | bfloat16 (default float32; adapters stay float32)");
  cmd->add_flag("--adapters-only", a->adaptersOnly, "Write only <output>/adapters.safetensors");
  cmd->callback([a] {
    jobs::ExportConfig options;
    options.dtype = a->dtype;
    options.adaptersOnly = a->adaptersOnly;
    const auto path = jobs::exportConverted(a->model, a->adapters, a->output, options);
    std::printf("exported: %s\n", path.c_str());
  });
}

}  // namespace hh::cli
