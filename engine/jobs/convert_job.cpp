// runConvert: distill -> finetune -> evaluate -> export, with a "convert" run file that ties the
// stages' run files together and records the headline numbers.
#include "engine/jobs/convert_job.h"
#include "engine/core/error_text.h"

#include <torch/types.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "engine/config/model_config.h"
#include "engine/core/device.h"
#include "engine/core/process_memory.h"
#include "engine/core/runtime.h"
#include "engine/distributed/communicator.h"
#include "engine/jobs/data_parallel.h"
#include "engine/jobs/job_support.h"
#include "engine/models/model_io.h"
#include "engine/runs/run_writer.h"

namespace hh::jobs {
namespace fs = std::filesystem;

namespace {

// Passes every call through, with the stage's name in front of the phase ("2/4 finetune: training").
class StageObserver : public ForwardingObserver {
 public:
  StageObserver(JobObserver& inner, std::string stage) : ForwardingObserver(inner), stage_(std::move(stage)) {}
  void progress(int64_t step, int64_t totalSteps, const std::string& phase) override {
    inner_.progress(step, totalSteps, stage_ + ": " + phase);
  }

 private:
  std::string stage_;
};

// "STAGE: MESSAGE" for a stage's failure; a message that already names the stage (the stages'
// own errors start "evaluate: ...") keeps its one prefix ("evaluate: evaluate: ..." before).
std::string stageMessage(const std::string& stage, const std::string& message) {
  const std::string prefix = stage + ": ";
  return message.rfind(prefix, 0) == 0 ? message : prefix + message;
}

// The evaluate stage compares the teacher with the converted model on evaluate.task, which needs
// the teacher to have that task's head; without it the conversion failed after both training
// stages. A folder whose config cannot be read is left to the distill stage, which names it.
void checkTeacherHead(const ConvertConfig& config) {
  models::ModelConfig teacher;
  try {
    teacher = models::loadModelConfig(config.modelDir);
  } catch (const std::exception&) {
    return;
  }
  const bool lm = config.evaluate.task == "lm";
  const auto needed = lm ? models::HeadKind::CausalLM : models::HeadKind::SequenceClassification;
  if (teacher.head == needed) return;
  throw std::invalid_argument("convert: evaluate.task \"" + config.evaluate.task + "\" needs a teacher with " +
                              (lm ? "a causal LM head" : "a sequence-classification head (num_labels)") + "; " +
                              config.modelDir + "'s head is " + models::toString(teacher.head) +
                              " (the evaluate stage compares the teacher and the converted model on that task)");
}

torch::ScalarType exportDtype(const std::string& name) {
  if (name == "float32") return torch::kFloat;
  if (name == "float16") return torch::kHalf;
  if (name == "bfloat16") return torch::kBFloat16;
  throw std::invalid_argument("export dtype must be float32, float16 or bfloat16 (got \"" + name + "\")");
}

}  // namespace

void refuseExportIntoModelFolder(const std::string& outputFolder, const std::string& modelDir) {
  std::error_code ec;
  if (fs::exists(outputFolder, ec) && fs::equivalent(outputFolder, modelDir, ec))
    throw std::invalid_argument(outputFolder + ": is the model folder being exported; choose another output path");
}

// A conversion's output folder is replaced at its end: it must not be the teacher's folder, lie
// inside it, or hold it.
void refuseOutputOverTeacher(const std::string& output, const std::string& modelDir) {
  std::error_code ec;
  const fs::path out = fs::weakly_canonical(output, ec), teacher = fs::weakly_canonical(modelDir, ec);
  const auto within = [](const fs::path& inner, const fs::path& outer) {
    return std::mismatch(outer.begin(), outer.end(), inner.begin(), inner.end()).first == outer.end();
  };
  if (within(out, teacher) || within(teacher, out))
    throw std::invalid_argument(output + ": the conversion's output folder " +
                                (out == teacher         ? "is"
                                 : within(out, teacher) ? "lies inside"
                                                        : "holds") +
                                " the teacher's folder " + modelDir +
                                ", which the export would overwrite; "
                                "choose another output path");
}

std::string exportConverted(const std::string& modelDir, const std::string& adapters, const std::string& output,
                            const ExportConfig& options) {
  // The export replaces a model folder at `output`; a file there is the user's, not an old export.
  std::error_code ec;
  if (output.empty()) throw std::invalid_argument("export: no output folder given");
  if (fs::exists(output, ec) && !fs::is_directory(output, ec))
    throw std::invalid_argument(output + ": exists and is not a folder (an export writes a model folder there; "
                                "choose another output path)");
  refuseExportIntoModelFolder(output, modelDir);
  const auto dtype = exportDtype(options.dtype);  // refused before anything is written, in both modes
  models::ModelPtr model = models::loadModel(modelDir);
  if (!adapters.empty()) models::loadAdaptersFile(*model, adapters);
  if (options.adaptersOnly) {
    if (model->adapterTensors().empty())
      throw std::invalid_argument(modelDir + ": the model has no linear-attention layers: no adapters to save");
    fs::create_directories(output);
    const auto path = (fs::path(output) / "adapters.safetensors").string();
    models::saveAdapters(*model, path);
    return path;
  }
  models::SaveOptions save;
  save.dtype = dtype;
  save.tokenizerFrom = modelDir;
  models::saveModel(*model, output, save);
  return output;
}

namespace {

// Ranks other than 0: the two training stages, data-parallel with rank 0, and nothing else.
ConvertResult followConvert(const ConvertConfig& config, JobObserver& observer, dist::Communicator& world) {
  const auto start = std::chrono::steady_clock::now();
  ConvertResult result;
  result.distill = runDistill(distillStage(config), observer, &world);
  world.barrier();  // rank 0 has saved the adapters the finetune stage starts from
  if (result.distill.status != JobStatus::Completed) {
    result.status = result.distill.status, result.failedStage = "distill";
    result.message = stageMessage("distill", result.distill.message);
  } else if (config.finetune.steps > 0) {
    result.finetune = runFinetune(finetuneStage(config), observer, &world);
    if (result.finetune.status != JobStatus::Completed) {
      result.status = result.finetune.status, result.failedStage = "finetune";
      result.message = stageMessage("finetune", result.finetune.message);
    }
  }
  if (result.message.empty()) result.message = "trained on rank " + std::to_string(world.rank()) + "; rank 0 evaluates and exports";
  result.seconds = secondsSince(start);
  return result;
}

// The convert run file's header: the headline numbers of every stage as scalars.
runs::RunHeader convertHeader(const ConvertConfig& config, const std::string& device, dist::Communicator& ranks) {
  runs::RunHeader header;
  header.runId = makeRunId("convert");
  header.kind = "convert";
  header.configJson = toJson(config).dump();
  header.engineVersion = engineVersion();
  header.device = deviceName(device, ranks);
  header.layout.scalars = {{"distill_seconds", "s"},   {"finetune_seconds", "s"}, {"evaluate_seconds", "s"},
                           {"export_seconds", "s"},    {"kl_untrained"},         {"kl_distilled"},
                           {"perplexity_original"},    {"perplexity_converted"}, {"perplexity_ratio"},
                           {"accuracy_original"},      {"accuracy_converted"},   {"finetune_val_loss"}};
  return header;
}

// What the layers become: "hedgehog_window(64) (additive)", or "the plan [softmax, hedgehog, ...]".
std::string conversionTarget(const ConvertConfig& config) {
  if (config.plan.empty())
    return config.featureMap + (config.window > 0 ? "_window(" + std::to_string(config.window) + ")" : "") + " (" +
           config.rule + ")";
  std::string joined;
  for (const auto& spec : config.plan) joined += (joined.empty() ? "" : ", ") + spec;
  return "the plan [" + joined + "]";
}

// The completed conversion's line: the KL before and after distillation and the task quality of
// the original and the converted model.
std::string conversionSummary(const ConvertResult& result) {
  char summary[512];
  const auto& d = result.distill;
  const auto& e = result.evaluate;
  if (e.task == "lm") {
    std::snprintf(summary, sizeof summary,
                  "KL to softmax %.4g -> %.4g (%.1fx lower); perplexity original %.2f, converted %.2f (%+.1f%%)", d.initialKl,
                  d.finalKl, d.initialKl / d.finalKl, e.perplexityOriginal, e.perplexityConverted,
                  100.0 * (e.perplexityConverted / e.perplexityOriginal - 1));
  } else {
    std::snprintf(summary, sizeof summary, "KL to softmax %.4g -> %.4g; accuracy original %.4f, converted %.4f", d.initialKl,
                  d.finalKl, e.accuracyOriginal, e.accuracyConverted);
  }
  return summary;
}

// Rank 0's conversion: the stages in order, each with its run file, its headline numbers in the
// convert run file and its name in front of the progress phase. A stage returns false when it did
// not complete; the result and the run file then say where and why (stop).
class Conversion {
 public:
  Conversion(const ConvertConfig& config, JobObserver& observer, dist::Communicator* world, runs::RunWriter& writer,
             ConvertResult& result)
      : config_(config), observer_(observer), world_(world), ranks_(dist::Communicator::orAlone(world)), writer_(writer),
        result_(result) {}

