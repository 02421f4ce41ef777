// What every job does with its run file, without Torch: a run id, the run status of a job status,
// wall time, and the ending (the last log line, the status row, the closed file).
#pragma once
#include <chrono>
#include <cstdint>
#include <string>

#include "engine/jobs/job_observer.h"
#include "engine/runs/run_writer.h"

namespace hh::jobs {

std::string makeRunId(const std::string& kind);
runs::RunStatus runStatusOf(JobStatus status);
double secondsSince(std::chrono::steady_clock::time_point start);
// The end of every job: logs "<status>: <message>" (run file at `step`, and observer), writes the
// terminal status row and closes the file.
void finishRun(runs::RunWriter& writer, JobObserver& observer, JobStatus status, const std::string& message, int64_t step);

}  // namespace hh::jobs
