// `hedgehog`: the headless command-line tool on the same engine as the workbench.
#include <csignal>
#include <exception>
#include <iostream>

#include "app/cli/commands.h"
#include "app/cli/pause_signals.h"
#include "app/cli/progress_format.h"
#include "app/cli/rank_processes.h"
#include "engine/core/error_text.h"
#include "engine/core/runtime.h"

namespace {

// An error as exactly one line of valid UTF-8: the engine's messages are one line already, but a
// message may quote a file's bytes (a JSON parser's "last read: ..."), which can hold line breaks
// or bytes that are not UTF-8; those are written as \n, \xNN so the line stays one line.
std::string oneLine(const std::string& text) {
  std::string out;
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  auto escaped = [](unsigned char c) {
    static const char* hex = "0123456789abcdef";
    return std::string("\\x") + hex[c >> 4] + hex[c & 15];
  };
  for (size_t i = 0; i < n;) {
    const unsigned char c = s[i];
    if (c < 0x80) {
      if (c == '\n') out += "\\n";
      else if (c == '\r') out += "\\r";
      else if (c == '\t') out += ' ';
      else if (c < 0x20 || c == 0x7f) out += escaped(c);
      else out += static_cast<char>(c);
      ++i;
      continue;
    }
    // A UTF-8 sequence: lead byte, then 1-3 continuation bytes; overlong and surrogate forms are
    // let through (they are well-formed enough for a terminal), truncated ones are escaped.
    const size_t len = (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : (c & 0xf8) == 0xf0 ? 4 : 0;
    bool valid = len > 0 && i + len <= n;
    for (size_t k = 1; valid && k < len; ++k) valid = (s[i + k] & 0xc0) == 0x80;
    if (!valid) {
      out += escaped(c);
      ++i;
      continue;
    }
    out.append(text, i, len);
    i += len;
  }
  return out;
}

int fail(const std::string& message, int status = 1) {
  std::cerr << "hedgehog: " << (status == hh::cli::kExitCancelled ? "cancelled: " : "error: ") << oneLine(message) << std::endl;
  return status;
}

// Every option that takes a value refuses an empty one: the verbs read "" as "not given", so
// `--run-dir ""` or `--corpus ""` ran with the default silently. An empty prompt is a prompt.
void refuseEmptyValues(CLI::App& app) {
  const auto nonEmpty = [](bool required) {
    const std::string hint = required ? "an empty value" : "an empty value (leave the flag out for its default)";
    return CLI::Validator([hint](std::string& value) { return value.empty() ? hint : std::string(); }, "", "non-empty");
  };
  for (CLI::App* command : app.get_subcommands([](CLI::App*) { return true; }))
    for (CLI::Option* option : command->get_options())
      if (option->get_type_size() != 0 && option->get_name() != "--prompt")
        option->check(nonEmpty(option->get_required()));
}

}  // namespace

int main(int argc, char** argv) {
  // Past a file size limit (RLIMIT_FSIZE, a quota) write() must fail with EFBIG so the engine
  // reports which file could not be written, instead of SIGXFSZ killing the process mid-write.
  std::signal(SIGXFSZ, SIG_IGN);
  hh::cli::installPauseSignals();  // SIGUSR1 / SIGUSR2 pause and resume; never the default (exit)
  hh::cli::recordCommandLine(argc, argv);
  CLI::App app{"Hedgehog: turn softmax-attention Transformers into linear-attention ones, and look inside."};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("hedgehog ") + hh::engineVersion());
  // Before or after the command's name: `hedgehog --progress jsonl convert ...` or `hedgehog convert ... --progress jsonl`.
  app.fallthrough();
  app.add_option_function<std::string>("--progress", hh::cli::setProgressFormat,
                                       "How a job reports: auto (bar on a terminal, else plain lines) | bar | plain | jsonl "
                                       "(one JSON event per line, for programs)")
      ->check(CLI::IsMember({"auto", "bar", "plain", "jsonl"}))
      ->default_str("auto");
  hh::cli::addParityCommand(app);
  hh::cli::addCompareCommand(app);
  hh::cli::addTokenizeCommand(app);
  hh::cli::addForwardCommand(app);
  hh::cli::addPreflightCommand(app);
  hh::cli::addDistillCommand(app);
  hh::cli::addRankCommand(app);
  hh::cli::addProbeCommand(app);
  hh::cli::addInspectCommand(app);
  hh::cli::addTrainCommand(app);
  hh::cli::addFinetuneCommand(app);
  hh::cli::addEvaluateCommand(app);
  hh::cli::addConvertCommand(app);
  hh::cli::addExportCommand(app);
  hh::cli::addBenchCommand(app);
  hh::cli::addExperimentCommand(app);
  hh::cli::addGenerateCommand(app);
  hh::cli::addRunInfoCommand(app);
  refuseEmptyValues(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {
    return app.exit(e);  // --help, --version
  } catch (const CLI::RuntimeError& e) {
    return app.exit(e);  // a command's chosen exit status (parity mismatch, preflight blockers); it printed why
  } catch (const CLI::ParseError& e) {
    const auto parsed = app.get_subcommands();
    const std::string command = parsed.empty() ? "" : parsed[0]->get_name() + " ";
    return fail(std::string(e.what()) + " (see hedgehog " + command + "--help)");
  } catch (const hh::cli::JobFailed& e) {
    return fail(e.what(), e.exitCode);
  } catch (const std::exception& e) {
    return fail(hh::errorText(e));
  }
  return 0;
}
