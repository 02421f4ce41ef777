// Where a process sits in a data-parallel world (the launcher's variables) and which rows of a
// global batch it takes; no Torch, so launchers and other Torch-free code include this alone
// (the Communicator that exchanges tensors is communicator.h).
#pragma once
#include <cstdint>
#include <string>
#include <utility>

namespace hh::dist {

// Part of the error a collective throws when a peer stopped (a launcher tells it from other errors).
inline constexpr const char* kLostPeerMessage = "another rank stopped or timed out";

// Where this process sits in the world, from the usual launcher variables:
//   RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT (LOCAL_RANK and HH_DIST_STORE_FILE optional).
// No WORLD_SIZE (or 1): a world of one. Bad values throw std::invalid_argument naming the variable.
struct WorldInfo {
  int rank = 0;
  int size = 1;
  int localRank = 0;
  std::string masterAddr = "127.0.0.1";
  int masterPort = 29500;
  // A file the ranks meet through instead of rank 0 listening on MASTER_PORT (HH_DIST_STORE_FILE:
  // the CLI's launcher sets it for the local ranks of `--nproc`, so nothing listens on a network
  // interface). Empty: the TCP rendezvous at masterAddr:masterPort.
  std::string storeFile;
  bool distributed() const { return size > 1; }
};
WorldInfo worldFromEnvironment();

// The rows [begin, end) of a global batch of `total` that `rank` of `size` takes; contiguous
// slices whose sizes differ by at most one (the first total % size ranks take one more).
std::pair<int64_t, int64_t> shardRange(int64_t total, int rank, int size);

}  // namespace hh::dist
