// A recorded sequence of GPU work replayed at the cost of one launch (a CUDA graph), for steps
// made of many small kernels whose launching, not their work, sets the time (decoding one token
// at batch 1: docs/performance_gpu.md). Torch-free header; the recording is LibTorch's
// at::cuda::CUDAGraph in a build configured with HH_CUDA, and unavailable elsewhere.
#pragma once
#include <functional>
#include <memory>
#include <string>

namespace hh {

// Whether this build can record CUDA graphs (HH_CUDA).
bool cudaGraphsAvailable();

class CudaGraph {
 public:
  // On `device` ("cuda:N"): runs `warmup` once on a side stream (first-use allocations and library
  // handles must not happen while recording), then records `body` without running it. What
  // `body` allocates stays allocated for the graph; what it reads and writes must keep its
  // address from replay to replay. Throws std::invalid_argument without CUDA graphs or for a
  // non-CUDA device, and LibTorch's error when the recording fails (e.g. a host copy in `body`).
  CudaGraph(const std::string& device, const std::function<void()>& warmup, const std::function<void()>& body);
  ~CudaGraph();
  CudaGraph(const CudaGraph&) = delete;
  CudaGraph& operator=(const CudaGraph&) = delete;

  // Runs the recorded work again on the device's current stream (asynchronously).
  void replay();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace hh
