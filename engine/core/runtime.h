// Process-wide runtime set-up shared by the CLI, the workbench, tests and benchmarks:
// Torch's intra-op thread count (it starts at 1 on Debian's build), the compute device,
// and the engine version string.
#pragma once
#include <string>

namespace hh {

struct RuntimeInfo {
  int intraOpThreads = 1;   // threads Torch uses inside one op
  int hardwareThreads = 1;  // std::thread::hardware_concurrency()
  std::string device;       // "cpu" or "cuda:0 (NAME)"
  std::string torchVersion; // e.g. "1.13.0"
};

// Sets Torch's intra-op threads from the hardware (or HH_NUM_THREADS when set, > 0).
// Idempotent; returns what is in force afterwards.
RuntimeInfo initRuntime();
// Sets Torch's intra-op threads, the calling thread's OpenMP threads and OpenBLAS's pool to n.
// Call it at the start of any thread that runs engine work (OpenMP settings are per thread).
void applyThreadCount(int threads);

// What is in force now, without changing anything.
RuntimeInfo runtimeInfo();

// Engine version ("0.1.0").
const char* engineVersion();

}  // namespace hh
