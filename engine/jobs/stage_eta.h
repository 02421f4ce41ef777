// The time left in a job's current stage, for progress displays (the CLI's bar and lines, the
// workbench's progress bar): the stage's rate since its first progress report, times the steps
// left. A conversion or an experiment runs several stages through one observer, each counting its
// steps from the start again; a stage's estimate must not use the time of the stages before it
// (it did: the stories conversion's finetune stage said "eta 43m40s" at step 20 of 1000 for what
// took 1m52s). So the clock restarts when the caller says a stage started (restart()), when the
// step count goes back, and when the total changes.
#pragma once
#include <chrono>
#include <cstdint>

namespace hh::jobs {

class StageEta {
 public:
  using Clock = std::chrono::steady_clock;

  // The next report starts a new stage.
  void restart() { firstStep_ = -1; }

  // Seconds left in the stage after `step` of `total`, reported at `now`; < 0 while unknown (at
  // the stage's first report, before any step has been timed). 0 once step reaches total.
  double secondsLeft(int64_t step, int64_t total, Clock::time_point now) {
    if (firstStep_ < 0 || step < lastStep_ || total != total_) {
      firstStep_ = step;
      start_ = now;
      total_ = total;
    }
    lastStep_ = step;
    if (step >= total) return 0.0;
    if (step == firstStep_) return -1.0;
    const double elapsed = std::chrono::duration<double>(now - start_).count();
    return elapsed / double(step - firstStep_) * double(total - step);
  }

 private:
  int64_t firstStep_ = -1, lastStep_ = -1, total_ = -1;
  Clock::time_point start_{};
};

}  // namespace hh::jobs
