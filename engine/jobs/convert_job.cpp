// runConvert: distill -> finetune -> evaluate -> export, with a "convert" run file that ties the
// stages' run files together and records the headline numbers.
#include "engine/jobs/convert_job.h"

#include <torch/types.h>

#include <chrono>
#include <cmath>
#include <filesystem>

#include "engine/core/device.h"
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
class StageObserver : public JobObserver {
 public:
  StageObserver(JobObserver& inner, std::string stage) : inner_(inner), stage_(std::move(stage)) {}
  void started(const std::string& runPath, int64_t totalSteps) override { inner_.started(runPath, totalSteps); }
  void progress(int64_t step, int64_t totalSteps, const std::string& phase) override {
    inner_.progress(step, totalSteps, stage_ + ": " + phase);
  }
  void scalars(int64_t step, const std::map<std::string, double>& values) override { inner_.scalars(step, values); }
  void log(const std::string& line) override { inner_.log(line); }
  bool cancelled() override { return inner_.cancelled(); }

 private:
  JobObserver& inner_;
  std::string stage_;
};

torch::ScalarType exportDtype(const std::string& name) {
  if (name == "float32") return torch::kFloat;
  if (name == "float16") return torch::kHalf;
  if (name == "bfloat16") return torch::kBFloat16;
  throw std::invalid_argument("export dtype must be float32, float16 or bfloat16 (got \"" + name + "\")");
}

}  // namespace

std::string exportConverted(const std::string& modelDir, const std::string& adapters, const std::string& output,
                            const ExportConfig& options) {
  // The export replaces a model folder at `output`; a file there is the user's, not an old export.
  std::error_code ec;
  if (fs::exists(output, ec) && !fs::is_directory(output, ec))
    throw std::invalid_argument(output + ": exists and is not a folder (an export writes a model folder there; "
                                "choose another output path)");
  models::ModelPtr model = models::loadModel(modelDir);
  if (!adapters.empty()) models::loadAdaptersFile(*model, adapters);
  if (options.adaptersOnly) {
    fs::create_directories(output);
    const auto path = (fs::path(output) / "adapters.safetensors").string();
    models::saveAdapters(*model, path);
    return path;
  }
  models::SaveOptions save;
  save.dtype = exportDtype(options.dtype);
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
    result.status = result.distill.status, result.failedStage = "distill", result.message = "distill: " + result.distill.message;
  } else if (config.finetune.steps > 0) {
    result.finetune = runFinetune(finetuneStage(config), observer, &world);
    if (result.finetune.status != JobStatus::Completed)
      result.status = result.finetune.status, result.failedStage = "finetune", result.message = "finetune: " + result.finetune.message;
  }
  if (result.message.empty()) result.message = "trained on rank " + std::to_string(world.rank()) + "; rank 0 evaluates and exports";
  result.seconds = secondsSince(start);
  return result;
}

}  // namespace

