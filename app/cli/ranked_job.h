// The run and the end of a data-parallel job command (distill, finetune): launch or join the
// ranks, run the job in this process, report its end on rank 0 and the rank's last line on every
// rank, and fail the command unless the job completed.
#pragma once
#include <string>

#include "app/cli/cli_observer.h"
#include "app/cli/commands.h"
#include "app/cli/job_end.h"
#include "app/cli/rank_processes.h"

namespace hh::cli {

// run(observer, communicator) returns the job's result (status, message, seconds, steps, runFile,
// device); outputs(result) the files it wrote, as JobEnd::Outputs.
template <class Run, class Outputs>
void runRankedJob(int processes, const std::string& runDir, Run&& run, Outputs&& outputs) {
  const auto rank = launchOrJoin(processes, runDir);
  if (!rank) return;  // this process launched the ranks; they did the job
  CliObserver observer;
  const auto r = run(observer, rank->communicator.get());
  if (rank->main()) {
    JobEnd end{r.status, r.message, r.seconds, r.steps, r.runFile, outputs(r)};
    end.device = r.device;
    reportJobEnd(end);
  }
  printRankEnd(*rank, jobs::toString(r.status), r.steps, r.seconds);
  if (r.status != jobs::JobStatus::Completed) throw JobFailed(r.status, r.message);
}

}  // namespace hh::cli