  const std::string& stage() const { return stage_; }

  bool distill() {
    stage_ = "distill";
    releaseFreeMemory();  // what the stage before freed, back to the system before this one allocates
    const auto t = std::chrono::steady_clock::now();
    const auto distill = distillStage(config_);
    writer_.log("stage 1/4 distill: " + distill.runDir + "/run.h5");
    StageObserver stageObserver(observer_, "1/4 distill");
    result_.distill = runDistill(distill, stageObserver, world_);
    ranks_.barrier();  // the adapters are saved: the other ranks may finetune from them
    // What the stage measured: a cancelled or failed distillation has no final KL (no row, not 0).
    std::map<std::string, double> scalars{{"distill_seconds", secondsSince(t)}};
    if (std::isfinite(result_.distill.initialKl)) scalars["kl_untrained"] = result_.distill.initialKl;
    if (std::isfinite(result_.distill.finalKl)) scalars["kl_distilled"] = result_.distill.finalKl;
    writer_.appendScalars(0, scalars);
    return completed(result_.distill.status, result_.distill.message);
  }

  bool finetune() {
    stage_ = "finetune";
    releaseFreeMemory();  // what the stage before freed, back to the system before this one allocates
    if (config_.finetune.steps <= 0) {
      writer_.log("stage 2/4 finetune: skipped (finetune.steps is 0)");
      return true;
    }
    const auto t = std::chrono::steady_clock::now();
    const auto finetune = finetuneStage(config_);
    writer_.log("stage 2/4 finetune: " + finetune.runDir + "/run.h5");
    StageObserver stageObserver(observer_, "2/4 finetune");
    result_.finetune = runFinetune(finetune, stageObserver, world_);
    writer_.appendScalars(0, {{"finetune_seconds", secondsSince(t)}, {"finetune_val_loss", result_.finetune.bestValidationLoss}});
    return completed(result_.finetune.status, result_.finetune.message);
  }

