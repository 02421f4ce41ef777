// DistillConfig <-> JSON (project files, the run file's config attribute). Every default is
// written out by toJson so a project file documents itself.
#include "engine/config/distill_config.h"
#include "engine/config/json_reader.h"
#include "engine/config/compute_dtype.h"
#include "engine/config/attention_plan.h"

namespace hh::jobs {

nlohmann::json toJson(const DataConfig& d) {
  return {{"corpus", d.corpus}, {"sequence_length", d.sequenceLength}, {"validation_fraction", d.validationFraction},
          {"max_train_sequences", d.maxTrainSequences}, {"max_validation_sequences", d.maxValidationSequences},
          {"seed", d.seed}};
}

DataConfig dataConfigFromJson(const nlohmann::json& j, const std::string& where) {
  DataConfig d;
  if (!j.is_object()) throw std::invalid_argument(where + ": must be a JSON object");
  JsonReader r{j, where, {}};
  r.read("corpus", d.corpus);
  r.read("sequence_length", d.sequenceLength);
  r.read("validation_fraction", d.validationFraction);
  r.read("max_train_sequences", d.maxTrainSequences);
  r.read("max_validation_sequences", d.maxValidationSequences);
  r.read("seed", d.seed);
  r.checkUnknownKeys();
  if (d.sequenceLength < 2) throw std::invalid_argument(where + ": sequence_length must be at least 2");
  if (d.maxTrainSequences < 0 || d.maxValidationSequences < 0)
    throw std::invalid_argument(where + ": max_train_sequences and max_validation_sequences must be >= 0 (0 = all)");
  if (!(d.validationFraction >= 0 && d.validationFraction <= 1))
    throw std::invalid_argument(where + ": validation_fraction must lie in [0, 1]");
  return d;
}

namespace {

constexpr auto kDistillKeys = [](auto& c, auto&& key) {
  key("model", c.modelDir);
  key("run_dir", c.runDir);
  key("feature_map", c.featureMap);
  key("rule", c.rule);
  key("layers", c.layers);
  key("window", c.window);
  key("plan", c.plan);
  key("loss", c.loss);
  key("output_mse", c.outputMse);
  key("lr", c.lr);
  key("weight_decay", c.weightDecay);
  key("steps", c.steps);
  key("batch_size", c.batchSize);
  key("eval_every", c.evalEvery);
  key("eval_batches", c.evalBatches);
  key("patience", c.patience);
  key("snapshot_every", c.snapshotEvery);
  key("snapshot_pairs", c.snapshotPairs);
  key("snapshot_size", c.snapshotSize);
  key("curve_bins", c.curveBins);
  key("probe_rows", c.probeRows);
  key("probe_text", c.probeText);
  key("seed", c.seed);
  key("resume", c.resume);
  key("device", c.device);
  key("dtype", c.dtype);
};

}  // namespace

nlohmann::json toJson(const DistillConfig& c) {
  nlohmann::json j{{"data", toJson(c.data)}};
  writeKeys(j, c, kDistillKeys);
  return j;
}

DistillConfig distillConfigFromJson(const nlohmann::json& j) {
  DistillConfig c;
  JsonReader r{j, "distill config", {}};
  readKeys(r, c, kDistillKeys);
  checkComputeDtype(c.dtype, r.where);
  r.read("debug_nan_at_step", c.debugNanAtStep);
  r.seen.insert("data");
  if (j.contains("data")) c.data = dataConfigFromJson(j.at("data"), "distill config \"data\"");
  r.checkUnknownKeys();
  if (c.loss != "soft_ce" && c.loss != "kl") throw std::invalid_argument("distill config: loss must be \"soft_ce\" or \"kl\"");
  if (c.steps < 0 || c.batchSize <= 0 || c.evalEvery <= 0 || c.evalBatches <= 0)
    throw std::invalid_argument("distill config: steps >= 0, batch_size, eval_every and eval_batches > 0");
  if (!(c.lr > 0)) throw std::invalid_argument("distill config: lr must be positive");
  if (c.curveBins < 0 || c.curveBins > 1024) throw std::invalid_argument("distill config: curve_bins must be in [0, 1024]");
  if (c.probeRows < 0) throw std::invalid_argument("distill config: probe_rows must be >= 0 (0 = batch_size)");
  models::checkPlanKeys({c.featureMap, c.rule, c.window, c.layers, c.plan, c.seed}, r.where);
  return c;
}

}  // namespace hh::jobs
