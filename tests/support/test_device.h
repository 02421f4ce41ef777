// The device the engine suites run their models and jobs on: HH_TEST_DEVICE ("cpu" when unset;
// "cuda" on a GPU machine with a CUDA build, docs/gpu.md). A suite that uses it starts with
// HH_SKIP_UNLESS_TEST_DEVICE(), which skips cleanly where this build cannot have that device.
#pragma once
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "engine/core/device.h"

namespace hh::test {

inline std::string testDevice() {
  const char* spec = std::getenv("HH_TEST_DEVICE");
  return spec != nullptr && *spec != '\0' ? spec : "cpu";
}

// Why testDevice() cannot be had here ("" when it can).
inline std::string testDeviceUnavailable() {
  try {
    resolveDevice(testDevice());
    return "";
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
}

}  // namespace hh::test

#define HH_SKIP_UNLESS_TEST_DEVICE()                                                    \
  do {                                                                                  \
    const std::string hhDeviceProblem = ::hh::test::testDeviceUnavailable();            \
    if (!hhDeviceProblem.empty()) QSKIP(("HH_TEST_DEVICE: " + hhDeviceProblem).c_str()); \
  } while (0)
