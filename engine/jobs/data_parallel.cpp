#include "engine/jobs/data_parallel.h"

#include <torch/types.h>

#include <stdexcept>

#include "engine/distributed/communicator.h"
#include "engine/jobs/job_support.h"

namespace hh::jobs {

void requireRowPerRank(const std::string& job, int64_t batchSize, const dist::Communicator& world, int64_t trainRows) {
  if (batchSize < world.size())
    throw std::invalid_argument(job + ": batch_size " + std::to_string(batchSize) + " is smaller than the " +
                                std::to_string(world.size()) + " processes (each needs at least one row per step)");
  if (trainRows >= 0 && trainRows < world.size())
    throw std::invalid_argument(job + ": " + std::to_string(trainRows) + " training sequence" +
                                (trainRows == 1 ? "" : "s") + " for " + std::to_string(world.size()) +
                                " processes (each needs at least one row per step; use fewer processes or more data)");
}

void startTogether(dist::Communicator& world, const std::vector<torch::Tensor>& params, int64_t step) {
  world.requireSame(step, "the step to resume from", "run_dir must be on storage every rank sees");
  at::NoGradGuard noGrad;
  std::vector<torch::Tensor> shared;
  for (const auto& p : params) shared.push_back(p.detach());
  world.broadcast(shared, 0);
}

Shard shardOf(const torch::Tensor& globalRows, const dist::Communicator& world) {
  const int64_t total = globalRows.size(0);
  const auto [first, last] = dist::shardRange(total, world.rank(), world.size());
  return {globalRows.narrow(0, first, last - first), double(last - first) / double(total)};
}

std::string deviceName(const std::string& device, const dist::Communicator& world) {
  return device + (world.distributed() ? " x " + std::to_string(world.size()) + " processes (gloo)" : "");
}

std::string dataParallelNote(const dist::Communicator& world, int64_t batchSize, const std::string& unit) {
  if (!world.distributed()) return "";
  return " | data-parallel over " + std::to_string(world.size()) + " processes, " + std::to_string(batchSize) + " " + unit +
         " per step in all";
}

}  // namespace hh::jobs
