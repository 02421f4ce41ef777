// Reading what a child process of the CLI (a rank of `--nproc`, a variant of `experiment --jobs`)
// said in its log file when it failed.
#pragma once
#include <fstream>
#include <string>

namespace hh::cli {

// The message of the last "hedgehog: error: MESSAGE" line of `logFile` (empty when none).
inline std::string lastErrorLine(const std::string& logFile) {
  static const std::string prefix = "hedgehog: error: ";
  std::ifstream in(logFile);
  std::string line, found;
  while (std::getline(in, line))
    if (line.rfind(prefix, 0) == 0) found = line.substr(prefix.size());
  return found;
}

}  // namespace hh::cli
