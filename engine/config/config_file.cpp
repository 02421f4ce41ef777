#include "engine/config/config_file.h"

#include <filesystem>
#include <fstream>
#include <stdexcept>

namespace hh::jobs {

namespace {

namespace fs = std::filesystem;

// Whether `path` is `folder` or inside it (both absolute and lexically normal).
bool isInside(const fs::path& path, const fs::path& folder) {
  auto p = path.begin();
  for (auto f = folder.begin(); f != folder.end(); ++f, ++p) {
    if (f->empty()) continue;  // a trailing separator
    if (p == path.end() || *p != *f) return false;
  }
  return true;
}

// Output folders named in a file ("run_dir", "output_dir", at any depth: a convert project's
// sections, an experiment's base) are where exports replace folders, and the file may come from
// someone else: they may not climb with "..", and an absolute one must lie inside the working
// folder or the file's own folder. The same paths typed as flags (--run-dir, --output) are not
// checked: the user wrote them.
void checkOutputPaths(const nlohmann::json& j, const std::string& file) {
  if (j.is_array()) {
    for (const auto& item : j) checkOutputPaths(item, file);
    return;
  }
  if (!j.is_object()) return;
  for (const auto& [key, value] : j.items()) {
    if ((key == "run_dir" || key == "output_dir") && value.is_string()) {
      const std::string path = value.get<std::string>(), name = key;  // (a lambda cannot capture a binding in C++17)
      const auto refuse = [&](const std::string& why) {
        throw std::runtime_error(file + ": \"" + name + "\" is \"" + path + "\": " + why +
                                 " (give it on the command line instead)");
      };
      for (const auto& part : fs::path(path))
        if (part == "..") refuse("a folder in a config file may not go up with '..'");
      if (fs::path(path).is_absolute()) {
        std::error_code ec;
        const auto target = fs::path(path).lexically_normal();
        const auto working = fs::current_path(ec).lexically_normal();
        const auto own = fs::absolute(file, ec).parent_path().lexically_normal();
        if (!isInside(target, working) && !isInside(target, own))
          refuse("an absolute folder in a config file must lie inside the working folder or the file's folder");
      }
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
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(path + ": not JSON (" + e.what() + ")");
  }
  checkOutputPaths(j, path);
  if (j.is_object() && j.contains(section)) return j.at(section);
  return j;
}

}  // namespace hh::jobs
