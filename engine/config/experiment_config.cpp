// ExperimentConfig <-> JSON and the merged config of each variant (experiment_job.h), apart from
// the runner so that the parser links with the job config parsers only (see fuzz/).
#include <cctype>
#include <filesystem>
#include <set>
#include <stdexcept>

#include "engine/config/convert_config.h"
#include "engine/config/distill_config.h"
#include "engine/config/evaluate_config.h"
#include "engine/config/experiment_config.h"
#include "engine/config/finetune_config.h"
#include "engine/config/json_reader.h"
#include "engine/config/train_config.h"

namespace hh::jobs {
namespace fs = std::filesystem;

namespace {

const std::set<std::string> kJobs{"train", "convert", "distill", "finetune", "evaluate"};

bool safeFolderName(const std::string& name) {
  if (name.empty() || name == "." || name == ".." || name.size() > 100) return false;
  for (char c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') return false;
  return true;
}

// Parses `config` as job `job` (throws std::invalid_argument naming the key).
void checkJobConfig(const std::string& job, const nlohmann::json& config) {
  if (job == "train") trainConfigFromJson(config);
  else if (job == "convert") convertConfigFromJson(config);
  else if (job == "distill") distillConfigFromJson(config);
  else if (job == "finetune") finetuneConfigFromJson(config);
  else evaluateConfigFromJson(config);
}

}  // namespace

ExperimentConfig experimentConfigFromJson(const nlohmann::json& j) {
  ExperimentConfig c;
  JsonReader r{j, "experiment", {}};
  r.read("name", c.name);
  r.read("description", c.description);
  r.read("job", c.job);
  r.read("run_dir", c.runDir);
  r.seen.insert("base");
  r.seen.insert("variants");
  r.checkUnknownKeys();
  if (!kJobs.count(c.job))
    throw std::invalid_argument("experiment: \"job\" must be train, convert, distill, finetune or evaluate, not \"" + c.job + "\"");
  if (c.runDir.empty()) throw std::invalid_argument("experiment: \"run_dir\" is missing");
  if (j.contains("base")) {
    if (!j.at("base").is_object()) throw std::invalid_argument("experiment: \"base\" must be an object");
    c.base = j.at("base");
  }
  if (c.base.contains("run_dir")) throw std::invalid_argument("experiment: \"base\" must not set run_dir (each variant gets <run_dir>/<name>)");
  if (!j.contains("variants") || !j.at("variants").is_array() || j.at("variants").empty())
    throw std::invalid_argument("experiment: \"variants\" must be a non-empty array");
  std::set<std::string> names;
  for (const auto& v : j.at("variants")) {
    ExperimentVariant variant;
    JsonReader vr{v, "experiment variant", {}};
    vr.read("name", variant.name);
    vr.seen.insert("set");
    vr.checkUnknownKeys();
    if (!safeFolderName(variant.name))
      throw std::invalid_argument("experiment: variant name \"" + variant.name + "\" must be a folder name (letters, digits, - _ .)");
    if (!names.insert(variant.name).second) throw std::invalid_argument("experiment: two variants are named \"" + variant.name + "\"");
    variant.set = v.contains("set") ? v.at("set") : nlohmann::json::object();
    if (!variant.set.is_object()) throw std::invalid_argument("experiment: variant \"" + variant.name + "\": \"set\" must be an object");
    if (variant.set.contains("run_dir")) throw std::invalid_argument("experiment: variant \"" + variant.name + "\" must not set run_dir");
    c.variants.push_back(std::move(variant));
  }
  for (const auto& v : c.variants) {
    try {
      checkJobConfig(c.job, variantConfig(c, v.name));
    } catch (const std::exception& e) {
      throw std::invalid_argument("experiment: variant \"" + v.name + "\": " + e.what());
    }
  }
  return c;
}

nlohmann::json toJson(const ExperimentConfig& c) {
  nlohmann::json variants = nlohmann::json::array();
  for (const auto& v : c.variants) variants.push_back({{"name", v.name}, {"set", v.set}});
  return {{"name", c.name}, {"description", c.description}, {"job", c.job}, {"run_dir", c.runDir},
          {"base", c.base}, {"variants", variants}};
}

nlohmann::json variantConfig(const ExperimentConfig& c, const std::string& name) {
  for (const auto& v : c.variants) {
    if (v.name != name) continue;
    nlohmann::json merged = c.base;
    merged.merge_patch(v.set);
    merged["run_dir"] = (fs::path(c.runDir) / v.name).string();
    return merged;
  }
  throw std::invalid_argument("experiment: no variant named \"" + name + "\"");
}

}  // namespace hh::jobs
