#include "engine/jobs/config_file.h"

#include <filesystem>
#include <fstream>
#include <stdexcept>

namespace hh::jobs {

namespace {

// Output folders named in a file ("run_dir", "output_dir", at any depth: a convert project's
// sections, an experiment's base) may not climb out of where they are resolved with ".." (the
// file may come from someone else). The same paths typed as flags (--run-dir, --output) are not
// checked: the user wrote them.
void checkOutputPaths(const nlohmann::json& j, const std::string& file) {
  if (j.is_array()) {
    for (const auto& item : j) checkOutputPaths(item, file);
    return;
  }
  if (!j.is_object()) return;
  for (const auto& [key, value] : j.items()) {
    if ((key == "run_dir" || key == "output_dir") && value.is_string()) {
      const std::string path = value.get<std::string>();
      for (const auto& part : std::filesystem::path(path))
        if (part == "..")
          throw std::runtime_error(file + ": \"" + key + "\" is \"" + path +
                                   "\": a folder in a config file may not go up with '..' "
                                   "(give it on the command line instead)");
    }
    checkOutputPaths(value, file);
  }
}

}  // namespace

nlohmann::json readConfigFile(const std::string& path, const std::string& section) {
  std::error_code ec;
  // An ifstream opens a folder without complaint and then reads nothing: say what it is.
  if (std::filesystem::is_directory(path, ec)) throw std::runtime_error(path + ": is a folder, not a JSON file");
  std::ifstream in(path);
  if (!in) throw std::runtime_error(path + ": cannot open");
  // Walking, copying or comparing a JSON value recurses once per level: 100000 nested arrays (a
  // broken or hostile file) would overflow the stack after the (iterative) parse succeeded.
  constexpr int kMaxDepth = 256;
  auto depthLimit = [&](int depth, nlohmann::json::parse_event_t, nlohmann::json&) {
    if (depth > kMaxDepth)
      throw std::runtime_error(path + ": JSON nested deeper than " + std::to_string(kMaxDepth) + " levels");
    return true;
  };
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in, depthLimit);
  } catch (const nlohmann::json::parse_error& e) {
    throw std::runtime_error(path + ": not JSON (" + e.what() + ")");
  }
  checkOutputPaths(j, path);
  if (j.is_object() && j.contains(section)) return j.at(section);
  return j;
}

}  // namespace hh::jobs
