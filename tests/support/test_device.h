// The device the engine suites run their models and jobs on: HH_TEST_DEVICE ("cpu" when unset;
// "cuda" on a GPU machine with a CUDA build, docs/gpu.md). A suite that uses it starts with
// HH_SKIP_UNLESS_TEST_DEVICE(), which skips cleanly where this build cannot have that device.
// The compute dtype the job suites run in: HH_TEST_DTYPE ("float32" when unset, or "bfloat16");
// tests whose tolerances depend on it take them from testTolerance().
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

inline std::string testDtype() {
  const char* name = std::getenv("HH_TEST_DTYPE");
  return name != nullptr && *name != '\0' ? name : "float32";
}
inline bool testInBf16() { return testDtype() == "bfloat16"; }
// `fp32` under float32, `bf16` under bfloat16: a tolerance stated per dtype.
inline double testTolerance(double fp32, double bf16) { return testInBf16() ? bf16 : fp32; }

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
