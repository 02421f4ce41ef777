// The CLI's JobObserver, in the format of --progress (progress_format.h): a progress bar with ETA
// and the live loss on a terminal, plain timestamped lines when stdout is not a terminal (every
// 5 s, or every HH_PROGRESS_SECONDS), or one JSON event per call; log lines pass through. Ctrl-C
// asks the job to cancel (the job stops within a step and marks its run cancelled); a second
// Ctrl-C kills. SIGTERM cancels like a Ctrl-C and never kills, nor counts towards that second
// Ctrl-C, also once the observer is gone (a launcher's child gets it when the launcher dies, maybe
// while the job saves after a cancel). SIGUSR1 pauses the job and SIGUSR2 resumes it
// (pause_signals.h): a training job at its next step (the step gate), and a single process also
// wherever it polls for a cancel (an evaluation); jsonl reports both as {"event":"paused",...}.
#pragma once
#include <chrono>
#include <map>
#include <string>

#include "engine/jobs/job_observer.h"
#include "engine/jobs/stage_eta.h"

namespace hh::cli {

class CliObserver : public jobs::JobObserver {
 public:
  CliObserver();
  ~CliObserver() override;
  void started(const std::string& runPath, int64_t totalSteps) override;
  void progress(int64_t step, int64_t totalSteps, const std::string& phase) override;
  void scalars(int64_t step, const std::map<std::string, double>& values) override;
  void log(const std::string& line) override;
  bool cancelled() override;  // blocks while paused, in a single process
  bool cancelRequested() override;
  bool pauseRequested() override;  // SIGUSR1 until SIGUSR2 (pause_signals.h)
  void paused(bool paused, int64_t step) override;

 private:
  void draw(int64_t step, int64_t total, const std::string& phase);
  void waitWhilePaused();
  bool tty_, jsonl_, waitsInPolls_;
  int64_t lastStep_ = 0;
  std::string lastPhase_;
  std::chrono::steady_clock::time_point start_, lastPlain_, pausedAt_;
  bool drawn_ = false;
  jobs::StageEta eta_;  // restarted by started(): a conversion's stages share this observer
  std::map<std::string, double> latest_;
  bool barVisible_ = false;
  double plainInterval_ = 5.0;  // seconds between plain progress lines
};

}  // namespace hh::cli
