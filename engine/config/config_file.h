// Reading a job's JSON config file: the whole file, or its "<section>" object when the file is a
// project holding several jobs' configs. Used by the CLI's --config and the workbench's Run menu.
#pragma once
#include <nlohmann/json.hpp>

#include <stdexcept>
#include <string>

namespace hh::jobs {

// Throws std::runtime_error naming the file when it cannot be opened, is a folder or is not JSON.
nlohmann::json readConfigFile(const std::string& path, const std::string& section);

// readConfigFile, then `parse` (a job's ...ConfigFromJson) on it. The parsers name the key but
// not the file (they also read JSON that comes from no file); here any error they throw is
// rethrown as std::invalid_argument prefixed with the file: "PATH: distill config: lr must be positive".
template <class Parse>
auto parseConfigFile(const std::string& path, const std::string& section, Parse parse) {
  const auto j = readConfigFile(path, section);
  try {
    return parse(j);
  } catch (const std::exception& e) {
    throw std::invalid_argument(path + ": " + e.what());
  }
}

}  // namespace hh::jobs
