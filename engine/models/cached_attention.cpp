// Generation mode of TransformerModel::attend (declared in transformer_model.h): softmax layers
// against a KV cache, linear layers through their recurrent state.
#include <torch/types.h>

#include <cmath>

#include "engine/attention/softmax_attention.h"
#include "engine/models/transformer_model.h"

namespace hh::models {

DecodeCache TransformerModel::newCache(int64_t batch, int64_t reservePositions, bool teacher) const {
  TORCH_CHECK(batch >= 1, "a decode cache needs batch >= 1");
  DecodeCache cache;
  cache.batch = batch;
  cache.layers.resize(static_cast<size_t>(config_.layers));
  const auto params = parameters();
  const auto device = params.empty() ? torch::Device(torch::kCPU) : params.front().device();
  const auto dtype = params.empty() ? torch::kFloat : params.front().scalar_type();
  for (size_t l = 0; l < cache.layers.size(); ++l) {
    auto& entry = cache.layers[l];
    const auto linear = l < linear_.size() ? linear_[l] : nullptr;
    entry.linear = linear && !teacher;
    if (entry.linear) entry.state = linear->initialState(batch, device, dtype);
    else if (reservePositions > 0) entry.kv.reserve(reservePositions, torch::Tensor());
  }
  return cache;
}

void TransformerModel::advanceCache(const LayerContext& context, int64_t tokens) {
  if (context.cache) context.cache->position += tokens;
}

torch::Tensor TransformerModel::attendCached(int64_t layer, const torch::Tensor& qIn, const torch::Tensor& k,
                                             const torch::Tensor& v, const torch::Tensor& hidden, DecodeCache& cache) {
  // qIn [B,H,T,D]; k, v [B,Hkv,T,D] -> [B,H,T,D]
  const int64_t T = qIn.size(2), D = qIn.size(3), groups = qIn.size(1) / k.size(1);
  double scale = config_.attentionScale > 0 ? config_.attentionScale : 1.0 / std::sqrt(double(D));
  if (config_.scaleByInverseLayer) scale /= double(layer + 1);
  auto& entry = cache.layers[static_cast<size_t>(layer)];

  if (entry.linear) {
    auto linear = linear_[static_cast<size_t>(layer)];
    TORCH_CHECK(linear, "layer ", layer, " has a recurrent state in the cache but no linear attention");
    // The linear forms see q scaled like attend() does (q * scale * sqrt(D)).
    const double qFactor = scale * std::sqrt(double(D));
    const auto q = std::abs(qFactor - 1.0) > 1e-12 ? qIn * qFactor : qIn;
    // Grouped heads: kv head j serves query heads j*g .. (j+1)*g - 1 (repeat_interleave on dim 1,
    // written as an expand: device work only, as a recorded CUDA graph step needs).
    const auto expand = [&](const torch::Tensor& x) {
      return x.unsqueeze(2).expand({x.size(0), x.size(1), groups, T, D}).reshape({x.size(0), x.size(1) * groups, T, D});
    };
    const auto kk = groups > 1 ? expand(k) : k;
    const auto vv = groups > 1 ? expand(v) : v;
    return T == 1 ? linear->step(entry.state, q, kk, vv, hidden) : linear->prefill(entry.state, q, kk, vv, hidden);
  }

  entry.kv.append(k, v);
  return attn::cachedSoftmaxAttention(qIn, entry.kv.keys(), entry.kv.values(), scale);
}

}  // namespace hh::models
