// The session's side of one layer of an inspection (model_session.h), as the model reaches it:
// the captured q, k of every layer in one forward pass, each layer's thumbnails and measures one
// head at a time, and the preview the view draws while the rest runs. Internal to the inspector's
// session (it reaches Torch: only session files include it).
#pragma once
#include <torch/types.h>

#include <cstdint>
#include <functional>
#include <vector>

#include "app/gui/inspector/model_session.h"
#include "engine/models/transformer_model.h"

namespace hh::gui::inspect {

// The S' x S' blocks of a T x T map that hold no valid pair (bool [1, 1, S', S']), S' = min(S, T):
// the same for every head of a text, computed once. valid [1, 1, T, T].
torch::Tensor emptyBlocks(const torch::Tensor& valid, int size);

// Every layer's q, k on the teacher's activations, as distillation sees them (no weights kept),
// each layer's handed to `consume` as soon as it has run.
void captureQueriesKeys(models::TransformerModel& model, const std::vector<int64_t>& ids,
                        std::function<void(models::LayerCapture&)> consume);

// The layer input a converted layer's gates read (gated, delta, decay rules); undefined where
// nothing reads it, so the inspector keeps [1, T, C] only for those layers.
torch::Tensor gateInput(const attn::LinearAttention& linear, const models::LayerCapture& c);

// One layer's thumbnails and measures into `result` (sized for every layer), one head at a time:
// one [T, T] softmax map and one linear map alive, not the layer's H of each (48 MB each at
// T = 1024, H = 12). `checkCancel` runs before each head and may throw.
void measureLayer(models::TransformerModel& model, const models::LayerCapture& c, const torch::Tensor& valid,
                  const torch::Tensor& empty, InspectResult& result, const std::function<void()>& checkCancel);

// Layer `layer`'s part of `result` (its thumbnails and measures filled), `done` layers measured.
LayerPreview preview(const InspectResult& result, int layer, int done);

}  // namespace hh::gui::inspect
