// The time left in a job's current stage, for progress displays (the CLI's bar and lines, the
// workbench's progress bar): the stage's recent rate times the steps left. A conversion or an
// experiment runs several stages through one observer, each counting its steps from the start
// again; a stage's estimate must not use the time of the stages before it (it did: the stories
// conversion's finetune stage said "eta 43m40s" at step 20 of 1000 for what took 1m52s). So the
// clock restarts when the caller says a stage started (restart()), when the step count goes back,
// and when the total changes. Time spent paused is left out (leaveOut()).
//
// The rate is over the stage's last quarter of steps (at least kMinWindowSteps), not over all of
// it: the evaluation's table batches cost about 10x its perplexity batches, and an average since
// the stage's start kept the estimate at a fraction of the time left well into the tables.
#pragma once
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <vector>

namespace hh::jobs {

class StageEta {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr int64_t kMinWindowSteps = 3;

  // The next report starts a new stage.
  void restart() { reports_.clear(); }
  // A pause of `paused` just ended: the stage's reports so far move that much later, so the time
  // spent paused is not taken for time spent on steps.
  void leaveOut(Clock::duration paused) {
    for (auto& report : reports_) report.at += paused;
  }

  // Seconds left in the stage after `step` of `total`, reported at `now`; < 0 while unknown (at
  // the stage's first report, before any step has been timed). 0 once step reaches total.
  double secondsLeft(int64_t step, int64_t total, Clock::time_point now) {
    if (reports_.empty() || step < reports_.back().step || total != total_) {
      reports_.clear();
      total_ = total;
    }
    reports_.push_back({step, now});
    if (step >= total) return 0.0;
    // The latest report at least `window` steps back; when none is that far back, the latest of
    // the stage's first step (a step reported twice, before and after an evaluation, counts from
    // its second report).
    const int64_t window = std::max(kMinWindowSteps, (step - reports_.front().step) / 4);
    const int64_t key = std::max(step - window, reports_.front().step);
    auto from =
        std::upper_bound(reports_.begin(), reports_.end(), key, [](int64_t s, const Report& r) { return s < r.step; });
    --from;  // reports_.front().step <= key: never before the first
    if (from->step == step) return -1.0;
    const double elapsed = std::chrono::duration<double>(now - from->at).count();
    return elapsed / double(step - from->step) * double(total - step);
  }

 private:
  struct Report {
    int64_t step;
    Clock::time_point at;
  };
  std::vector<Report> reports_;  // this stage's, steps ascending
  int64_t total_ = -1;
};

}  // namespace hh::jobs
