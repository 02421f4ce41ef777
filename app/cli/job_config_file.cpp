// Reading a job's --config file: the whole file, or its "<section>" object when the file is a
// project holding several jobs' configs.
#include <fstream>

#include "app/cli/commands.h"

namespace hh::cli {

nlohmann::json readJobConfig(const std::string& path, const std::string& section) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error(path + ": cannot open");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::parse_error& e) {
    throw std::runtime_error(path + ": not JSON (" + e.what() + ")");
  }
  return j.is_object() && j.contains(section) ? j.at(section) : j;
}

}  // namespace hh::cli
