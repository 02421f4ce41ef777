#include "engine/distributed/step_gate.h"

#include <thread>
#include <vector>

namespace hh::dist {

namespace {
// {ranks cancelled, ranks asking to pause}, summed over the world.
std::vector<double> gateFlags(Communicator& world, const StepControl& control) {
  const bool cancelled = control.cancelled && control.cancelled();
  const bool pause = control.pauseRequested && control.pauseRequested();
  return world.sum(std::vector<double>{cancelled ? 1.0 : 0.0, pause ? 1.0 : 0.0});
}
}  // namespace

bool passStepGate(Communicator& world, const StepControl& control, std::chrono::milliseconds poll) {
  auto flags = gateFlags(world, control);
  if (flags[0] > 0) return false;
  if (flags[1] == 0) return true;
  if (control.pausedChanged) control.pausedChanged(true, false);
  while (flags[0] == 0 && flags[1] > 0) {
    std::this_thread::sleep_for(poll);
    flags = gateFlags(world, control);
  }
  const bool cancelled = flags[0] > 0;
  if (control.pausedChanged) control.pausedChanged(false, cancelled);
  return !cancelled;
}

}  // namespace hh::dist
