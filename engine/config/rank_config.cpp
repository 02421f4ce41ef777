// RankConfig <-> JSON.
#include "engine/config/rank_config.h"

#include "engine/config/attention_types.h"
#include "engine/config/json_reader.h"

namespace hh::jobs {

nlohmann::json toJson(const RankConfig& c) {
  return {{"model", c.modelDir}, {"run_dir", c.runDir},       {"attention", c.attention}, {"steps", c.steps},
          {"batch_size", c.batchSize}, {"lr", c.lr},          {"probe_rows", c.probeRows}, {"keep", c.keep},
          {"keep_as", c.keepAs},       {"seed", c.seed},      {"device", c.device}, {"data", toJson(c.data)}};
}

RankConfig rankConfigFromJson(const nlohmann::json& j) {
  RankConfig c;
  if (!j.is_object()) throw std::invalid_argument("rank config: must be a JSON object");
  JsonReader r{j, "rank config", {}};
  r.read("model", c.modelDir);
  r.read("run_dir", c.runDir);
  r.read("attention", c.attention);
  r.read("steps", c.steps);
  r.read("batch_size", c.batchSize);
  r.read("lr", c.lr);
  r.read("probe_rows", c.probeRows);
  r.read("keep", c.keep);
  r.read("keep_as", c.keepAs);
  r.read("seed", c.seed);
  r.read("device", c.device);
  r.seen.insert("data");
  if (j.contains("data")) c.data = dataConfigFromJson(j.at("data"), "rank config \"data\"");
  r.checkUnknownKeys();
  if (c.steps < 1 || c.batchSize < 1 || c.probeRows < 1)
    throw std::invalid_argument("rank config: steps, batch_size and probe_rows must be at least 1");
  if (!(c.lr > 0)) throw std::invalid_argument("rank config: lr must be positive");
  if (c.keep < 0) throw std::invalid_argument("rank config: keep must be >= 0");
  if (!attn::parseLayerAttention(c.attention))
    throw std::invalid_argument("rank config: attention \"softmax\" converts nothing; name a linear attention");
  attn::parseLayerAttention(c.keepAs);  // throws naming the problem
  return c;
}

}  // namespace hh::jobs
