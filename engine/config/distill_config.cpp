// DistillConfig <-> JSON (project files, the run file's config attribute). Every default is
// written out by toJson so a project file documents itself.
#include "engine/config/distill_config.h"
#include "engine/config/json_reader.h"
#include "engine/config/compute_dtype.h"

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
  return d;
}

nlohmann::json toJson(const DistillConfig& c) {
  return {{"model", c.modelDir}, {"run_dir", c.runDir}, {"feature_map", c.featureMap}, {"rule", c.rule},
          {"layers", c.layers}, {"window", c.window}, {"plan", c.plan}, {"loss", c.loss}, {"output_mse", c.outputMse}, {"lr", c.lr},
          {"weight_decay", c.weightDecay}, {"steps", c.steps}, {"batch_size", c.batchSize},
          {"eval_every", c.evalEvery}, {"eval_batches", c.evalBatches}, {"patience", c.patience},
          {"snapshot_every", c.snapshotEvery}, {"snapshot_pairs", c.snapshotPairs}, {"snapshot_size", c.snapshotSize},
          {"curve_bins", c.curveBins}, {"probe_rows", c.probeRows},
          {"probe_text", c.probeText}, {"seed", c.seed}, {"resume", c.resume}, {"device", c.device}, {"dtype", c.dtype}, {"data", toJson(c.data)}};
}

DistillConfig distillConfigFromJson(const nlohmann::json& j) {
  DistillConfig c;
  JsonReader r{j, "distill config", {}};
  r.read("model", c.modelDir);
  r.read("run_dir", c.runDir);
  r.read("feature_map", c.featureMap);
  r.read("rule", c.rule);
  r.read("layers", c.layers);
  r.read("window", c.window);
  r.read("plan", c.plan);
  r.read("loss", c.loss);
  r.read("output_mse", c.outputMse);
  r.read("lr", c.lr);
  r.read("weight_decay", c.weightDecay);
  r.read("steps", c.steps);
  r.read("batch_size", c.batchSize);
  r.read("eval_every", c.evalEvery);
  r.read("eval_batches", c.evalBatches);
  r.read("patience", c.patience);
  r.read("snapshot_every", c.snapshotEvery);
  r.read("snapshot_pairs", c.snapshotPairs);
  r.read("snapshot_size", c.snapshotSize);
  r.read("curve_bins", c.curveBins);
  r.read("probe_rows", c.probeRows);
  r.read("probe_text", c.probeText);
  r.read("seed", c.seed);
  r.read("resume", c.resume);
  r.read("device", c.device);
  r.read("dtype", c.dtype);
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
  return c;
}

}  // namespace hh::jobs
