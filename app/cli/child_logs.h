// How a child process of the CLI (a rank of `--nproc`, a variant of `experiment --jobs`) ended:
// what it said in its log file when it failed, its wait status in words, and what the launcher of
// `--nproc` then does with the ranks still running.
#pragma once
#include <sys/wait.h>

#include <chrono>
#include <fstream>
#include <optional>
#include <string>

#include "app/cli/commands.h"
#include "engine/jobs/training_session.h"

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

// A wait status in words: "exited with status N", "was killed by signal N".
inline std::string describeStatus(int status) {
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return std::string("was killed by signal ") + std::to_string(WTERMSIG(status));
  return "stopped";
}

inline constexpr std::chrono::seconds kGraceAfterRankFailure{30}, kGraceAfterRankZero{2};

// What the launcher of `--nproc` does with the ranks still running once rank `rank` has ended
// with wait status `status` (`said`: the last error line of its log):
//   - nothing (nullopt) when it completed, or when a rank > 0 was cancelled or failed with every
//     rank (jobs::kFailedOnEveryRank): every rank stops at that step, and rank 0 is then saving
//     its checkpoint and closing the run file, which for a large model takes long;
//   - kills them kGraceAfterRankZero later when rank 0 failed: it hosts the rendezvous and takes
//     part in every exchange, so the others cannot go on (one waiting at the rendezvous would
//     wait for HH_DIST_TIMEOUT_S), and only rank 0 writes files;
//   - kills them kGraceAfterRankFailure later when a rank > 0 failed on its own: the others
//     notice at their next exchange; this is the backstop.
inline std::optional<std::chrono::seconds> rankKillDelay(int rank, int status, const std::string& said) {
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return std::nullopt;
  if (rank == 0) return kGraceAfterRankZero;
  if (WIFEXITED(status) && WEXITSTATUS(status) == kExitCancelled) return std::nullopt;
  const std::string everyRank = std::string(" on rank ") + std::to_string(rank) + jobs::kFailedOnEveryRank + ": ";
  if (WIFEXITED(status) && WEXITSTATUS(status) == 1 && said.find(everyRank) != std::string::npos) return std::nullopt;
  return kGraceAfterRankFailure;
}

}  // namespace hh::cli
