// Process-wide runtime set-up shared by the CLI, the workbench, tests and benchmarks:
// Torch's intra-op thread count (it starts at 1 on Debian's build), the compute device,
// and the engine version string.
#pragma once
#include <string>

namespace hh {

struct RuntimeInfo {
  int intraOpThreads = 1;   // threads Torch uses inside one op
  int hardwareThreads = 1;  // std::thread::hardware_concurrency()
  std::string device;       // where jobs run by default (device "auto"): "cpu" or "cuda:0 (NAME)"
  std::string torchVersion; // e.g. "1.13.0"
};

// Sets Torch's intra-op threads from HH_NUM_THREADS when set (> 0), else the process default
// (setDefaultThreadCount), else the hardware (hardwareThreadCount). Idempotent; returns what is
// in force afterwards.
RuntimeInfo initRuntime();
// The hardware's count: every hardware thread, but 1 on machines with two or fewer unless
// OpenMP's idle workers wait passively (OMP_WAIT_POLICY=passive, any case): spinning workers made
// two threads slower than one there, passive ones faster (docs/performance.md).
int hardwareThreadCount(unsigned hardwareThreads, const char* openMpWaitPolicy);
// The count initRuntime uses when HH_NUM_THREADS is not set (0 = from the hardware), e.g. the
// workbench leaving a core to its GUI thread; applied to the calling thread at once.
void setDefaultThreadCount(int threads);
// Sets Torch's intra-op threads, the calling thread's OpenMP threads and OpenBLAS's pool to n.
// Call it at the start of any thread that runs engine work (OpenMP settings are per thread).
void applyThreadCount(int threads);

// What is in force now, without changing anything.
RuntimeInfo runtimeInfo();

// While alive, OpenBLAS (when it is the BLAS) runs each call on the calling thread only: for the
// CPU kernels that run many small products inside their own parallel loop (the loop is the
// parallelism). Scopes may overlap, on one thread or several: the setting in force before the
// first of them opened comes back when the last of them closes, and applyThreadCount while one is
// open changes only what comes back.
class BlasSingleThreaded {
 public:
  BlasSingleThreaded();
  ~BlasSingleThreaded();
  BlasSingleThreaded(const BlasSingleThreaded&) = delete;
  BlasSingleThreaded& operator=(const BlasSingleThreaded&) = delete;

 private:
  bool counted_ = false;  // this scope took part in the count of open scopes
};

// Engine version ("0.1.0").
const char* engineVersion();

}  // namespace hh
