// The convert job's project file (engine/jobs/convert_job.h): the keys every stage shares, each
// stage's own section, and the stage configs as the job runs them; no Torch.
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/config/distill_config.h"
#include "engine/config/evaluate_config.h"
#include "engine/config/finetune_config.h"

namespace hh::jobs {

struct ExportConfig {
  std::string dtype = "float32";  // float32 | float16 | bfloat16 (model weights; adapters stay float32)
  bool adaptersOnly = false;      // write <output>/adapters.safetensors instead of a full folder
};

struct ConvertConfig {
  std::string modelDir;   // the teacher
  std::string runDir;     // everything goes under here
  std::string outputDir;  // the exported model; empty = <run_dir>/model
  std::string featureMap = "hedgehog";
  std::string rule = "additive";
  std::vector<int64_t> layers;    // converted layers; empty = all
  int64_t window = 0;             // > 0: hedgehog_window layers (DistillConfig::window)
  std::vector<std::string> plan;  // one attention per layer; replaces the four keys above (DistillConfig::plan)
  uint64_t seed = 0;
  std::string device = "auto";    // every stage's (engine/core/device.h)
  std::string dtype = "float32";  // every stage's compute dtype (engine/config/compute_dtype.h)
  DataConfig data;                // shared by every stage
  // The evaluate stage's data when it should differ (e.g. distil and finetune on text the teacher
  // generated, evaluate on real text); unset = `data`, or for evaluate.task classification the
  // finetune stage's classification data, its held-out rows (evaluateStage). "eval_data" in the
  // file, null when unset.
  std::optional<DataConfig> evalData;
  DistillConfig distill;  // stage settings; the shared keys above override theirs
  FinetuneConfig finetune;
  EvaluateConfig evaluate;
  ExportConfig exportOptions;
};

nlohmann::json toJson(const ConvertConfig& config);
// Every key optional; a stage section that repeats a shared key, unknown keys and wrong types
// throw std::invalid_argument naming the key.
ConvertConfig convertConfigFromJson(const nlohmann::json& json);
// Throws std::invalid_argument naming finetune.task and evaluate.task when finetuning runs
// (finetune.steps > 0) for another task than the evaluation's: the finetuned model's head cannot
// be evaluated on that task; and naming evaluate.task when it is classification with no labelled
// data (no eval_data, finetune.task not classification). convertConfigFromJson and runConvert
// call it, before any stage runs.
void checkConvertTasks(const ConvertConfig& config);
// The stage configs as the job runs them (shared keys and stage folders filled in).
DistillConfig distillStage(const ConvertConfig& config);
FinetuneConfig finetuneStage(const ConvertConfig& config);
EvaluateConfig evaluateStage(const ConvertConfig& config);

}  // namespace hh::jobs
