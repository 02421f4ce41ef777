// Data-parallel training across processes on PyTorch's own distributed layer (c10d): a TCPStore
// rendezvous at MASTER_ADDR:MASTER_PORT and a Gloo process group (CPU tensors). The jobs take a
// Communicator; a world of one (Communicator::single()) makes every collective a no-op, so the
// single-process path is the same code and opens no socket.
//
// What the jobs do with it (distill_job.cpp, finetune_job.cpp):
//   - every rank draws the same global batch of B row indices (same sampler, same seed) and
//     trains on its slice shardRange(B, rank, size): rows [begin, end);
//   - its loss is the mean over its rows, so its gradient is scaled by (end - begin) / B before
//     the sum over ranks: the summed gradient is the single-process gradient of the global batch;
//   - the loss of the step travels in the same exchange (one all-reduce per step);
//   - cancel is agreed at the start of each step (any rank cancelled -> all stop at that step).
#pragma once
#include <ATen/core/Tensor.h>

#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/distributed/world.h"

namespace hh::dist {

class Communicator {
 public:
  virtual ~Communicator() = default;
  // A world of one: every collective returns its input.
  static std::shared_ptr<Communicator> single();
  // `world`, or (null) the process-wide world of one: what the jobs train in.
  static Communicator& orAlone(Communicator* world);
  // Rendezvous with the other ranks (rank 0 hosts the TCPStore) and build a Gloo process group
  // on the interface that reaches MASTER_ADDR. Throws std::runtime_error (naming the address)
  // when the others do not arrive within `timeout`; collectives time out after `timeout` too.
  // Whether connect() can build a process group: false when this build's LibTorch came without
  // Gloo's headers (then connect() throws for a world of more than one).
  static bool processGroupsAvailable();
  static std::shared_ptr<Communicator> connect(const WorldInfo& world, std::chrono::milliseconds timeout);
  // connect() when `world` is distributed, else single(); the timeout from HH_DIST_TIMEOUT_S
  // (seconds; default 1800: rank 0 evaluates and saves while the others wait).
  static std::shared_ptr<Communicator> forWorld(const WorldInfo& world);

  virtual int rank() const = 0;
  virtual int size() const = 0;
  bool isMain() const { return rank() == 0; }
  bool distributed() const { return size() > 1; }

  // Element-wise sum over ranks of a CPU tensor (any float dtype), in place.
  virtual void allReduceSum(at::Tensor& values) = 0;
  // Element-wise maximum over ranks of a CPU double tensor, in place.
  virtual void allReduceMax(at::Tensor& values) = 0;
  // Rank `root`'s values into every rank's tensors, in place.
  virtual void broadcast(std::vector<at::Tensor>& tensors, int root) = 0;
  virtual void barrier() = 0;

  // Conveniences built on the above.
  double sum(double value);
  std::vector<double> sum(const std::vector<double>& values);
  bool any(bool value);
  // Throws std::runtime_error unless every rank passes the same value:
  //   "rank R: the ranks disagree on WHAT (LO to HI; this rank has V): HINT"
  void requireSame(int64_t value, const std::string& what, const std::string& hint = "");
  // Scales each gradient by `weight` (this rank's share of the global batch), sums the gradients
  // of `params` and `extra` over ranks in one exchange and returns the summed extras. Parameters
  // without a gradient count as zero (and get one). A world of one returns `extra` untouched.
  std::vector<double> reduceGradients(const std::vector<at::Tensor>& params, double weight,
                                      const std::vector<double>& extra);
};

}  // namespace hh::dist