ConvertResult runConvert(const ConvertConfig& config, JobObserver& observer, dist::Communicator* world) {
  if (config.modelDir.empty()) throw std::invalid_argument("convert: no model folder");
  if (config.runDir.empty()) throw std::invalid_argument("convert: no run folder");
  exportDtype(config.exportOptions.dtype);
  dist::Communicator& ranks = dist::Communicator::orAlone(world);
  if (!ranks.isMain()) return followConvert(config, observer, ranks);
  const auto start = std::chrono::steady_clock::now();
  ConvertResult result;
  fs::create_directories(config.runDir);
  result.runFile = (fs::path(config.runDir) / "run.h5").string();
  const std::string output = config.outputDir.empty() ? config.runDir + "/model" : config.outputDir;

  runs::RunHeader header;
  header.runId = makeRunId("convert");
  header.kind = "convert";
  header.configJson = toJson(config).dump();
  header.engineVersion = engineVersion();
  // Where the stages load their models, and in what (as the stages' own labels say it).
  result.device = deviceLabel(resolveDevice(config.device)) + (config.dtype == "bfloat16" ? ", bfloat16" : "");
  header.device = deviceName(result.device, ranks);
  header.layout.scalars = {{"distill_seconds", "s"},   {"finetune_seconds", "s"}, {"evaluate_seconds", "s"},
                           {"export_seconds", "s"},    {"kl_untrained"},         {"kl_distilled"},
                           {"perplexity_original"},    {"perplexity_converted"}, {"perplexity_ratio"},
                           {"accuracy_original"},      {"accuracy_converted"},   {"finetune_val_loss"}};
  runs::RunWriterOptions writerOptions;
  writerOptions.overwrite = true;
  auto writer = runs::RunWriter::create(result.runFile, header, writerOptions);
  const std::string target = !config.plan.empty() ? "the plan [" + [&] {
    std::string joined;
    for (const auto& spec : config.plan) joined += (joined.empty() ? "" : ", ") + spec;
    return joined;
  }() + "]" : config.featureMap + (config.window > 0 ? "_window(" + std::to_string(config.window) + ")" : "") + " (" + config.rule + ")";
  observer.log("conversion of " + config.modelDir + " to " + target + ": run file " + result.runFile);

  auto stop = [&](const std::string& stage, JobStatus status, const std::string& message) {
    result.status = status;
    result.failedStage = stage;
    result.message = stage + ": " + message;
    writer.log(result.message);
    writer.setStatus(runStatusOf(status), result.message);
    result.seconds = secondsSince(start);
    return result;
  };

  std::string stage = "distill";
  try {
    // 1. distill
    auto t = std::chrono::steady_clock::now();
    const auto distill = distillStage(config);
    writer.log("stage 1/4 distill: " + distill.runDir + "/run.h5");
    StageObserver distillObserver(observer, "1/4 distill");
    result.distill = runDistill(distill, distillObserver, world);
    ranks.barrier();  // the adapters are saved: the other ranks may finetune from them
    // What the stage measured: a cancelled or failed distillation has no final KL (no row, not 0).
    std::map<std::string, double> distillScalars{{"distill_seconds", secondsSince(t)}};
    if (std::isfinite(result.distill.initialKl)) distillScalars["kl_untrained"] = result.distill.initialKl;
    if (std::isfinite(result.distill.finalKl)) distillScalars["kl_distilled"] = result.distill.finalKl;
    writer.appendScalars(0, distillScalars);
    if (result.distill.status != JobStatus::Completed) return stop("distill", result.distill.status, result.distill.message);

    // 2. finetune (optional)
    stage = "finetune";
    if (config.finetune.steps > 0) {
      t = std::chrono::steady_clock::now();
      const auto finetune = finetuneStage(config);
      writer.log("stage 2/4 finetune: " + finetune.runDir + "/run.h5");
      StageObserver finetuneObserver(observer, "2/4 finetune");
      result.finetune = runFinetune(finetune, finetuneObserver, world);
      writer.appendScalars(0, {{"finetune_seconds", secondsSince(t)},
                               {"finetune_val_loss", result.finetune.bestValidationLoss}});
      if (result.finetune.status != JobStatus::Completed)
        return stop("finetune", result.finetune.status, result.finetune.message);
    } else {
      writer.log("stage 2/4 finetune: skipped (finetune.steps is 0)");
    }

    // 3. evaluate
    stage = "evaluate";
    t = std::chrono::steady_clock::now();
    const auto evaluate = evaluateStage(config);
    writer.log("stage 3/4 evaluate: " + evaluate.runDir + "/run.h5");
    StageObserver evaluateObserver(observer, "3/4 evaluate");
    result.evaluate = runEvaluate(evaluate, evaluateObserver);
    std::map<std::string, double> metrics{{"evaluate_seconds", secondsSince(t)}};
    const auto& e = result.evaluate;
    if (e.task == "lm") {
      metrics["perplexity_original"] = e.perplexityOriginal;
      metrics["perplexity_converted"] = e.perplexityConverted;
      metrics["perplexity_ratio"] = e.perplexityConverted / e.perplexityOriginal;
    } else {
      metrics["accuracy_original"] = e.accuracyOriginal;
      metrics["accuracy_converted"] = e.accuracyConverted;
    }
    writer.appendScalars(0, metrics);
    if (e.status != JobStatus::Completed) return stop("evaluate", e.status, e.message);

    // 4. export
    stage = "export";
    if (observer.cancelled()) return stop("export", JobStatus::Cancelled, "cancelled before export");
    t = std::chrono::steady_clock::now();
    observer.progress(0, 1, "4/4 export");
    const bool finetuned = config.finetune.steps > 0;
    const std::string source = finetuned ? result.finetune.modelDir : config.modelDir;
    const std::string adapters = finetuned ? std::string() : result.distill.adaptersFile;
    result.exportPath = exportConverted(source, adapters, output, config.exportOptions);
    observer.progress(1, 1, "4/4 export");
    writer.appendScalar(0, "export_seconds", secondsSince(t));
    writer.setFinal(fs::absolute(result.exportPath).string());
    writer.log("stage 4/4 export: " + result.exportPath);
  } catch (const JobCancelled&) {
    return stop(stage, JobStatus::Cancelled, "cancelled");
  } catch (const std::exception& ex) {
    return stop(stage, JobStatus::Failed, ex.what());
  }

  char summary[512];
  const auto& e = result.evaluate;
  if (e.task == "lm") {
    std::snprintf(summary, sizeof summary,
                  "KL to softmax %.4g -> %.4g (%.1fx lower); perplexity original %.2f, converted %.2f (%+.1f%%)",
                  result.distill.initialKl, result.distill.finalKl, result.distill.initialKl / result.distill.finalKl,
                  e.perplexityOriginal, e.perplexityConverted, 100.0 * (e.perplexityConverted / e.perplexityOriginal - 1));
  } else {
    std::snprintf(summary, sizeof summary, "KL to softmax %.4g -> %.4g; accuracy original %.4f, converted %.4f",
                  result.distill.initialKl, result.distill.finalKl, e.accuracyOriginal, e.accuracyConverted);
  }
  result.message = summary;
  writer.setStatus(runs::RunStatus::Completed, result.message);
  writer.close();
  result.seconds = secondsSince(start);
  return result;
}

}  // namespace hh::jobs
