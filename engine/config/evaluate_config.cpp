// EvaluateConfig <-> JSON (project files, the run file's config attribute). Every default is
// written out by toJson so a project file documents itself.
#include <set>

#include "engine/config/attention_types.h"
#include "engine/config/evaluate_config.h"
#include "engine/config/json_reader.h"
#include "engine/config/compute_dtype.h"

namespace hh::jobs {

nlohmann::json toJson(const EvaluateConfig& c) {
  return {{"model", c.modelDir},         {"converted", c.converted},   {"feature_map", c.featureMap},
          {"run_dir", c.runDir},         {"task", c.task},             {"feature_maps", c.featureMaps},
          {"layers", c.layers},          {"max_sequences", c.maxSequences}, {"table_sequences", c.tableSequences},
          {"batch_size", c.batchSize},   {"seed", c.seed},             {"device", c.device}, {"dtype", c.dtype}, {"data", toJson(c.data)}};
}

EvaluateConfig evaluateConfigFromJson(const nlohmann::json& j) {
  EvaluateConfig c;
  JsonReader r{j, "evaluate config", {}};
  r.read("model", c.modelDir);
  r.read("converted", c.converted);
  r.read("feature_map", c.featureMap);
  r.read("run_dir", c.runDir);
  r.read("task", c.task);
  r.read("layers", c.layers);
  r.read("max_sequences", c.maxSequences);
  r.read("table_sequences", c.tableSequences);
  r.read("batch_size", c.batchSize);
  r.read("seed", c.seed);
  r.read("device", c.device);
  r.read("dtype", c.dtype);
  checkComputeDtype(c.dtype, r.where);
  r.seen.insert("feature_maps");
  if (j.is_object() && j.contains("feature_maps") && !j.at("feature_maps").is_null()) {
    const auto& list = j.at("feature_maps");
    if (!list.is_array()) throw std::invalid_argument("evaluate config: \"feature_maps\" must be a list of names");
    for (const auto& item : list) {
      if (!item.is_string()) throw std::invalid_argument("evaluate config: \"feature_maps\" has a non-string entry (" + item.dump() + ")");
      c.featureMaps.push_back(item.get<std::string>());
    }
  }
  r.seen.insert("data");
  if (j.is_object() && j.contains("data")) c.data = dataConfigFromJson(j.at("data"), "evaluate config \"data\"");
  r.checkUnknownKeys();
  if (c.task != "lm" && c.task != "classification")
    throw std::invalid_argument("evaluate config: task must be \"lm\" or \"classification\"");
  if (c.batchSize <= 0) throw std::invalid_argument("evaluate config: batch_size must be positive");
  if (c.maxSequences < 0 || c.tableSequences < 0)
    throw std::invalid_argument("evaluate config: max_sequences and table_sequences must be >= 0 (0 = all)");
  attn::parseFeatureMapKind(c.featureMap);  // throws naming the allowed values
  evaluateFeatureMapNames(c);               // validates the list
  return c;
}

std::vector<std::string> evaluateFeatureMapNames(const EvaluateConfig& c) {
  std::vector<std::string> names;
  if (c.featureMaps.empty()) {
    for (const auto kind : attn::untrainedComparisonKinds()) names.push_back(attn::toString(kind));
    if (!c.converted.empty()) names.push_back("trained");
    return names;
  }
  std::set<std::string> seen;
  for (const auto& name : c.featureMaps) {
    std::string canonical = name;
    if (name == "trained") {
      if (c.converted.empty())
        throw std::invalid_argument("evaluate config: feature map \"trained\" needs a converted model (\"converted\")");
    } else {
      try {
        canonical = attn::featureMapSpec(attn::parseFeatureMapSpec(name));
      } catch (const std::invalid_argument& e) {
        throw std::invalid_argument(std::string("evaluate config: \"feature_maps\": ") + e.what());
      }
    }
    if (!seen.insert(canonical).second)
      throw std::invalid_argument("evaluate config: feature map \"" + canonical + "\" is listed twice");
    names.push_back(canonical);
  }
  return names;
}

}  // namespace hh::jobs
