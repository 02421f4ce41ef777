// The distill job's configuration (engine/jobs/distill_job.h) and the LM data every job shares,
// as read from and written to project files; no Torch.
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace hh::jobs {

struct DataConfig {
  std::string corpus = "brown";       // "brown" or a path (.txt, .jsonl, folder of .txt)
  int64_t sequenceLength = 128;
  double validationFraction = 0.1;
  int64_t maxTrainSequences = 0;      // 0 = all
  int64_t maxValidationSequences = 64;
  uint64_t seed = 0;
};

nlohmann::json toJson(const DataConfig& config);
DataConfig dataConfigFromJson(const nlohmann::json& json, const std::string& where);

struct DistillConfig {
  std::string modelDir;               // teacher folder (config.json + safetensors + tokenizer)
  std::string runDir;                 // where run.h5, adapters.safetensors, checkpoint go
  std::string featureMap = "hedgehog";
  std::string rule = "additive";
  std::vector<int64_t> layers;        // converted layers; empty = all
  int64_t window = 0;                 // > 0: hedgehog_window (softmax over the last `window` keys)
  // One attention per layer ("softmax", "hedgehog", "hedgehog_window(16)", "t2r/gated", ...;
  // attn::parseLayerAttention); when given it replaces feature_map, rule, window and layers.
  std::vector<std::string> plan;
  std::string loss = "soft_ce";       // soft_ce | kl
  double outputMse = 0.0;             // weight of the optional output MSE term
  double lr = 1e-2;
  double weightDecay = 0.0;
  int64_t steps = 300;                // maximum optimizer steps
  int64_t batchSize = 8;
  int64_t evalEvery = 25;
  int64_t evalBatches = 4;
  int64_t patience = 4;               // evaluations without improvement before stopping (0 = never)
  int64_t snapshotEvery = 25;
  std::vector<std::pair<int, int>> snapshotPairs;  // empty = head 0 of up to 4 converted layers
  int snapshotSize = 64;
  int curveBins = 32;                 // monotonicity curves of the snapshot pairs (0 = none)
  int64_t probeRows = 0;              // held-out rows of the per-head tables (0 = batch_size); rank 0's
                                      // probe holds probeRows x H x T x T floats per layer at a time
  std::string probeText = "The quick brown fox jumps over the lazy dog because it is tired of running around the field all day.";
  uint64_t seed = 0;
  bool resume = false;
  std::string device = "auto";         // auto | cpu | cuda | cuda:N (engine/core/device.h)
  std::string dtype = "float32";       // float32 | bfloat16 | float64: the compute dtype (engine/config/compute_dtype.h)
  int64_t debugNanAtStep = -1;        // testing aid: poison the loss at this step
  DataConfig data;
};

nlohmann::json toJson(const DistillConfig& config);
// Every key optional (defaults above); unknown keys and wrong types throw std::invalid_argument.
DistillConfig distillConfigFromJson(const nlohmann::json& json);

}  // namespace hh::jobs
