// Run-file pieces every job shares (see run_support.h).
#include "engine/jobs/run_support.h"

#include <cstdio>
#include <ctime>

namespace hh::jobs {

std::string makeRunId(const std::string& kind) {
  const auto now = std::chrono::system_clock::now();
  const std::time_t t = std::chrono::system_clock::to_time_t(now);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buffer[64];
  std::strftime(buffer, sizeof buffer, "%Y%m%d-%H%M%S", &tm);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  char id[96];
  std::snprintf(id, sizeof id, "%s-%s-%03lld", kind.c_str(), buffer, static_cast<long long>(ms));
  return id;
}

runs::RunStatus runStatusOf(JobStatus s) {
  switch (s) {
    case JobStatus::Completed: return runs::RunStatus::Completed;
    case JobStatus::Cancelled: return runs::RunStatus::Cancelled;
    default: return runs::RunStatus::Failed;
  }
}

double secondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

void finishRun(runs::RunWriter& writer, JobObserver& observer, JobStatus status, const std::string& message, int64_t step) {
  const std::string line = std::string(toString(status)) + ": " + message;
  writer.log(line, step);
  observer.log(line);
  writer.setStatus(runStatusOf(status), message);
  writer.close();
}

const char* toString(JobStatus status) {
  switch (status) {
    case JobStatus::Completed: return "completed";
    case JobStatus::Failed: return "failed";
    case JobStatus::Cancelled: return "cancelled";
  }
  return "?";
}

}  // namespace hh::jobs
