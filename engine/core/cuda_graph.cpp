#include "engine/core/cuda_graph.h"

#include <torch/cuda.h>

#include <stdexcept>

#if HH_CUDA
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace hh {

bool cudaGraphsAvailable() { return HH_CUDA != 0; }

#if HH_CUDA
struct CudaGraph::Impl {
  at::cuda::CUDAGraph graph;
};

CudaGraph::CudaGraph(const std::string& device, const std::function<void()>& warmup, const std::function<void()>& body)
    : impl_(std::make_unique<Impl>()) {
  if (device.rfind("cuda:", 0) != 0) throw std::invalid_argument("a CUDA graph needs a CUDA device, not \"" + device + "\"");
  const auto index = static_cast<c10::DeviceIndex>(std::stoi(device.substr(5)));
  const c10::cuda::CUDAGuard deviceGuard(index);
  // Recording needs a stream other than the default one; the side stream starts after the work
  // queued so far, and the current stream continues after the warm-up.
  torch::cuda::synchronize(index);
  const auto side = c10::cuda::getStreamFromPool(/*isHighPriority=*/false, index);
  {
    const c10::cuda::CUDAStreamGuard streamGuard(side);
    warmup();
    side.synchronize();
    impl_->graph.capture_begin();
    body();
    impl_->graph.capture_end();
  }
  torch::cuda::synchronize(index);
}

void CudaGraph::replay() { impl_->graph.replay(); }
#else
struct CudaGraph::Impl {};

CudaGraph::CudaGraph(const std::string& device, const std::function<void()>&, const std::function<void()>&) {
  throw std::invalid_argument("CUDA graphs on \"" + device +
                              "\": this build has no CUDA (configure with -DHH_CUDA=ON against a CUDA LibTorch)");
}

void CudaGraph::replay() {}
#endif

CudaGraph::~CudaGraph() = default;

}  // namespace hh
