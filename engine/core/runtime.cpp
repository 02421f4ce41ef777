#include "engine/core/runtime.h"

#include <torch/torch.h>

#include <cstdlib>
#include <string>
#include <thread>

namespace hh {

namespace {
int requestedThreads() {
  if (const char* env = std::getenv("HH_NUM_THREADS")) {
    char* end = nullptr;
    const long n = std::strtol(env, &end, 10);
    if (end != env && n > 0 && n < 4096) return static_cast<int>(n);
  }
  const unsigned hw = std::thread::hardware_concurrency();
  return hw > 0 ? static_cast<int>(hw) : 1;
}
}  // namespace

RuntimeInfo initRuntime() {
  const int n = requestedThreads();
  if (at::get_num_threads() != n) at::set_num_threads(n);
  return runtimeInfo();
}

RuntimeInfo runtimeInfo() {
  RuntimeInfo info;
  info.intraOpThreads = at::get_num_threads();
  const unsigned hw = std::thread::hardware_concurrency();
  info.hardwareThreads = hw > 0 ? static_cast<int>(hw) : 1;
  info.device = torch::cuda::is_available() ? "cuda:0" : "cpu";
  info.torchVersion = TORCH_VERSION;
  return info;
}

const char* engineVersion() { return HH_VERSION; }

}  // namespace hh
