#include "engine/core/runtime.h"

#include "engine/core/device.h"

#include <ATen/Parallel.h>
#include <torch/cuda.h>
#include <torch/version.h>

#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <cctype>

#include <cstdlib>
#include <string>
#include <thread>

namespace hh {

namespace {
std::atomic<int> defaultThreads{0};  // 0 = from the hardware

int requestedThreads() {
  if (const char* env = std::getenv("HH_NUM_THREADS")) {
    char* end = nullptr;
    const long n = std::strtol(env, &end, 10);
    if (end != env && n > 0 && n < 4096) return static_cast<int>(n);
  }
  if (const int n = defaultThreads.load(); n > 0) return n;
  return hardwareThreadCount(std::thread::hardware_concurrency(), std::getenv("OMP_WAIT_POLICY"));
}
}  // namespace

int hardwareThreadCount(unsigned hardwareThreads, const char* openMpWaitPolicy) {
  std::string policy(openMpWaitPolicy != nullptr ? openMpWaitPolicy : "");
  for (auto& c : policy) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  // Two cores or fewer: one thread, unless OpenMP's idle workers wait passively. Spinning ones
  // fight OpenBLAS's pool and the job's other threads over two cores (the stories conversion
  // took 403.5 s with two spinning threads, 224.1 s with one, 189.7 s with two passive ones;
  // docs/performance.md). scripts/demo.sh sets OMP_WAIT_POLICY=PASSIVE on such machines; it has
  // to be set before the process starts (libgomp reads it when it loads).
  if (hardwareThreads <= 2 && policy != "passive") return 1;
  return static_cast<int>(std::max(1u, hardwareThreads));
}

void setDefaultThreadCount(int threads) {
  defaultThreads.store(std::max(0, threads));
  applyThreadCount(requestedThreads());
}

void applyThreadCount(int threads) {
  const int n = std::max(1, threads);
  // Torch's intra-op count; with OpenMP it is also the calling thread's own OpenMP setting, which
  // threads started later (a GUI's job thread) do not inherit, hence a call on each of them.
  at::set_num_threads(n);
  // OpenBLAS (Debian's BLAS for LibTorch) keeps its own pool, sized by the core count unless
  // told: without this a "1 thread" job still ran a second busy BLAS thread.
  using SetThreads = void (*)(int);
  static const auto openblasSetThreads =
      reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"));
  if (openblasSetThreads != nullptr) openblasSetThreads(n);
}

RuntimeInfo initRuntime() {
  applyThreadCount(requestedThreads());
  return runtimeInfo();
}

RuntimeInfo runtimeInfo() {
  RuntimeInfo info;
  info.intraOpThreads = at::get_num_threads();
  const unsigned hw = std::thread::hardware_concurrency();
  info.hardwareThreads = hw > 0 ? static_cast<int>(hw) : 1;
  info.device = deviceLabel(resolveDevice("auto"));  // where jobs run unless told otherwise
  info.torchVersion = TORCH_VERSION;
  return info;
}

const char* engineVersion() { return HH_VERSION; }

}  // namespace hh
