// The config parsers' field reader: reads the keys a parser knows, rejects wrong types (and, for
// integer keys, numbers out of the member's range or floats that are not whole) with the key's
// name, and, at the end, every key it was not asked for.
#pragma once
#include <nlohmann/json.hpp>

#include <set>
#include <stdexcept>
#include <string>

namespace hh::jobs {

// JSON readers: `seen` collects the keys read so that checkUnknownKeys can name the others.
struct JsonReader {
  const nlohmann::json& json;
  std::string where;
  std::set<std::string> seen;
  template <typename T>
  void read(const char* key, T& out);
  void checkUnknownKeys() const;
};

// A config's plain keys, listed once: `keys(config, visit)` calls visit("key", config.member) for
// each, with config const (writeKeys: into a JSON object) or not (readKeys: through a JsonReader).
template <class Config, class Keys>
void writeKeys(nlohmann::json& json, const Config& config, const Keys& keys) {
  keys(config, [&](const char* key, const auto& value) { json[key] = value; });
}
template <class Config, class Keys>
void readKeys(JsonReader& reader, Config& config, const Keys& keys) {
  keys(config, [&](const char* key, auto& value) { reader.read(key, value); });
}

// The keys of an optimisation run that train and finetune share (members of the same names).
inline constexpr auto kOptimizationKeys = [](auto& c, auto&& key) {
  key("lr", c.lr);
  key("min_lr_ratio", c.minLrRatio);
  key("warmup_steps", c.warmupSteps);
  key("weight_decay", c.weightDecay);
  key("grad_clip", c.gradClip);
  key("steps", c.steps);
  key("batch_size", c.batchSize);
  key("eval_every", c.evalEvery);
  key("eval_batches", c.evalBatches);
  key("patience", c.patience);
  key("seed", c.seed);
  key("resume", c.resume);
  key("device", c.device);
  key("dtype", c.dtype);
};

// The ranges of kOptimizationKeys' values; throws std::invalid_argument starting with `where`.
template <class Config>
void checkOptimizationKeys(const Config& c, const std::string& where) {
  if (c.steps < 0 || c.batchSize <= 0 || c.evalEvery <= 0 || c.evalBatches < 0 || c.warmupSteps < 0 || c.patience < 0)
    throw std::invalid_argument(where +
                                ": steps, warmup_steps, eval_batches, patience >= 0; batch_size, eval_every > 0");
  if (!(c.lr > 0)) throw std::invalid_argument(where + ": lr must be positive");
  if (c.minLrRatio < 0 || c.minLrRatio > 1) throw std::invalid_argument(where + ": min_lr_ratio must be in [0, 1]");
}

}  // namespace hh::jobs
