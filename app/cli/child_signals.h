// Signals for the CLI's launchers of child processes (the ranks of `--nproc`, the variants of
// `experiment --jobs`): while a ForwardedSignals lives, SIGINT and SIGTERM only count, so the
// launcher's wait loop can pass each one on to its children (one SIGINT each: the first cancels a
// child's job, a second kills it). Each child sits in its own process group (detachChild), so a
// Ctrl-C at the terminal reaches the launcher alone and the children once, through it. A SIGTERM
// after the launcher's parent died is counted only when it is the first (countsAsForwarded).
#pragma once
#include <sys/prctl.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdlib>

namespace hh::cli {

inline std::atomic<int> gForwardedSignals{0};
inline std::atomic<pid_t> gLauncherParent{0};  // the launcher's parent when the counting began
inline std::atomic<bool> gParentGoneSeen{false};  // the wait loop saw that parent gone

// Whether a signal counts as one more to pass on. Not the SIGTERM that comes as the launcher's
// parent dies (the parent-death signal of the workbench's child: the parent is gone, and the
// wait loop, which looks every 50 ms, had not seen it yet) after a first signal: the workbench
// dying after a cancel is no force-stop, and rank 0 may be saving. A launcher whose shell exited
// earlier (nohup) still counts a second `kill` as a force-stop.
inline bool countsAsForwarded(int signal, bool parentGone, bool parentGoneSeenBefore, int countedSoFar) {
  return !(signal == SIGTERM && parentGone && !parentGoneSeenBefore && countedSoFar >= 1);
}
inline void countForwardedSignal(int signal) {
  if (countsAsForwarded(signal, getppid() != gLauncherParent.load(), gParentGoneSeen.load(), gForwardedSignals.load()))
    gForwardedSignals.fetch_add(1);
}

class ForwardedSignals {
 public:
  ForwardedSignals() {
    gForwardedSignals = 0;
    gLauncherParent = getppid();
    gParentGoneSeen = false;
    struct sigaction action {};
    action.sa_handler = countForwardedSignal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;
    sigaction(SIGINT, &action, &oldInt_);
    sigaction(SIGTERM, &action, &oldTerm_);
  }
  ~ForwardedSignals() {
    sigaction(SIGINT, &oldInt_, nullptr);
    sigaction(SIGTERM, &oldTerm_, nullptr);
  }
  ForwardedSignals(const ForwardedSignals&) = delete;
  ForwardedSignals& operator=(const ForwardedSignals&) = delete;

  // The signals counted so far. The wait loops call it every 50 ms: it also notes a parent gone.
  int received() const {
    if (getppid() != gLauncherParent.load()) gParentGoneSeen = true;
    return gForwardedSignals.load();
  }

 private:
  struct sigaction oldInt_ {}, oldTerm_ {};
};

// In a child between fork and exec (async-signal-safe calls only): its own process group, a SIGTERM
// when the launcher dies, even by SIGKILL, and the default handlers back. A job reads SIGTERM as a
// cancel that never escalates (cli_observer.h): a launcher killed after it had passed on a cancel
// (the workbench's kill, say) must not end a rank 0 that is saving, as a second SIGINT would.
// Returns false when the launcher is already gone (the child should _exit).
// The pause signals (pause_signals.h) are ignored until the child's main() installs its handlers:
// left to their default they would end it. `launcherPid` (the launcher's pid as text, made before
// the fork) goes into HH_LAUNCHER_PID: the pid a child's pause hint names.
inline bool detachChild(pid_t launcher, const char* launcherPid) {
  setpgid(0, 0);
  prctl(PR_SET_PDEATHSIG, SIGTERM);
  if (getppid() != launcher) return false;
  signal(SIGINT, SIG_DFL);
  signal(SIGTERM, SIG_DFL);
  signal(SIGUSR1, SIG_IGN);
  signal(SIGUSR2, SIG_IGN);
  setenv("HH_LAUNCHER_PID", launcherPid, 1);
  return true;
}

}  // namespace hh::cli
