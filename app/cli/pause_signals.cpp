#include "app/cli/pause_signals.h"

#include <unistd.h>

#include <cstdlib>

namespace hh::cli {

pid_t pauseTarget() {
  const char* launcher = std::getenv("HH_LAUNCHER_PID");  // set by the launchers for their children
  return launcher && std::atoi(launcher) == static_cast<int>(getppid()) ? getppid() : getpid();
}

bool PauseForwarder::forward(const std::vector<pid_t>& children) {
  const bool paused = pauseRequested();
  const auto now = std::chrono::steady_clock::now();
  const bool repeat = paused && now - lastSent_ >= std::chrono::seconds(1);
  if (paused != sentPaused_ || repeat) {
    for (const pid_t child : children) kill(child, paused ? SIGUSR1 : SIGUSR2);
    sentPaused_ = paused;
    lastSent_ = now;
  }
  return paused;
}

}  // namespace hh::cli
