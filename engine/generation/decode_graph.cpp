#include "engine/generation/decode_graph.h"

#include <stdexcept>
#include <string>
#include <vector>

#include "engine/core/device.h"

namespace hh::gen {

namespace {

// Every tensor a layer's recurrent state holds, kStateTensors a layer in a fixed order.
constexpr size_t kStateTensors = 7;
std::vector<torch::Tensor> stateTensors(const models::DecodeCache& cache) {
  std::vector<torch::Tensor> all;
  for (const auto& layer : cache.layers) {
    const auto& s = layer.state;
    const torch::Tensor* held[kStateTensors] = {&s.S, &s.z, &s.lastDecay, &s.keyShift, &s.ringKeys, &s.ringValues,
                                                &s.ringFeatures};
    for (const auto* t : held) all.push_back(*t);
  }
  return all;
}

std::vector<int64_t> statePositions(const models::DecodeCache& cache) {
  std::vector<int64_t> positions;
  for (const auto& layer : cache.layers) positions.push_back(layer.state.position);
  return positions;
}

void setPositions(models::DecodeCache& cache, int64_t position, const std::vector<int64_t>& states) {
  cache.position = position;
  for (size_t l = 0; l < cache.layers.size(); ++l) cache.layers[l].state.position = states[l];
}

}  // namespace

DecodeGraph::DecodeGraph(models::TransformerModel& model, models::DecodeCache& cache) : model_(model), cache_(cache) {
  if (!cudaGraphsAvailable())
    throw std::invalid_argument("decoding with a CUDA graph needs a build with CUDA (-DHH_CUDA=ON)");
  const auto params = model.parameters();
  if (params.empty() || !params.front().is_cuda())
    throw std::invalid_argument("decoding with a CUDA graph needs the model on a CUDA device");
  for (size_t l = 0; l < cache.layers.size(); ++l) {
    const auto where = "decoding with a CUDA graph: layer " + std::to_string(l);
    if (!cache.layers[l].linear)
      throw std::invalid_argument(where + " attends with softmax, whose KV cache grows every token; it needs every layer recurrent");
    // What the recorded step may not depend on: the host-side position (a window's ring slot,
    // cosFormer's angles) and state the step replaces (checked after the warm-up).
    const auto& c = model.linearAttention(static_cast<int64_t>(l))->config();
    if (c.featureMap.kind != attn::FeatureMapKind::Hedgehog || c.rule.rule != attn::UpdateRule::Additive || c.window > 0)
      throw std::invalid_argument(where + " is not a Hedgehog layer with the additive rule and no window, the layers it records");
  }
  const auto device = params.front().device();
  const std::string deviceName = "cuda:" + std::to_string(device.index() < 0 ? 0 : device.index());
  tokens_ = torch::zeros({cache.batch, 1}, torch::TensorOptions(torch::kLong).device(device));
  position_ = torch::full({1}, cache.position, torch::TensorOptions(torch::kLong).device(device));
  options_.cache = &cache_;
  options_.positionStart = position_;

  // The warm-up runs a real step; the states and positions are put back after it and after the
  // recording (which advances the host-side positions but runs nothing).
  const auto before = stateTensors(cache);
  std::vector<torch::Tensor> saved;
  for (const auto& t : before) saved.push_back(t.defined() ? t.clone() : t);
  const int64_t position = cache.position;
  const auto positions = statePositions(cache);
  auto restore = [&] {
    for (size_t i = 0; i < before.size(); ++i)
      if (before[i].defined()) before[i].copy_(saved[i]);
    position_.fill_(position);
    setPositions(cache_, position, positions);
  };
  const auto warmup = [&] {
    at::NoGradGuard noGrad;
    model_.forward(tokens_, options_);
    checkInPlace(before);
    restore();
  };
  const auto body = [&] {
    at::NoGradGuard noGrad;
    logits_ = model_.forward(tokens_, options_).logits;
    position_.add_(1);
  };
  try {
    graph_ = std::make_unique<CudaGraph>(deviceName, warmup, body);
  } catch (...) {
    setPositions(cache_, position, positions);
    throw;
  }
  setPositions(cache_, position, positions);
}

void DecodeGraph::checkInPlace(const std::vector<torch::Tensor>& before) const {
  const auto after = stateTensors(cache_);
  for (size_t i = 0; i < before.size(); ++i) {
    if (before[i].defined() == after[i].defined() && (!before[i].defined() || before[i].data_ptr() == after[i].data_ptr()))
      continue;
    throw std::invalid_argument("decoding with a CUDA graph: layer " + std::to_string(i / kStateTensors) +
                                "'s step replaces its recurrent state instead of updating it in place (the fused CUDA "
                                "step kernel does: Hedgehog, additive rule, no window, head dim 64 or 128, or 32 under HH_FUSED_CUDA=on)");
  }
}

torch::Tensor DecodeGraph::step(const torch::Tensor& tokens) {
  TORCH_CHECK(tokens.sizes() == tokens_.sizes(), "DecodeGraph::step: tokens must be ", tokens_.sizes(), ", got ",
              tokens.sizes());
  const auto& config = model_.config();
  TORCH_CHECK(config.modelType != "gpt2" || cache_.position < config.maxPositions, "generation reached the model's ",
              config.maxPositions, " learned positions");
  tokens_.copy_(tokens);
  graph_->replay();
  cache_.position += 1;
  for (auto& layer : cache_.layers) layer.state.position += 1;
  return logits_;
}

}  // namespace hh::gen
