#include "engine/core/device.h"

#include <torch/cuda.h>

#include <stdexcept>

#if HH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDACachingAllocator.h>
#endif

namespace hh {

namespace {
bool allDigits(const std::string& s) {
  if (s.empty() || s.size() > 4) return false;
  for (char c : s)
    if (c < '0' || c > '9') return false;
  return true;
}
}  // namespace

bool cudaBuild() { return HH_CUDA != 0; }

int cudaDeviceCount() { return cudaBuild() ? static_cast<int>(torch::cuda::device_count()) : 0; }

std::string resolveDevice(const std::string& spec) {
  if (spec == "cpu") return "cpu";
  if (spec == "auto") return cudaDeviceCount() > 0 ? "cuda:0" : "cpu";
  int index = 0;
  if (spec == "cuda") {
    index = 0;
  } else if (spec.rfind("cuda:", 0) == 0 && allDigits(spec.substr(5))) {
    index = std::stoi(spec.substr(5));
  } else {
    throw std::invalid_argument("device \"" + spec + "\": expected auto, cpu, cuda or cuda:N");
  }
  if (!cudaBuild())
    throw std::invalid_argument("device \"" + spec +
                                "\": this build has no CUDA (configure with -DHH_CUDA=ON against a CUDA LibTorch; "
                                "docs/gpu.md), use --device cpu");
  const int count = cudaDeviceCount();
  if (count == 0) throw std::invalid_argument("device \"" + spec + "\": no CUDA GPU is visible to this process");
  if (index >= count)
    throw std::invalid_argument("device \"" + spec + "\": only " + std::to_string(count) + " CUDA GPU" +
                                (count == 1 ? " is" : "s are") + " visible (cuda:0" +
                                (count > 1 ? " to cuda:" + std::to_string(count - 1) : std::string()) + ")");
  return "cuda:" + std::to_string(index);
}

namespace {
// The GPU index of "cuda:N"; -1 for anything else.
int cudaIndex(const std::string& device) { return device.rfind("cuda:", 0) == 0 ? std::stoi(device.substr(5)) : -1; }
}  // namespace

void synchronizeDevice(const std::string& device) {
  if (cudaIndex(device) >= 0) torch::cuda::synchronize(cudaIndex(device));
}

void resetDevicePeakMemory(const std::string& device) {
#if HH_CUDA
  if (cudaIndex(device) >= 0)
    c10::cuda::CUDACachingAllocator::resetPeakStats(static_cast<c10::DeviceIndex>(cudaIndex(device)));
#endif
  (void)device;
}

int64_t devicePeakMemoryBytes(const std::string& device) {
#if HH_CUDA
  if (cudaIndex(device) >= 0) {
    const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(static_cast<c10::DeviceIndex>(cudaIndex(device)));
    return stats.allocated_bytes[static_cast<size_t>(c10::CachingDeviceAllocator::StatType::AGGREGATE)].peak;
  }
#endif
  (void)device;
  return -1;
}

void releaseCachedDeviceMemory(const std::string& device) {
#if HH_CUDA
  if (cudaIndex(device) >= 0) c10::cuda::CUDACachingAllocator::emptyCache();
#endif
  (void)device;
}

std::string deviceLabel(const std::string& device) {
#if HH_CUDA
  if (device.rfind("cuda:", 0) == 0) {
    const auto* props = at::cuda::getDeviceProperties(static_cast<c10::DeviceIndex>(std::stoi(device.substr(5))));
    return device + " (" + props->name + ")";
  }
#endif
  return device;
}

}  // namespace hh
