// One layer of an inspection (see session_layers.h).
#include "app/gui/inspector/session_layers.h"

#include <algorithm>
#include <limits>

#include "app/gui/common/session_tensors.h"
#include "engine/attention/softmax_attention.h"
#include "engine/jobs/job_support.h"

namespace hh::gui::inspect {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Block max of one head's weights to the blocks of `empty` ([1, 1, S', S']), NaN where a block
// has no valid pair. p [T, T] float -> S' x S' row-major.
std::vector<float> thumbnail(const torch::Tensor& p, const torch::Tensor& empty) {
  const int64_t t = p.size(0);
  const auto pooled = torch::adaptive_max_pool2d(p.view({1, 1, t, t}), {empty.size(2), empty.size(3)});
  return toFloatVector(std::get<0>(pooled).masked_fill(empty, kNaN));
}

}  // namespace

// The S' x S' blocks of a T x T map that hold no valid pair (bool [1, 1, S', S']), S' = min(S, T):
// the same for every head of a text, computed once.
torch::Tensor emptyBlocks(const torch::Tensor& valid, int size) {
  const int64_t t = valid.size(-1);
  const int64_t s = std::min<int64_t>(size, t);
  return std::get<0>(torch::adaptive_max_pool2d(valid.to(torch::kFloat).view({1, 1, t, t}), {s, s})) <= 0;
}

// Layer `layer`'s part of `result` (its thumbnails and measures filled), `done` layers measured.
LayerPreview preview(const InspectResult& result, int layer, int done) {
  LayerPreview p;
  p.layer = layer;
  p.done = done;
  p.layers = result.layers;
  p.heads = result.heads;
  p.thumbSize = result.thumbSize;
  const size_t first = size_t(layer) * size_t(result.heads), last = first + size_t(result.heads);
  p.thumbnails.assign(result.thumbnails.begin() + first, result.thumbnails.begin() + last);
  const auto heads = [&](const jobs::HeadTable& t) {
    return std::vector<double>(t.values.begin() + first, t.values.begin() + last);
  };
  p.entropySoftmax = heads(result.measures.entropySoftmax);
  p.kl = heads(result.measures.kl);
  p.entropyLinear = heads(result.measures.entropyLinear);
  if (result.recall) {  // scored before the inspection: known for every layer already
    p.needleSoftmax.assign(result.recall->teacherMass.begin() + first, result.recall->teacherMass.begin() + last);
    p.needleConverted.assign(result.recall->convertedMass.begin() + first, result.recall->convertedMass.begin() + last);
  }
  return p;
}

// Every layer's q, k on the teacher's activations, as distillation sees them (no weights kept),
// each layer's handed to `consume` as soon as it has run.
void captureQueriesKeys(models::TransformerModel& model, const std::vector<int64_t>& ids,
                        std::function<void(models::LayerCapture&)> consume) {
  models::CaptureRequest capture;
  capture.queriesKeys = true;  // weights are recomputed per head: [H, T, T] per layer at most
  capture.softmaxWeights = false;
  capture.linearWeights = false;
  capture.consume = std::move(consume);
  models::ForwardOptions options;
  options.capture = &capture;
  options.teacher = true;  // every layer sees the teacher's activations, as distillation does
  options.computeLogits = false;
  const auto idTensor = torch::tensor(ids, torch::kLong).unsqueeze(0).to(jobs::deviceOf(model));  // [1, T]
  model.forward(idTensor, options);
}

// The layer input a converted layer's gates read (gated, delta, decay rules); undefined where
// nothing reads it, so the inspector keeps [1, T, C] only for those layers.
torch::Tensor gateInput(const attn::LinearAttention& linear, const models::LayerCapture& c) {
  return linear && linear->config().rule.rule != attn::UpdateRule::Additive ? c.hidden : torch::Tensor();
}

// One layer's thumbnails and measures into `result`, one head at a time: one [T, T] softmax map
// and one linear map alive, not the layer's H of each (48 MB each at T = 1024, H = 12), the
// allocator reusing their blocks.
void measureLayer(models::TransformerModel& model, const models::LayerCapture& c, const torch::Tensor& valid,
                  const torch::Tensor& empty, InspectResult& result, const std::function<void()>& checkCancel) {
  const int l = int(c.layer), H = result.heads;
  auto linear = model.linearAttention(l);
  result.converted = result.converted || bool(linear);
  // a: a converted layer's own weights (its rule's), this head's alone: [1, 1, T, T].
  const auto measureHead = [&](int64_t h, const torch::Tensor& a) {
    checkCancel();
    const auto qh = c.queries.narrow(1, h, 1), kh = c.keys.narrow(1, h, 1);  // [1, 1, T, D]
    const auto p = attn::softmaxWeights(qh, kh, model.config().causal);    // [1, 1, T, T]
    result.thumbnails[size_t(l * H + h)] = thumbnail(p[0][0], empty);
    result.measures.measureHeads(l, int(h), p, a, torch::Tensor(), valid);
  };
  if (linear)  // the features and gates once for the layer, the T x T one head at a time
    linear->forEachHeadWeights(c.queries, c.keys, gateInput(linear, c), measureHead);
  else
    for (int h = 0; h < H; ++h) measureHead(h, torch::Tensor());
}

}  // namespace hh::gui::inspect
