// `hedgehog`: the headless command-line tool on the same engine as the workbench.
#include <exception>
#include <iostream>

#include "app/cli/commands.h"
#include "engine/core/runtime.h"

int main(int argc, char** argv) {
  CLI::App app{"Hedgehog: turn softmax-attention Transformers into linear-attention ones, and look inside."};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("hedgehog ") + hh::engineVersion());
  hh::cli::addParityCommand(app);
  hh::cli::addCompareCommand(app);
  hh::cli::addTokenizeCommand(app);
  hh::cli::addForwardCommand(app);
  hh::cli::addPreflightCommand(app);
  hh::cli::addDistillCommand(app);
  hh::cli::addInspectCommand(app);
  hh::cli::addTrainCommand(app);
  hh::cli::addFinetuneCommand(app);
  hh::cli::addEvaluateCommand(app);
  hh::cli::addConvertCommand(app);
  hh::cli::addExportCommand(app);
  hh::cli::addBenchCommand(app);
  hh::cli::addExperimentCommand(app);
  hh::cli::addGenerateCommand(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const std::exception& e) {
    std::cerr << "hedgehog: error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
