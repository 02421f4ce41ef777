// The gate every rank passes at the start of a training step: cancel and pause, agreed.
//   - cancel: when any rank's job was asked to stop, every rank stops at this same step;
//   - pause: when any rank's job was asked to pause, every rank waits here, exchanging both flags
//     every `poll`, until no rank asks any more (then all go on together) or one is cancelled
//     (then all stop). While they wait the ranks exchange a few bytes every `poll`, so a pause of
//     any length never runs into the collectives' timeout (HH_DIST_TIMEOUT_S), as a rank blocked
//     inside a collective would.
// In a world of one the same loop runs without exchanges. The gate is where a training job's
// pause takes effect: the CLI's (SIGUSR1 / SIGUSR2, app/cli/pause_signals.h) and the workbench's
// (its runners' Pause); outside training steps a single process may wait in its cancel poll.
#pragma once
#include <chrono>
#include <cstdint>
#include <functional>

#include "engine/distributed/communicator.h"

namespace hh::dist {

struct StepControl {
  std::function<bool()> cancelled;       // this rank's job was asked to stop
  std::function<bool()> pauseRequested;  // this rank's job was asked to pause (until asked no more)
  // (true, false) as the ranks begin to wait; (false, false) as they go on, (false, true) as a
  // cancel ends the wait.
  std::function<void(bool paused, bool cancelled)> pausedChanged;
};

// true: train this step; false: every rank stops here (a cancel). Every rank returns the same.
bool passStepGate(Communicator& world, const StepControl& control,
                  std::chrono::milliseconds poll = std::chrono::milliseconds(200));

}  // namespace hh::dist