  bool evaluate() {
    stage_ = "evaluate";
    releaseFreeMemory();  // what the stage before freed, back to the system before this one allocates
    const auto t = std::chrono::steady_clock::now();
    const auto evaluate = evaluateStage(config_);
    writer_.log("stage 3/4 evaluate: " + evaluate.runDir + "/run.h5");
    StageObserver stageObserver(observer_, "3/4 evaluate");
    result_.evaluate = runEvaluate(evaluate, stageObserver);
    const auto& e = result_.evaluate;
    std::map<std::string, double> metrics{{"evaluate_seconds", secondsSince(t)}};
    if (e.task == "lm") {
      metrics["perplexity_original"] = e.perplexityOriginal;
      metrics["perplexity_converted"] = e.perplexityConverted;
      metrics["perplexity_ratio"] = e.perplexityConverted / e.perplexityOriginal;
    } else {
      metrics["accuracy_original"] = e.accuracyOriginal;
      metrics["accuracy_converted"] = e.accuracyConverted;
    }
    writer_.appendScalars(0, metrics);
    return completed(e.status, e.message);
  }

  // The finetuned model, or the teacher with the adapters when nothing was finetuned, into `output`.
  bool exportModel(const std::string& output) {
    stage_ = "export";
    if (observer_.cancelled()) return completed(JobStatus::Cancelled, "cancelled before export");
    const auto t = std::chrono::steady_clock::now();
    observer_.progress(0, 1, "4/4 export");
    const bool finetuned = config_.finetune.steps > 0;
    const std::string source = finetuned ? result_.finetune.modelDir : config_.modelDir;
    const std::string adapters = finetuned ? std::string() : result_.distill.adaptersFile;
    result_.exportPath = exportConverted(source, adapters, output, config_.exportOptions);
    observer_.progress(1, 1, "4/4 export");
    writer_.appendScalar(0, "export_seconds", secondsSince(t));
    writer_.setFinal(fs::absolute(result_.exportPath).string());
    writer_.log("stage 4/4 export: " + result_.exportPath);
    return true;
  }

