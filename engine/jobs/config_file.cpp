#include "engine/jobs/config_file.h"

#include <fstream>
#include <stdexcept>

namespace hh::jobs {

nlohmann::json readConfigFile(const std::string& path, const std::string& section) {
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

}  // namespace hh::jobs
