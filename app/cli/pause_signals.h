// Pausing a job from outside: SIGUSR1 asks it to pause, SIGUSR2 to go on. The job waits at the
// start of its next training step, every rank together (engine/distributed/step_gate.h); its
// observer (cli_observer.h) reads the request. main() installs the handlers before anything
// else, so the signals never end the process, whatever command it runs.
// Launchers (the ranks of `--nproc`, the variants of `experiment --jobs`) pass each change on to
// their children through a PauseForwarder, and repeat the pause every second while it holds: a
// child that had not installed its handlers yet (the signals are ignored until then, detachChild)
// is told again. The workbench pauses a process-run job by the same signals.
#pragma once
#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <vector>

namespace hh::cli {

inline std::atomic<bool> gPauseRequested{false};
inline void onPauseSignal(int signal) {
  gPauseRequested = signal == SIGUSR1;
}

inline void installPauseSignals() {
  struct sigaction action {};
  action.sa_handler = onPauseSignal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  sigaction(SIGUSR1, &action, nullptr);
  sigaction(SIGUSR2, &action, nullptr);
}
inline bool pauseRequested() {
  return gPauseRequested.load();
}

// The pid a user signals to pause this job: the launcher's for a rank (it passes the signal on to
// every rank), this process's otherwise.
pid_t pauseTarget();

class PauseForwarder {
 public:
  // Called from a launcher's wait loop (every 50 ms) with the children running now: sends each a
  // change of the request at once, and while paused repeats SIGUSR1 every second. Returns whether
  // the launcher is paused (a variant launcher starts no new child then).
  bool forward(const std::vector<pid_t>& children);

 private:
  bool sentPaused_ = false;
  std::chrono::steady_clock::time_point lastSent_{};
};

}  // namespace hh::cli
