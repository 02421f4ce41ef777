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

// A list of {"name", "set"} entries ("variants" or "repeats"); `what` names one in errors.
std::vector<ExperimentVariant> namedPatches(const nlohmann::json& list, const std::string& what) {
  std::vector<ExperimentVariant> out;
  std::set<std::string> names;
  for (const auto& v : list) {
    ExperimentVariant variant;
    JsonReader vr{v, "experiment " + what, {}};
    vr.read("name", variant.name);
    vr.seen.insert("set");
    vr.checkUnknownKeys();
    if (!safeFolderName(variant.name))
      throw std::invalid_argument("experiment: " + what + " name \"" + variant.name +
                                  "\" must be a folder name (letters, digits, - _ .)");
    if (!names.insert(variant.name).second)
      throw std::invalid_argument("experiment: two " + what + "s are named \"" + variant.name + "\"");
    variant.set = v.contains("set") ? v.at("set") : nlohmann::json::object();
    if (!variant.set.is_object())
      throw std::invalid_argument("experiment: " + what + " \"" + variant.name + "\": \"set\" must be an object");
    if (variant.set.contains("run_dir"))
      throw std::invalid_argument("experiment: " + what + " \"" + variant.name + "\" must not set run_dir");
    out.push_back(std::move(variant));
  }
  return out;
}

// The variants that run: each declared one once, or once per repeat as "<variant>.<repeat>".
std::vector<ExperimentVariant> expandedVariants(const ExperimentConfig& c) {
  if (c.repeats.empty()) return c.declared;
  std::vector<ExperimentVariant> out;
  std::set<std::string> names;
  for (const auto& v : c.declared)
    for (const auto& r : c.repeats) {
      ExperimentVariant run{v.name + "." + r.name, v.set, v.name, r.name, r.set};
      if (run.name.size() > 100 || !names.insert(run.name).second)
        throw std::invalid_argument("experiment: variant \"" + v.name + "\" repeated as \"" + r.name +
                                    "\" gives the name \"" + run.name + "\", " +
                                    (run.name.size() > 100 ? "too long for a folder" : "which another pair gives too"));
      out.push_back(std::move(run));
    }
  return out;
}

// "baseline" names a declared variant, and there are repeats to pair it with.
void checkBaseline(const ExperimentConfig& c) {
  if (c.baseline.empty()) return;
  if (c.repeats.empty())
    throw std::invalid_argument("experiment: \"baseline\" compares variants repeat by repeat, so it needs \"repeats\"");
  for (const auto& v : c.declared)
    if (v.name == c.baseline) return;
  std::string names;
  for (const auto& v : c.declared) names += (names.empty() ? "" : ", ") + v.name;
  throw std::invalid_argument("experiment: \"baseline\" is \"" + c.baseline + "\", which is not a variant (" + names +
                              ")");
}

}  // namespace

ExperimentConfig experimentConfigFromJson(const nlohmann::json& j) {
  ExperimentConfig c;
  JsonReader r{j, "experiment", {}};
  r.read("name", c.name);
  r.read("description", c.description);
  r.read("job", c.job);
  r.read("run_dir", c.runDir);
  r.read("baseline", c.baseline);
  r.seen.insert("base");
  r.seen.insert("variants");
  r.seen.insert("repeats");
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
  c.declared = namedPatches(j.at("variants"), "variant");
  if (j.contains("repeats")) {
    if (!j.at("repeats").is_array() || j.at("repeats").empty())
      throw std::invalid_argument("experiment: \"repeats\" must be a non-empty array when given");
    c.repeats = namedPatches(j.at("repeats"), "repeat");
  }
  checkBaseline(c);
  c.variants = expandedVariants(c);
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
  auto list = [](const std::vector<ExperimentVariant>& entries) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& v : entries) out.push_back({{"name", v.name}, {"set", v.set}});
    return out;
  };
  nlohmann::json j{{"name", c.name}, {"description", c.description},
                   {"job", c.job},   {"run_dir", c.runDir},
                   {"base", c.base}, {"variants", list(c.repeats.empty() ? c.variants : c.declared)}};
  if (!c.repeats.empty()) j["repeats"] = list(c.repeats);
  if (!c.baseline.empty()) j["baseline"] = c.baseline;
  return j;
}

nlohmann::json variantConfig(const ExperimentConfig& c, const std::string& name) {
  for (const auto& v : c.variants) {
    if (v.name != name) continue;
    nlohmann::json merged = c.base;
    merged.merge_patch(v.set);
    if (!v.repeatSet.is_null()) merged.merge_patch(v.repeatSet);
    merged["run_dir"] = (fs::path(c.runDir) / v.name).string();
    return merged;
  }
  throw std::invalid_argument("experiment: no variant named \"" + name + "\"");
}

}  // namespace hh::jobs
