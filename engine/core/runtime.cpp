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
#include <mutex>
#include <string>
#include <thread>

namespace hh {

namespace {
std::atomic<int> defaultThreads{0};  // 0 = from the hardware

// OpenBLAS's own thread setting, looked up at run time (null with another BLAS). It is one
// setting for the whole process, so every BlasSingleThreaded scope shares one count of open
// scopes: the first in saves the setting and sets 1, the last out puts the saved one back.
struct OpenBlasThreads {
  int (*get)() = nullptr;
  void (*set)(int) = nullptr;
};
const OpenBlasThreads& openBlas() {
  static const OpenBlasThreads functions{
      reinterpret_cast<int (*)()>(dlsym(RTLD_DEFAULT, "openblas_get_num_threads")),
      reinterpret_cast<void (*)(int)>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"))};
  return functions;
}
std::mutex blasMutex;
int openBlasScopes = 0;        // guarded by blasMutex
int blasThreadsToRestore = 0;  // guarded by blasMutex

// n threads now, or, while a scope holds OpenBLAS at one (another thread's kernels), when the last
// scope closes: set at once, each of that scope's tasks would run an n-thread BLAS, and the scope
// would then put its older setting back over n.
void setBlasThreads(int n) {
  const auto& blas = openBlas();
  if (blas.set == nullptr) return;
  const std::lock_guard<std::mutex> lock(blasMutex);
  if (openBlasScopes > 0)
    blasThreadsToRestore = n;
  else
    blas.set(n);
}

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
  setBlasThreads(n);
}

BlasSingleThreaded::BlasSingleThreaded() {
  const auto& blas = openBlas();
  if (blas.get == nullptr || blas.set == nullptr) return;
  const std::lock_guard<std::mutex> lock(blasMutex);
  if (openBlasScopes++ == 0) {
    blasThreadsToRestore = blas.get();
    blas.set(1);
  }
  counted_ = true;
}

BlasSingleThreaded::~BlasSingleThreaded() {
  if (!counted_) return;
  const std::lock_guard<std::mutex> lock(blasMutex);
  if (--openBlasScopes == 0 && blasThreadsToRestore > 0) openBlas().set(blasThreadsToRestore);
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
