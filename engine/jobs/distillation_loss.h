// Stage 1's loss (paper eq. 4; the formula is in distill_job.h) on a model's attention captures,
// and the layer-by-layer forward that adds and backpropagates it one layer at a time. Used by the
// distill job, its tests and `hedgehog bench`.
#pragma once
#include <string>
#include <vector>

#include "engine/models/transformer_model.h"

namespace hh::jobs {

// Whether stage 1 should capture features for a fused distillation loss
// (CaptureRequest::additiveFeatures) on `device`, for batches whose layers have `pairs` = B H T T
// query-key pairs each. HH_FUSED_DISTILL_LOSS in the environment:
//   unset  the CPU kernel (attn::fusedDistillLossCpu) where the build has a BLAS and a layer's
//          weights would take at least 4 MiB in fp32 (pairs >= 2^20); below that the materialised
//          weights, which stay in cache, measured faster (docs/performance.md); not the CUDA kernel
//   on     the CPU kernel at any size, and the CUDA one where the build has the fused CUDA kernels
//          (not yet run on a GPU)
//   off    neither: both weights materialised
bool fusedDistillLossRequested(const torch::Device& device, int64_t pairs);

// The distillation loss of one batch's captures (exposed for tests and benchmarks). A capture with
// features (CaptureRequest::additiveFeatures) goes through a fused kernel where one takes them.
torch::Tensor distillationLoss(const std::vector<models::LayerCapture>& captures, bool causal, const torch::Tensor& mask,
                               const std::string& loss, double outputMse);

// One forward of stage 1, layer by layer: the teacher runs on ids [B, T] and each layer `capture`
// names adds its distillationLoss term as soon as the layer has run, so one layer's [B, H, T, T]
// tensors are alive at a time. Returns the summed loss.
//   Backward   each term is backpropagated at once (a layer's term depends on its own feature
//              map only: the teacher's softmax output goes on), so the gradients equal those of
//              the summed loss; every term is, finite or not (a non-finite sum fails the step
//              before the optimizer moves); the sum is read from the device once, at the end
//   LossOnly   the loss alone (held-out evaluation, under NoGradGuard)
// `options` are the teacher's (computeLogits, stopAfterLayer; capture is set here); `poison`
// multiplies every term by NaN (a testing aid).
enum class LayerPass { Backward, LossOnly };
double distillLayerByLayer(models::TransformerModel& model, const torch::Tensor& ids, models::CaptureRequest& capture,
                           models::ForwardOptions options, const std::string& loss, double outputMse, LayerPass pass,
                           bool poison = false);

// Window layers (hedgehog_window): each head's mix set on ids [B, T] by
// LinearAttentionImpl::calibrateWindowMix from the teacher's queries and keys, so that the window's
// softmax and the far feature-map term start on one scale. A no-op without window layers.
void calibrateWindowMix(models::TransformerModel& model, const torch::Tensor& ids);

}  // namespace hh::jobs
