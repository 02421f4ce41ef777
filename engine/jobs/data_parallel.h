// What the training jobs (distill, finetune, convert) share to train data-parallel on a
// dist::Communicator (engine/distributed/communicator.h); in a world of one each is a no-op or
// the identity, so the single-process path is the same code.
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

namespace hh::dist {
class Communicator;
}

namespace hh::jobs {

// Throws std::invalid_argument ("JOB: batch_size B is smaller than the N processes ...") when a
// rank would get no row of a step; with `trainRows` (>= 0) also when the training rows are
// fewer than the processes (a step takes min(batch_size, rows): a rank with none had a NaN loss).
void requireRowPerRank(const std::string& job, int64_t batchSize, const dist::Communicator& world,
                       int64_t trainRows = -1);

// Every rank must resume from the same step (run_dir on storage every rank sees) and starts from
// rank 0's values of `params` (they agree already: same files, same seed).
void startTogether(dist::Communicator& world, const std::vector<at::Tensor>& params, int64_t step);

// This rank's rows of a global batch of row indices [B] (shardRange) and its share of the batch:
// its gradient, multiplied by `share` and summed over ranks, is the whole batch's.
struct Shard {
  at::Tensor rows;  // [b] int64, b = this rank's rows
  double share = 1.0;  // b / B
};
Shard shardOf(const at::Tensor& globalRows, const dist::Communicator& world);

// The run file's device with the world: `device` ("cpu"), or "cpu x 2 processes (gloo)".
std::string deviceName(const std::string& device, const dist::Communicator& world);

// " | data-parallel over N processes, B UNIT per step in all" for a job's first log line ("" alone).
std::string dataParallelNote(const dist::Communicator& world, int64_t batchSize, const std::string& unit);

}  // namespace hh::jobs
