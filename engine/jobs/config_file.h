// Reading a job's JSON config file: the whole file, or its "<section>" object when the file is a
// project holding several jobs' configs. Used by the CLI's --config and the workbench's Run menu.
#pragma once
#include <nlohmann/json.hpp>

#include <string>

namespace hh::jobs {

// Throws std::runtime_error naming the file when it cannot be opened or is not JSON.
nlohmann::json readConfigFile(const std::string& path, const std::string& section);

}  // namespace hh::jobs
