// One decode step recorded as a CUDA graph and replayed per token. At batch 1 a step is a few
// hundred small kernels and launching them sets the time (on an H100, 2.6 ms a GPT-2 small token
// against a 0.11 ms floor, docs/performance_gpu.md); replayed, they are one launch.
//
// It serves models whose every layer is recurrent and updates its state in place: Hedgehog
// layers (additive rule, no window) on a GPU, where the fused CUDA step kernel serves them
// (HH_CUDA_KERNELS). The step reads its position on the device (ForwardOptions::positionStart)
// and the states keep their addresses, so one recording serves every token; the cache's host
// side (positions) is advanced after each replay. Anything else is refused with the reason:
// softmax layers (their KV cache grows every token), a state the step replaces instead of
// updating, a build without CUDA graphs.
#pragma once
#include <torch/types.h>

#include <memory>

#include "engine/core/cuda_graph.h"
#include "engine/models/transformer_model.h"

namespace hh::gen {

class DecodeGraph {
 public:
  // Records one step of `model` (eval mode, on a CUDA device) at `cache`'s batch. The cache must
  // outlive this object and only be advanced through step() from now on. Throws
  // std::invalid_argument naming what stands in the way.
  DecodeGraph(models::TransformerModel& model, models::DecodeCache& cache);

  // tokens [B, 1] int64 on the model's device -> logits [B, 1, V], a tensor the next step
  // overwrites (copy what must outlive it). Advances the cache by one token.
  torch::Tensor step(const torch::Tensor& tokens);

 private:
  void checkInPlace(const std::vector<torch::Tensor>& before) const;

  models::TransformerModel& model_;
  models::DecodeCache& cache_;
  models::ForwardOptions options_;
  torch::Tensor tokens_;    // [B, 1] int64: the recorded step's input
  torch::Tensor position_;  // [1] int64: the recorded step's position, advanced by the step itself
  torch::Tensor logits_;    // [B, 1, V]: the recorded step's output
  std::unique_ptr<CudaGraph> graph_;
};

}  // namespace hh::gen
