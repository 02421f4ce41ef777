// `hedgehog preflight MODEL_DIR [--json]`: what the model is and what would stop a conversion,
// from config.json, the safetensors headers and the tokenizer files (no weights are loaded).
// Exit status 0 when ready, 3 when a blocker was found.
#include <cstdio>

#include "app/cli/commands.h"
#include "engine/models/preflight.h"

namespace hh::cli {

void addPreflightCommand(CLI::App& app) {
  auto folder = std::make_shared<std::string>();
  auto json = std::make_shared<bool>(false);
  auto* cmd = app.add_subcommand("preflight", "Check a model folder before converting it (architecture, sizes, blockers)");
  cmd->add_option("model", *folder, "Model folder (config.json + safetensors + tokenizer)")
      ->required()
      ->check(CLI::ExistingDirectory);  // a path that is no folder is bad input (exit 1), not a blocker (3)
  cmd->add_flag("--json", *json, "Print the report as JSON");
  cmd->callback([folder, json] {
    const auto report = models::preflight(*folder);
    std::fputs(*json ? (report.toJson().dump(2) + "\n").c_str() : report.text().c_str(), stdout);
    if (!report.ready()) throw CLI::RuntimeError(3);
  });
}

}  // namespace hh::cli
