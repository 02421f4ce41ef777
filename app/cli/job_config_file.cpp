// The CLI's --config files are read by the engine's reader (engine/jobs/config_file.h), the same
// one the workbench uses for project files.
#include "app/cli/commands.h"
#include "engine/jobs/config_file.h"

namespace hh::cli {

nlohmann::json readJobConfig(const std::string& path, const std::string& section) {
  return jobs::readConfigFile(path, section);
}

}  // namespace hh::cli