  // The conversion ends at the current stage with `status`: the result and the run file say so.
  void stop(JobStatus status, const std::string& message) {
    result_.status = status;
    result_.failedStage = stage_;
    result_.message = stageMessage(stage_, message);
    writer_.log(result_.message);
    writer_.setStatus(runStatusOf(status), result_.message);
  }

 private:
  bool completed(JobStatus status, const std::string& message) {
    if (status == JobStatus::Completed) return true;
    stop(status, message);
    return false;
  }

  const ConvertConfig& config_;
  JobObserver& observer_;
  dist::Communicator* world_;  // null: one process
  dist::Communicator& ranks_;
  runs::RunWriter& writer_;
  ConvertResult& result_;
  std::string stage_ = "distill";
};

}  // namespace

ConvertResult runConvert(const ConvertConfig& config, JobObserver& observer, dist::Communicator* world) {
  if (config.modelDir.empty()) throw std::invalid_argument("convert: no model folder");
  if (config.runDir.empty()) throw std::invalid_argument("convert: no run folder");
  exportDtype(config.exportOptions.dtype);
  checkConvertTasks(config);  // a project made in code has not been through convertConfigFromJson
  checkTeacherHead(config);
  dist::Communicator& ranks = dist::Communicator::orAlone(world);
  if (!ranks.isMain()) return followConvert(config, observer, ranks);
  const auto start = std::chrono::steady_clock::now();
  ConvertResult result;
  fs::create_directories(config.runDir);
  result.runFile = (fs::path(config.runDir) / "run.h5").string();
  const std::string output = config.outputDir.empty() ? config.runDir + "/model" : config.outputDir;
  refuseOutputOverTeacher(output, config.modelDir);
  models::checkModelFolderReplaceable(output);  // before the stages, not after them
  // Where the stages load their models, and in what (as the stages' own labels say it).
  result.device = deviceLabel(resolveDevice(config.device)) + (config.dtype == "bfloat16" ? ", bfloat16" : "");
  runs::RunWriterOptions writerOptions;
  writerOptions.overwrite = true;
  auto writer = runs::RunWriter::create(result.runFile, convertHeader(config, result.device, ranks), writerOptions);
  observer.log("conversion of " + config.modelDir + " to " + conversionTarget(config) + ": run file " + result.runFile);

  Conversion conversion(config, observer, world, writer, result);
  bool completed = false;
  try {
    completed = conversion.distill() && conversion.finetune() && conversion.evaluate() && conversion.exportModel(output);
  } catch (const JobCancelled&) {
    conversion.stop(JobStatus::Cancelled, "cancelled");
  } catch (const std::exception& ex) {
    conversion.stop(JobStatus::Failed, errorText(ex));
  }
  if (completed) {
    result.message = conversionSummary(result);
    writer.setStatus(runs::RunStatus::Completed, result.message);
    writer.close();
  }
  result.seconds = secondsSince(start);
  return result;
}

}  // namespace hh::jobs
