// How a job talks to whoever runs it (the CLI's progress bar, the workbench's worker thread):
// a plain C++ observer, called on the job's own thread. The GUI turns these calls into queued Qt
// signals; the CLI prints them. cancelled() is polled at least once per step and inside long
// evaluations, so a cancel takes effect within a second.
#pragma once
#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>

namespace hh::jobs {

class JobObserver {
 public:
  virtual ~JobObserver() = default;
  virtual void started(const std::string& runPath, int64_t totalSteps) {}
  virtual void progress(int64_t step, int64_t totalSteps, const std::string& phase) {}
  virtual void scalars(int64_t step, const std::map<std::string, double>& values) {}
  virtual void log(const std::string& line) {}
  virtual bool cancelled() { return false; }
};

// Thrown inside a job when the observer asks to stop; the job catches it, marks the run
// cancelled and returns.
class JobCancelled : public std::runtime_error {
 public:
  JobCancelled() : std::runtime_error("cancelled") {}
};

enum class JobStatus { Completed, Failed, Cancelled };
const char* toString(JobStatus status);

}  // namespace hh::jobs
