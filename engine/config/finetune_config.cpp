// FinetuneConfig <-> JSON (project files, the run file's config attribute). Every default is
// written out by toJson so a project file documents itself.
#include "engine/config/finetune_config.h"
#include "engine/config/json_reader.h"
#include "engine/config/compute_dtype.h"

namespace hh::jobs {

nlohmann::json toJson(const ClassificationDataConfig& d) {
  return {{"path", d.path}, {"sequence_length", d.sequenceLength}, {"validation_fraction", d.validationFraction},
          {"max_examples", d.maxExamples}, {"seed", d.seed}};
}

ClassificationDataConfig classificationDataConfigFromJson(const nlohmann::json& j, const std::string& where) {
  ClassificationDataConfig d;
  if (!j.is_object()) throw std::invalid_argument(where + ": must be a JSON object");
  JsonReader r{j, where, {}};
  r.read("path", d.path);
  r.read("sequence_length", d.sequenceLength);
  r.read("validation_fraction", d.validationFraction);
  r.read("max_examples", d.maxExamples);
  r.read("seed", d.seed);
  r.checkUnknownKeys();
  if (d.sequenceLength < 2) throw std::invalid_argument(where + ": sequence_length must be at least 2");
  return d;
}

nlohmann::json toJson(const FinetuneConfig& c) {
  return {{"model", c.modelDir},
          {"adapters", c.adapters},
          {"output_dir", c.outputDir},
          {"run_dir", c.runDir},
          {"mode", c.mode},
          {"lora_rank", c.loraRank},
          {"lora_alpha", c.loraAlpha},
          {"task", c.task},
          {"loss", c.loss},
          {"lr", c.lr},
          {"min_lr_ratio", c.minLrRatio},
          {"warmup_steps", c.warmupSteps},
          {"weight_decay", c.weightDecay},
          {"grad_clip", c.gradClip},
          {"steps", c.steps},
          {"batch_size", c.batchSize},
          {"eval_every", c.evalEvery},
          {"eval_batches", c.evalBatches},
          {"patience", c.patience},
          {"seed", c.seed},
          {"resume", c.resume},
          {"device", c.device}, {"dtype", c.dtype},
          {"data", toJson(c.data)},
          {"classification", toJson(c.classification)}};
}

FinetuneConfig finetuneConfigFromJson(const nlohmann::json& j) {
  FinetuneConfig c;
  JsonReader r{j, "finetune config", {}};
  r.read("model", c.modelDir);
  r.read("adapters", c.adapters);
  r.read("output_dir", c.outputDir);
  r.read("run_dir", c.runDir);
  r.read("mode", c.mode);
  r.read("lora_rank", c.loraRank);
  r.read("lora_alpha", c.loraAlpha);
  r.read("task", c.task);
  r.read("loss", c.loss);
  r.read("lr", c.lr);
  r.read("min_lr_ratio", c.minLrRatio);
  r.read("warmup_steps", c.warmupSteps);
  r.read("weight_decay", c.weightDecay);
  r.read("grad_clip", c.gradClip);
  r.read("steps", c.steps);
  r.read("batch_size", c.batchSize);
  r.read("eval_every", c.evalEvery);
  r.read("eval_batches", c.evalBatches);
  r.read("patience", c.patience);
  r.read("seed", c.seed);
  r.read("resume", c.resume);
  r.read("device", c.device);
  r.read("dtype", c.dtype);
  checkComputeDtype(c.dtype, r.where);
  r.read("debug_nan_at_step", c.debugNanAtStep);
  r.seen.insert("data");
  r.seen.insert("classification");
  if (j.contains("data")) c.data = dataConfigFromJson(j.at("data"), "finetune config \"data\"");
  if (j.contains("classification"))
    c.classification = classificationDataConfigFromJson(j.at("classification"), "finetune config \"classification\"");
  r.checkUnknownKeys();
  if (c.mode != "full" && c.mode != "lora") throw std::invalid_argument("finetune config: mode must be \"full\" or \"lora\"");
  if (c.task != "lm" && c.task != "classification")
    throw std::invalid_argument("finetune config: task must be \"lm\" or \"classification\"");
  if (c.loss != "next_token" && c.loss != "teacher_kl")
    throw std::invalid_argument("finetune config: loss must be \"next_token\" or \"teacher_kl\"");
  if (c.loss == "teacher_kl" && c.task != "lm")
    throw std::invalid_argument("finetune config: loss \"teacher_kl\" is for task \"lm\"");
  if (c.loraRank < 1 || !(c.loraAlpha > 0)) throw std::invalid_argument("finetune config: lora_rank >= 1, lora_alpha > 0");
  if (c.steps < 0 || c.batchSize <= 0 || c.evalEvery <= 0 || c.evalBatches < 0 || c.warmupSteps < 0 || c.patience < 0)
    throw std::invalid_argument("finetune config: steps, warmup_steps, eval_batches, patience >= 0; batch_size, eval_every > 0");
  if (!(c.lr > 0)) throw std::invalid_argument("finetune config: lr must be positive");
  if (c.minLrRatio < 0 || c.minLrRatio > 1) throw std::invalid_argument("finetune config: min_lr_ratio must be in [0, 1]");
  return c;
}

}  // namespace hh::jobs
