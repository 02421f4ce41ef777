// How a job talks to whoever runs it (the CLI's progress bar, the workbench's worker thread):
// a plain C++ observer, called on the job's own thread. The GUI turns these calls into queued Qt
// signals; the CLI prints them. cancelled() is polled at least once per step and inside long
// evaluations, so a cancel takes effect within a second; pauseRequested() once per training step.
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
  // Whether a cancel was asked, at once: an observer whose cancelled() blocks while paused (the
  // workbench's in-process one) answers here without waiting; the step gate asks this and
  // pauseRequested() and does the waiting itself.
  virtual bool cancelRequested() { return cancelled(); }
  // Asked to pause, until asked no more (the CLI: SIGUSR1, then SIGUSR2). Training waits at its
  // next step, every rank together (engine/distributed/step_gate.h), and says when it begins and
  // ends waiting through paused(); a cancel while it waits stops the job at that step.
  virtual bool pauseRequested() { return false; }
  virtual void paused(bool paused, int64_t step) {}
};

// Passes every call on to `inner`: the base of observers that change a few calls (a stage's or a
// variant's name in front of the phase) and must forward the rest, including calls added later.
class ForwardingObserver : public JobObserver {
 public:
  explicit ForwardingObserver(JobObserver& inner) : inner_(inner) {}
  void started(const std::string& runPath, int64_t totalSteps) override { inner_.started(runPath, totalSteps); }
  void progress(int64_t step, int64_t totalSteps, const std::string& phase) override {
    inner_.progress(step, totalSteps, phase);
  }
  void scalars(int64_t step, const std::map<std::string, double>& values) override { inner_.scalars(step, values); }
  void log(const std::string& line) override { inner_.log(line); }
  bool cancelled() override { return inner_.cancelled(); }
  bool cancelRequested() override { return inner_.cancelRequested(); }
  bool pauseRequested() override { return inner_.pauseRequested(); }
  void paused(bool paused, int64_t step) override { inner_.paused(paused, step); }

 protected:
  JobObserver& inner_;
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
