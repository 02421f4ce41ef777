// The compute device a job runs on, chosen by name: "auto" (the GPU when this build has CUDA and
// one is visible, else the CPU), "cpu", "cuda" (= cuda:0) or "cuda:N". The header is Torch-free:
// callers build torch::Device from the canonical name resolveDevice returns.
//
// CUDA is reachable only in a build configured with -DHH_CUDA=ON against a CUDA LibTorch (off by
// default; docs/gpu.md). In the default CPU build "auto" is the CPU and "cuda" is refused with a
// message that says so; nothing falls back to the CPU silently.
#pragma once
#include <cstdint>
#include <string>

namespace hh {

// The canonical device for `spec`: "cpu" or "cuda:N". Throws std::invalid_argument naming the
// spec and why it cannot be had (not a device name; no CUDA in this build; no GPU visible; N out
// of range).
std::string resolveDevice(const std::string& spec);

// What to show for a canonical device: "cpu", or "cuda:0 (NVIDIA H100 80GB HBM3)".
std::string deviceLabel(const std::string& device);

// Whether this build was configured with CUDA (HH_CUDA), and how many GPUs it sees (0 without).
bool cudaBuild();
int cudaDeviceCount();

// For timing and memory readings on a canonical device ("cpu" or "cuda:N"): waits until the
// device's queued work is done (a no-op on the CPU); resets and reads the peak bytes the caching
// allocator has handed out since (CUDA only; the CPU has no such allocator: -1, see
// core/process_memory.h for the process's peak RSS).
void synchronizeDevice(const std::string& device);
void resetDevicePeakMemory(const std::string& device);
int64_t devicePeakMemoryBytes(const std::string& device);
// Hands the caching allocator's unused blocks back to the driver (CUDA only; after an
// out-of-memory error, so that the next allocation starts from a clean pool).
void releaseCachedDeviceMemory(const std::string& device);

}  // namespace hh
