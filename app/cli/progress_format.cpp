#include "app/cli/progress_format.h"

#include <cstdio>
#include <mutex>
#include <stdexcept>

namespace hh::cli {
namespace {
ProgressFormat gFormat = ProgressFormat::Auto;
std::mutex gStdout;
}  // namespace

void setProgressFormat(const std::string& name) {
  if (name == "auto") gFormat = ProgressFormat::Auto;
  else if (name == "bar") gFormat = ProgressFormat::Bar;
  else if (name == "plain") gFormat = ProgressFormat::Plain;
  else if (name == "jsonl") gFormat = ProgressFormat::Jsonl;
  else throw std::runtime_error("--progress: unknown format '" + name + "' (auto, bar, plain or jsonl)");
}

ProgressFormat progressFormat() { return gFormat; }

namespace {
// One whole line on stdout, flushed; lines from several threads never interleave.
void writeLine(const std::string& line) {
  std::lock_guard<std::mutex> lock(gStdout);
  std::fwrite(line.data(), 1, line.size(), stdout);
  std::fputc('\n', stdout);
  std::fflush(stdout);
}
}  // namespace

void emitEvent(const nlohmann::json& event) {
  // Invalid UTF-8 in a log line or a path is replaced, never thrown: an event must not end a job.
  writeLine(event.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

void sayLine(const std::string& line) {
  if (jsonlProgress()) return emitEvent({{"event", "log"}, {"line", line}});
  writeLine(line);
}

}  // namespace hh::cli
