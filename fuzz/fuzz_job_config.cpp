// Fuzz target: a project file as the CLI and the workbench read it (readConfigFile with each job's
// section, or the whole file for an experiment), parsed by every job's config parser; a config
// that parses is written back with toJson and parsed again.
#include <exception>
#include <optional>

#include "engine/config/config_file.h"
#include "engine/config/convert_config.h"
#include "engine/config/distill_config.h"
#include "engine/config/evaluate_config.h"
#include "engine/config/experiment_config.h"
#include "engine/config/finetune_config.h"
#include "engine/config/train_config.h"
#include "fuzz/fuzz_support.h"

namespace {

// As the CLI's --config reads it (parseConfigFile: a rejection names the file), then the parsed
// config through toJson and back.
template <typename Parse>
void parseSection(const std::string& path, const char* section, Parse parse) {
  std::optional<decltype(parse(nlohmann::json()))> config;
  try {
    config = hh::jobs::parseConfigFile(path, section, parse);
  } catch (const std::exception& e) {
    hh::fuzz::requireNamesFile(e, path, {"project.json"});
    return;
  }
  try {
    (void)parse(hh::jobs::toJson(*config));
  } catch (const std::exception&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace hh::jobs;
  static const std::string path = hh::fuzz::scratchDir("job_config") + "/project.json";
  hh::fuzz::writeFile(path, hh::fuzz::asText(data, size));
  parseSection(path, "convert", [](const nlohmann::json& j) { return convertConfigFromJson(j); });
  parseSection(path, "distill", [](const nlohmann::json& j) { return distillConfigFromJson(j); });
  parseSection(path, "finetune", [](const nlohmann::json& j) { return finetuneConfigFromJson(j); });
  parseSection(path, "evaluate", [](const nlohmann::json& j) { return evaluateConfigFromJson(j); });
  parseSection(path, "train", [](const nlohmann::json& j) { return trainConfigFromJson(j); });
  parseSection(path, "", [](const nlohmann::json& j) { return experimentConfigFromJson(j); });
  return 0;
}
