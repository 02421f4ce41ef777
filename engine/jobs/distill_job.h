// Stage 1 of the Hedgehog conversion: freeze the model, put the chosen feature map into the
// layers the plan names, and train only the feature maps (and rule gates) so that each converted
// layer's linear attention weights match its softmax weights (paper eq. 4):
//   loss = sum_layers sum_heads mean_rows  sum_j p_ij * -log(a_ij + 1e-10)        (soft_ce)
//       or                                  sum_j p_ij * (log p_ij - log a_ij)    (kl)
//   (+ output_mse * mean ||y_linear - y_softmax||^2 when set)
// computed on the teacher's activations (converted layers propagate softmax during stage 1).
// AdamW, evaluation on held-out sequences every `evalEvery` steps with early stopping, per-head
// tables, snapshots on a fixed probe text and feature-map weights into the run file
// (engine/runs), adapters saved beside it. NaN/inf stops the job and keeps the last good
// weights; cancel stops within a step; resume continues from the run folder's checkpoint.
#pragma once
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "engine/config/distill_config.h"
#include "engine/jobs/job_observer.h"

namespace hh::dist {
class Communicator;
}

namespace hh::jobs {

struct DistillResult {
  JobStatus status = JobStatus::Completed;
  std::string message;
  int64_t steps = 0;  // optimizer steps done (including resumed ones)
  int64_t bestStep = 0;
  // Mean KL on held-out text before and after; NaN where not measured (cancelled or failed
  // before the first evaluation or the end, or a rank other than 0).
  double initialKl = std::numeric_limits<double>::quiet_NaN(), finalKl = std::numeric_limits<double>::quiet_NaN();
  double bestValidationLoss = std::numeric_limits<double>::quiet_NaN();
  std::string runFile, adaptersFile;
  std::string device;  // where it computed: "cpu", "cuda:0 (NAME)", with ", bfloat16" in bf16 (engine/core/device.h)
  double seconds = 0;
};

// Runs the job on the calling thread. Throws only for bad configuration (before anything starts)
// and, with several processes, for a rank that stopped or timed out; failures during training
// are reported in the result (and the run file).
// `world` (engine/distributed/communicator.h): null or a world of one trains alone; otherwise
// this process is one data-parallel rank: config.batchSize is the global batch, each rank takes
// its rows, gradients are summed over ranks, and only rank 0 writes the run file, the checkpoint
// and the adapters (the others return with empty paths).
DistillResult runDistill(const DistillConfig& config, JobObserver& observer, dist::Communicator* world = nullptr);

}  // namespace hh::jobs
