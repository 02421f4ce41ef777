// Host emulation of the CUDA runtime API that the Hedgehog kernels (engine/cuda) call: the types,
// error codes and the few functions, enough to compile the .cu files as C++ and run them on the
// CPU (tests/engine/cuda, suite engine.cuda.hedgehog_cuda_emulated). "Device" memory is host
// memory; every call is synchronous. Not a general CUDA emulator: only what the kernels use.
// Found before the toolkit's header by include order (tests/CMakeLists.txt, HH_CUDA_EMULATION).
#pragma once
#include <cstddef>

#if !defined(HH_CUDA_EMULATION)
#error "cuda_emulation/cuda_runtime_api.h is for HH_CUDA_EMULATION builds only"
#endif

enum cudaError_t { cudaSuccess = 0, cudaErrorInvalidValue = 1, cudaErrorLaunchOutOfResources = 701 };
struct CUstream_st;
using cudaStream_t = CUstream_st*;

enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize = 8 };
enum cudaDeviceAttr {
  cudaDevAttrMultiProcessorCount = 16,
  cudaDevAttrComputeCapabilityMajor = 75,
  cudaDevAttrMaxSharedMemoryPerBlockOptin = 97,
};

namespace hh_emu {
// What the emulated device reports: an H100's numbers (compute capability 9, 132 SMs, 227 KiB of
// shared memory a block may opt in to).
constexpr int kMultiProcessors = 132;
constexpr int kSharedMemoryOptin = 232448;
}  // namespace hh_emu

inline const char* cudaGetErrorString(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "no error (emulated)";
    case cudaErrorInvalidValue: return "invalid argument (emulated)";
    case cudaErrorLaunchOutOfResources: return "too many resources requested for launch (emulated)";
  }
  return "unknown error (emulated)";
}
inline cudaError_t cudaGetLastError() { return cudaSuccess; }
inline cudaError_t cudaDeviceSynchronize() { return cudaSuccess; }

inline cudaError_t cudaGetDevice(int* device) {
  if (!device) return cudaErrorInvalidValue;
  *device = 0;
  return cudaSuccess;
}

inline cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device) {
  if (!value || device != 0) return cudaErrorInvalidValue;
  switch (attr) {
    case cudaDevAttrMultiProcessorCount: *value = hh_emu::kMultiProcessors; return cudaSuccess;
    case cudaDevAttrComputeCapabilityMajor: *value = 9; return cudaSuccess;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin: *value = hh_emu::kSharedMemoryOptin; return cudaSuccess;
  }
  return cudaErrorInvalidValue;
}

// Raising a kernel's dynamic shared memory limit: refused past what the device offers, as CUDA does.
template <class Kernel>
cudaError_t cudaFuncSetAttribute(Kernel, cudaFuncAttribute attr, int value) {
  if (attr != cudaFuncAttributeMaxDynamicSharedMemorySize) return cudaErrorInvalidValue;
  return value >= 0 && value <= hh_emu::kSharedMemoryOptin ? cudaSuccess : cudaErrorInvalidValue;
}
