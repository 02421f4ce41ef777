// Data-parallel jobs from the CLI (distill, finetune, convert):
//   hedgehog distill ... --nproc N     this process becomes a launcher: it starts N ranks of the
//                                      same command on this machine (RANK, WORLD_SIZE, MASTER_ADDR
//                                      = 127.0.0.1, MASTER_PORT = a free port, each rank
//                                      HH_NUM_THREADS = cores / N unless set), waits for them
//                                      and exits with rank 0's status.
//   RANK=.. WORLD_SIZE=.. MASTER_ADDR=.. MASTER_PORT=.. hedgehog distill ...
//                                      this process is that rank (an external launcher, e.g. one
//                                      command per host, or torchrun --no-python).
// Rank 0 keeps stdout (the progress); rank k > 0 writes its output to <run_dir>/rank-k.log. A
// failure ends in one error line: rank 0's (relayed by the launcher), or, when another rank
// failed first, that rank's, named, with its log. Each rank runs
// in its own process group, so Ctrl-C reaches the launcher only, which passes one interrupt to
// every rank (they all cancel at the same step; a second Ctrl-C kills); SIGTERM does the same.
// If a rank fails, the others are killed when rankKillDelay (child_logs.h) says: 30 s after a
// rank > 0 failed on its own (a lost peer ends their next exchange), 2 s after rank 0 failed, never
// after a rank > 0 was cancelled or failed with every rank (rank 0 is then saving). A launcher
// that dies takes its ranks with it (they get SIGTERM: a cancel that never kills).
#pragma once
#include <CLI/CLI.hpp>

#include <memory>
#include <optional>
#include <string>

#include "engine/distributed/world.h"

namespace hh::dist {
class Communicator;
}

namespace hh::cli {

// main() records its arguments: the launcher starts its ranks with the same command line.
void recordCommandLine(int argc, char** argv);

// Adds `--nproc N` to a job command.
void addProcessCountOption(CLI::App* command, int& processes);

// When processes > 1: launches the ranks, waits for them and returns their exit status (0, or
// rank 0's status, or the first failed rank's; that rank's error is printed). Otherwise nullopt:
// this process runs the job itself, alone or as the rank its environment names.
std::optional<int> runLocalRanks(int processes, const std::string& runDir);

// This process's place in the world (worldFromEnvironment) and its communicator, connected when
// the world has more than one rank.
struct Rank {
  dist::WorldInfo world;
  std::shared_ptr<dist::Communicator> communicator;
  bool main() const { return world.rank == 0; }
};
Rank joinWorld();

// What a job command does first: with processes > 1, runLocalRanks and nullopt (the ranks did the
// job; a non-zero status is thrown as CLI::RuntimeError, its error line printed already);
// otherwise joinWorld(): the job runs here.
std::optional<Rank> launchOrJoin(int processes, const std::string& runDir);

// A training job's last line on this rank: "peak memory: N MB" on rank 0 (after its summary),
// "rank K: STATUS after S steps (T s), peak memory N MB" on the others (their log).
void printRankEnd(const Rank& rank, const char* status, int64_t steps, double seconds);

}  // namespace hh::cli
