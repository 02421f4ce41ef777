#include "engine/models/transformer_model.h"

#include <ATen/core/grad_mode.h>
#include <torch/types.h>

#include <cmath>

#include "engine/attention/softmax_attention.h"
#include "engine/io/safetensors.h"

namespace hh::models {

bool CaptureRequest::wants(int64_t layer) const {
  return layers.empty() || std::find(layers.begin(), layers.end(), layer) != layers.end();
}

void TransformerModel::setAttentionPlan(const AttentionPlan& plan) {
  if (!plan.layers.empty() && static_cast<int64_t>(plan.layers.size()) != config_.layers)
    throw std::invalid_argument("attention plan has " + std::to_string(plan.layers.size()) + " layers, the model " +
                                std::to_string(config_.layers));
  for (size_t l = 0; l < linear_.size(); ++l)
    if (linear_[l]) unregister_module("linear_attention_" + std::to_string(l));
  linear_.assign(static_cast<size_t>(config_.layers), nullptr);
  config_.plan = plan;
  for (size_t l = 0; l < plan.layers.size(); ++l) {
    auto& spec = config_.plan.layers[l];
    if (!spec.linear) continue;
    spec.config = linearAttentionConfigOf(config_, l);
    auto module = attn::LinearAttention(spec.config, config_.hiddenSize);
    // Follow the model's device and dtype.
    const auto params = parameters();
    if (!params.empty()) module->to(params.front().device(), params.front().scalar_type());
    linear_[l] = register_module("linear_attention_" + std::to_string(l), module);
  }
}

attn::LinearAttention TransformerModel::linearAttention(int64_t layer) const {
  if (layer < 0 || layer >= static_cast<int64_t>(linear_.size())) return nullptr;
  return linear_[static_cast<size_t>(layer)];
}

std::vector<std::pair<std::string, torch::Tensor>> TransformerModel::adapterTensors() const {
  std::vector<std::pair<std::string, torch::Tensor>> out;
  for (size_t l = 0; l < linear_.size(); ++l) {
    if (!linear_[l]) continue;
    for (const auto& item : linear_[l]->named_parameters(true))
      out.emplace_back("hedgehog.layers." + std::to_string(l) + "." + item.key(), item.value());
    for (const auto& item : linear_[l]->named_buffers(true))
      out.emplace_back("hedgehog.layers." + std::to_string(l) + "." + item.key(), item.value());
  }
  return out;
}

void TransformerModel::loadAdapters(WeightSource& source) {
  at::NoGradGuard noGrad;
  for (auto& [name, tensor] : adapterTensors()) {
    source.load(tensor, name, tensor.sizes().vec(), "the attention plan in config.json");
  }
}

void TransformerModel::loadLmHead(WeightSource& s, const torch::Tensor& embedding, torch::nn::Linear& head,
                                  const std::string& what) {
  const int64_t C = config_.hiddenSize, V = config_.vocabSize;
  auto weight = s.takeOptional("lm_head.weight", {V, C}, what);
  if (weight.defined() && !head && !torch::equal(weight, embedding)) {
    head = register_module("lm_head", torch::nn::Linear(torch::nn::LinearOptions(C, V).bias(false)));
    config_.tieWordEmbeddings = false;
  }
  if (!head) return;
  if (!weight.defined())
    throw io::FormatError(s.path() + ": missing tensor \"lm_head.weight\" (tie_word_embeddings is false)");
  at::NoGradGuard noGrad;
  head->weight.copy_(weight);
}

int64_t TransformerModel::parameterCount() const {
  int64_t n = 0;
  for (const auto& p : parameters()) n += p.numel();
  return n;
}

void TransformerModel::freezeAllBut(bool adapters) {
  for (auto& p : parameters()) p.set_requires_grad(false);
  if (adapters)
    for (auto& [name, t] : adapterTensors())
      if (t.is_floating_point() && name.find("projection") == std::string::npos) t.set_requires_grad(true);
}

void TransformerModel::setComputeDtype(torch::ScalarType dtype) { computeDtype_ = dtype; }

void TransformerModel::keepTrainableInFloat32() {
  at::NoGradGuard noGrad;
  for (auto& p : parameters())
    if (p.requires_grad() && (p.scalar_type() == torch::kBFloat16 || p.scalar_type() == torch::kHalf))
      p.set_data(p.data().to(torch::kFloat));
}

torch::Tensor TransformerModel::toCompute(const torch::Tensor& embedded) const {
  return computeDtype_ ? embedded.to(*computeDtype_) : embedded;
}

torch::Tensor TransformerModel::lastTokenScores(const torch::Tensor& scores, const torch::Tensor& attentionMask) {
  // scores [B,T,labels]; HF pools the rightmost real token, wherever the padding is (left or
  // right): the largest position whose mask is 1 (position 0 for a row with none).
  const int64_t B = scores.size(0), T = scores.size(1);
  const auto options = torch::TensorOptions(torch::kLong).device(scores.device());
  const auto last = attentionMask.defined()
                        ? (torch::arange(T, options).unsqueeze(0) * attentionMask.to(options).ne(0)).amax(1)  // [B]
                        : torch::full({B}, T - 1, options);
  return scores.index({torch::arange(B, options), last});
}

TransformerModel::LayerContext TransformerModel::makeContext(const torch::Tensor& ids, const ForwardOptions& options,
                                                             std::vector<LayerCapture>* captures) const {
  LayerContext context;
  context.options = &options;
  context.captures = captures;
  if (options.cache) {
    TORCH_CHECK(config_.causal, config_.modelType, " is bidirectional: generation needs a causal model");
    TORCH_CHECK(!options.attentionMask.defined(), "generation does not take an attention mask (no padding)");
    TORCH_CHECK(options.cache->layers.size() == static_cast<size_t>(config_.layers), "the decode cache has ",
                options.cache->layers.size(), " layers, the model ", config_.layers);
    TORCH_CHECK(ids.size(0) == options.cache->batch, "the decode cache was made for batch ", options.cache->batch,
                ", the ids have ", ids.size(0), " rows");
    context.cache = options.cache;
    context.positionOffset = options.cache->position;
  }
  if (options.attentionMask.defined()) {
    TORCH_CHECK(options.attentionMask.sizes() == ids.sizes(), "attention mask must be [B,T] like the ids");
    context.keyMask = options.attentionMask.to(ids.device()).to(torch::kBool);
  }
  const auto steps = torch::arange(ids.size(1), torch::TensorOptions(torch::kLong).device(ids.device()));  // [T]
  if (options.positionStart.defined()) {
    TORCH_CHECK(options.positionStart.numel() == 1 && options.positionStart.device() == ids.device(),
                "positionStart must be one int64 on the ids' device");
    context.positions = steps + options.positionStart.to(torch::kLong).reshape({1});
  } else {
    context.positions = context.positionOffset == 0 ? steps : steps + context.positionOffset;
  }
  return context;
}

namespace {

// q [B,H,T,D] scaled so that the 1/sqrt(D) of the attention forms gives the model's own scale.
torch::Tensor scaleQueries(const ModelConfig& config, int64_t layer, torch::Tensor q) {
  double scale = config.attentionScale > 0 ? config.attentionScale : 1.0 / std::sqrt(double(config.headDim));
  if (config.scaleByInverseLayer) scale /= double(layer + 1);
  const double qFactor = scale * std::sqrt(double(config.headDim));
  return std::abs(qFactor - 1.0) > 1e-12 ? q * qFactor : q;
}

struct SoftmaxResult {
  torch::Tensor weights;  // [B,H,T,T], >= fp32; only when asked to keep them
  torch::Tensor output;   // [B,H,T,D]
};

SoftmaxResult softmaxForward(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, bool causal,
                             const torch::Tensor& keyMask, bool keepWeights) {
  const bool needsGradient =
      at::GradMode::is_enabled() && (q.requires_grad() || k.requires_grad() || v.requires_grad());
  // Inference, or a frozen teacher's layer (stage 1), that keeps no weights: a block of query
  // rows at a time, not [B,H,T,T] at once.
  if (!needsGradient && !keepWeights) return {{}, attn::softmaxAttentionInBlocks(q, k, v, causal, keyMask)};
  // Training through softmax on a GPU, weights not kept: PyTorch's fused attention where it serves.
  if (q.is_cuda() && !keepWeights) return {{}, attn::softmaxAttention(q, k, v, causal, keyMask)};
  auto weights = attn::softmaxWeights(q, k, causal, keyMask);
  return {weights, torch::matmul(weights.to(v.scalar_type()), v)};
}

// What one layer computed, for its capture.
struct LayerTensors {
  torch::Tensor q, k, v;                                 // [B,H,T,D], k and v expanded to H heads
  torch::Tensor hidden;                                  // [B,T,C] or undefined
  attn::LinearAttentionImpl::AdditiveFeatures features;  // defined: captured in place of both weights
  SoftmaxResult softmax;
  torch::Tensor linearOutput;  // [B,H,T,D] when the linear form ran
};

LayerCapture makeCapture(int64_t layer, const CaptureRequest& request, const LayerTensors& t,
                         attn::LinearAttention linear, const torch::Tensor& keyMask) {
  const auto kept = [&](const torch::Tensor& x) { return request.keepGraph ? x : x.detach(); };
  const bool byFeatures = t.features.fq.defined();
  LayerCapture c;
  c.layer = layer;
  if (request.queriesKeys) {
    c.values = t.v.detach();
    if (t.hidden.defined()) c.hidden = t.hidden.detach();
  }
  if (request.queriesKeys || byFeatures) {
    c.queries = t.q.detach();
    c.keys = t.k.detach();
  }
  if (byFeatures) {
    c.queryFeatures = kept(t.features.fq);
    c.keyFeatures = kept(t.features.fk);
    c.normaliserEps = t.features.eps;
  }
  if (t.softmax.weights.defined()) c.softmaxWeights = t.softmax.weights.detach();
  if (linear && request.linearWeights && !byFeatures)
    c.linearWeights = kept(linear->weights(t.q, t.k, t.hidden, keyMask));
  if (request.outputs) {
    c.softmaxOutput = t.softmax.output.detach();
    if (t.linearOutput.defined()) c.linearOutput = kept(t.linearOutput);
  }
  return c;
}

}  // namespace

torch::Tensor TransformerModel::attend(int64_t layer, torch::Tensor q, torch::Tensor k, torch::Tensor v,
                                       const torch::Tensor& hidden, const LayerContext& context) {
  // q [B,H,T,D]; k, v [B,Hkv,T,D]
  if (context.cache) return attendCached(layer, std::move(q), k, v, hidden, *context.cache);
  const int64_t groups = config_.heads / config_.kvHeads;
  if (groups > 1) {  // GQA: kv head j serves query heads j*g .. (j+1)*g - 1
    k = k.repeat_interleave(groups, 1);
    v = v.repeat_interleave(groups, 1);
  }
  q = scaleQueries(config_, layer, std::move(q));

  const auto& options = *context.options;
  const auto* request = options.capture;
  const bool capturing = request && request->wants(layer);
  attn::LinearAttention linear = linear_.empty() ? attn::LinearAttention(nullptr) : linear_[static_cast<size_t>(layer)];
  const bool useLinear = linear && !options.teacher;
  const bool wantOutputs = capturing && request->outputs;

  LayerTensors t{q, k, v, hidden, {}, {}, {}};
  if (capturing && request->additiveFeatures && linear) t.features = linear->additiveFeatures(q, k, context.keyMask);
  const bool wantSoftmaxWeights = capturing && request->softmaxWeights && !t.features.fq.defined();
  if (!useLinear || wantSoftmaxWeights || wantOutputs)
    t.softmax = softmaxForward(q, k, v, config_.causal, context.keyMask, wantSoftmaxWeights);
  if (linear && (useLinear || wantOutputs))
    t.linearOutput = linear->forward(q, k, v, hidden, options.form, context.keyMask);
  const torch::Tensor out = useLinear ? t.linearOutput : t.softmax.output;

  if (capturing) {
    auto c = makeCapture(layer, *request, t, linear, context.keyMask);
    if (request->consume) request->consume(c);
    else context.captures->push_back(std::move(c));
  }
  return out;
}

}  // namespace hh::models
