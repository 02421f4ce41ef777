// FinetuneConfig <-> JSON (project files, the run file's config attribute). Every default is
// written out by toJson so a project file documents itself.
#include "engine/config/finetune_config.h"
#include "engine/config/compute_dtype.h"
#include "engine/config/json_reader.h"

namespace hh::jobs {

nlohmann::json toJson(const ClassificationDataConfig& d) {
  return {{"path", d.path},
          {"sequence_length", d.sequenceLength},
          {"validation_fraction", d.validationFraction},
          {"max_examples", d.maxExamples},
          {"seed", d.seed}};
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
  // The finetune job holds a share out and trains on the rest: both must be there. Checked here,
  // not when the data is built (in a convert project, after the distillation).
  if (!(d.validationFraction > 0 && d.validationFraction < 1))
    throw std::invalid_argument(where + ": validation_fraction must lie in (0, 1), got " +
                                nlohmann::json(d.validationFraction).dump());
  if (d.maxExamples < 0) throw std::invalid_argument(where + ": max_examples must be >= 0 (0 = all)");
  return d;
}

namespace {

// Finetune's own plain keys (kOptimizationKeys has the rest).
constexpr auto kFinetuneKeys = [](auto& c, auto&& key) {
  key("model", c.modelDir);
  key("adapters", c.adapters);
  key("output_dir", c.outputDir);
  key("run_dir", c.runDir);
  key("mode", c.mode);
  key("lora_rank", c.loraRank);
  key("lora_alpha", c.loraAlpha);
  key("task", c.task);
  key("loss", c.loss);
};

}  // namespace

nlohmann::json toJson(const FinetuneConfig& c) {
  nlohmann::json j{{"data", toJson(c.data)}, {"classification", toJson(c.classification)}};
  writeKeys(j, c, kFinetuneKeys);
  writeKeys(j, c, kOptimizationKeys);
  return j;
}

FinetuneConfig finetuneConfigFromJson(const nlohmann::json& j) {
  FinetuneConfig c;
  JsonReader r{j, "finetune config", {}};
  readKeys(r, c, kFinetuneKeys);
  readKeys(r, c, kOptimizationKeys);
  checkComputeDtype(c.dtype, r.where);
  r.read("debug_nan_at_step", c.debugNanAtStep);
  r.seen.insert("data");
  r.seen.insert("classification");
  if (j.contains("data")) c.data = dataConfigFromJson(j.at("data"), "finetune config \"data\"");
  if (j.contains("classification"))
    c.classification = classificationDataConfigFromJson(j.at("classification"), "finetune config \"classification\"");
  r.checkUnknownKeys();
  if (c.mode != "full" && c.mode != "lora")
    throw std::invalid_argument("finetune config: mode must be \"full\" or \"lora\"");
  if (c.task != "lm" && c.task != "classification")
    throw std::invalid_argument("finetune config: task must be \"lm\" or \"classification\"");
  if (c.loss != "next_token" && c.loss != "teacher_kl")
    throw std::invalid_argument("finetune config: loss must be \"next_token\" or \"teacher_kl\"");
  if (c.loss == "teacher_kl" && c.task != "lm")
    throw std::invalid_argument("finetune config: loss \"teacher_kl\" is for task \"lm\"");
  if (c.loraRank < 1 || !(c.loraAlpha > 0))
    throw std::invalid_argument("finetune config: lora_rank >= 1, lora_alpha > 0");
  checkOptimizationKeys(c, r.where);
  return c;
}

}  // namespace hh::jobs
