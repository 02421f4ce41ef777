// The interface every model family implements (GPT-2, BERT, Llama), and the per-layer attention
// they share: each layer hands its q, k, v to attend(), which runs softmax or the layer's linear
// attention according to the model's AttentionPlan, and records what a capture asked for.
//
// Shapes: B batch, T length, C hidden size, L layers, H query heads, H_kv key/value heads,
// D head dim, V vocab.
//   forward(ids [B, T] int64, options) -> logits [B, T, V] (LM heads) or [B, num_labels]
//   (sequence classification), hidden [B, T, C] (after the final norm), captures per layer.
// Converted layers and teacher mode: in "teacher" mode a converted layer still propagates the
// softmax output (the frozen teacher's activations, as stage-1 distillation needs) and computes
// its linear weights only for the capture; otherwise it propagates the linear output.
#pragma once
#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "engine/config/attention_types.h"
#include "engine/attention/linear_attention.h"
#include "engine/models/decode_cache.h"
#include "engine/config/model_config.h"
#include "engine/models/weight_source.h"

namespace hh::models {

// What to record per layer during a forward pass.
struct LayerCapture;

struct CaptureRequest {
  std::vector<int64_t> layers;   // empty = every layer
  // q, k after projection (and RoPE), v (k, v expanded to H heads), and the layer's hidden input
  bool queriesKeys = false;
  bool softmaxWeights = true;    // [B, H, T, T], also for converted layers (the reference)
  bool linearWeights = true;     // [B, H, T, T], converted layers only (quadratic form)
  bool outputs = false;          // per-head attention outputs of both kinds (output-MSE loss)
  bool keepGraph = false;        // keep autograd history on linear weights/outputs (distillation)
  // Converted layers of the additive rule without a window hand over their features (with q and k)
  // instead of both kinds of [B, H, T, T] weights: for the fused distillation loss
  // (jobs::distillationLoss, engine/cuda/distill_loss_torch.h).
  bool additiveFeatures = false;
  // When set, each layer's capture is handed here as soon as the layer has run instead of being
  // kept in ForwardOutput::captures, so at most one layer's [B, H, T, T] tensors are alive at a
  // time (distillation backpropagates layer by layer; the probe reduces each layer to numbers).
  std::function<void(LayerCapture&)> consume;
  bool wants(int64_t layer) const;
};

struct LayerCapture {
  int64_t layer = -1;
  torch::Tensor queries;         // [B, H, T, D]
  torch::Tensor keys;            // [B, H, T, D]
  torch::Tensor values;          // [B, H, T, D]
  torch::Tensor hidden;          // [B, T, C]: what the layer's linear attention gets (its gates)
  torch::Tensor softmaxWeights;  // [B, H, T, T] (masked entries 0)
  torch::Tensor linearWeights;   // [B, H, T, T] or undefined for softmax layers
  torch::Tensor softmaxOutput;   // [B, H, T, D] (outputs requested)
  torch::Tensor linearOutput;    // [B, H, T, D] (outputs requested, converted layers)
  // additiveFeatures requested and the layer qualifies: phi(q), phi(k) [B, H, T, F] (with their
  // graph under keepGraph), the rule's normaliser eps, and queries and keys as above; neither
  // weights tensor is then captured.
  torch::Tensor queryFeatures, keyFeatures;
  double normaliserEps = 0.0;
};

struct ForwardOptions {
  torch::Tensor attentionMask;   // [B, T], 1 = real token, 0 = padding (undefined = all real)
  torch::Tensor tokenTypes;      // [B, T] int64 (BERT; undefined = zeros)
  const CaptureRequest* capture = nullptr;
  bool teacher = false;          // converted layers propagate softmax (see above)
  attn::AttentionForm form = attn::AttentionForm::Chunked;  // linear layers' form
  bool computeLogits = true;     // false: stop after the last layer (stage 1 needs no head)
  int64_t stopAfterLayer = -1;   // >= 0: run layers 0..stopAfterLayer only (no final norm, no head)
  // Generation (causal models, no padding): positions start at cache->position, softmax layers
  // attend to the cached keys, linear layers continue their recurrent state (see decode_cache.h).
  // Captures are not taken in this mode.
  DecodeCache* cache = nullptr;
  // Optional [1] int64 on the model's device: the first token's position, read on the device
  // instead of taken from cache->position, so one recorded decode step serves every position
  // (generation/decode_graph.h). The cache's position must still say the same.
  torch::Tensor positionStart;
};

struct ModelOutput {
  torch::Tensor logits;
  torch::Tensor hidden;
  std::vector<LayerCapture> captures;  // in layer order, only the requested layers
};

class TransformerModel : public torch::nn::Module {
 public:
  explicit TransformerModel(ModelConfig config) : config_(std::move(config)) {}
  ~TransformerModel() override = default;

  virtual ModelOutput forward(const torch::Tensor& ids, const ForwardOptions& options = {}) = 0;
  // Copies every weight from `source` (shapes checked against the config; throws FormatError).
  virtual void loadWeights(WeightSource& source) = 0;
  // The weights under their Hugging Face names (Conv1D transposed back), for saving.
  virtual std::vector<std::pair<std::string, torch::Tensor>> exportWeights() const = 0;

  const ModelConfig& config() const { return config_; }
  int64_t layerCount() const { return config_.layers; }
  // The language-model head's weight [V, C] (logits = hidden W^T, no bias), tied or not; undefined
  // for models whose head is anything else (a classifier, BERT's transform).
  virtual torch::Tensor outputEmbedding() const { return {}; }

  // Replaces the per-layer attention: linear layers get a fresh LinearAttention (feature maps at
  // their initialisation), softmax layers drop theirs. Heads, head dim and causality come from
  // the model. Records the plan in config().plan.
  void setAttentionPlan(const AttentionPlan& plan);
  // The layer's linear attention, or nullptr for a softmax layer.
  attn::LinearAttention linearAttention(int64_t layer) const;
  // Trainable parameters of the linear attentions (feature maps, rule gates), HF-style names
  // "hedgehog.layers.<i>.<param>"; what `saveAdapters` writes and stage 1 trains.
  std::vector<std::pair<std::string, torch::Tensor>> adapterTensors() const;
  // Loads adapter tensors written by adapterTensors() (from a converted folder or adapter file).
  void loadAdapters(WeightSource& source);
  int64_t parameterCount() const;
  // Freezes (requires_grad = false) every parameter, then unfreezes the adapters if asked.
  void freezeAllBut(bool adapters);
  // Mixed precision. Activations in `dtype` (e.g. bfloat16) whatever dtype the weights hold: the
  // embeddings' output is cast to it, and weights of another dtype are cast where used (linear
  // projections, norms), differentiably, so fp32 weights that train mix with bf16 frozen ones.
  // Norms, softmax, the linear forms' normalisers and states, and the losses compute in fp32.
  // Unset (the default): the activations follow the weights.
  void setComputeDtype(torch::ScalarType dtype);
  std::optional<torch::ScalarType> computeDtype() const { return computeDtype_; }
  // Every parameter that requires grad and holds a half-precision dtype is converted to fp32 in
  // place (its master weights: the optimizer updates fp32 values). Call after freezing and
  // before building the optimizer.
  void keepTrainableInFloat32();
  // An empty cache for generation: a recurrent state for every linear layer, a KV cache (with
  // room for `reservePositions` tokens, 0 = grow as needed) for every softmax layer. With
  // `teacher`, converted layers get KV caches too and run softmax (the original model).
  DecodeCache newCache(int64_t batch = 1, int64_t reservePositions = 0, bool teacher = false) const;

 protected:
  struct LayerContext {
    const ForwardOptions* options = nullptr;
    torch::Tensor keyMask;   // bool [B, T] or undefined
    std::vector<LayerCapture>* captures = nullptr;
    DecodeCache* cache = nullptr;
    int64_t positionOffset = 0;  // absolute position of the first token (cache->position)
    torch::Tensor positions;     // [T] int64 on the ids' device: every token's absolute position
  };
  // q [B, H, T, D]; k, v [B, H_kv, T, D]; hidden [B, T, C] (gated rules). Returns [B, H, T, D].
  // `scale` multiplies q.k (0 = 1/sqrt(D)).
  torch::Tensor attend(int64_t layer, torch::Tensor q, torch::Tensor k, torch::Tensor v, const torch::Tensor& hidden,
                       const LayerContext& context);
  // attend() in generation mode: q [B,H,T,D]; k, v [B,H_kv,T,D] (before GQA expansion).
  torch::Tensor attendCached(int64_t layer, const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                             const torch::Tensor& hidden, DecodeCache& cache);
  // Called by forward() after the last layer in generation mode: advances cache->position.
  static void advanceCache(const LayerContext& context, int64_t tokens);
  // lm_head.weight [V, C] ("what": the config keys behind the shape): required when `head` exists
  // (untied); used even when the config says tied if it differs from `embedding` (then `head` is
  // made and the config says untied).
  void loadLmHead(WeightSource& source, const torch::Tensor& embedding, torch::nn::Linear& head,
                  const std::string& what);
  // Decoder classification: the scores [B, T, labels] at each row's last real token -> [B, labels].
  static torch::Tensor lastTokenScores(const torch::Tensor& scores, const torch::Tensor& attentionMask);
  LayerContext makeContext(const torch::Tensor& ids, const ForwardOptions& options,
                           std::vector<LayerCapture>* captures) const;
  // The embeddings' output [B, T, C] in the compute dtype (unchanged when none is set).
  torch::Tensor toCompute(const torch::Tensor& embedded) const;

  ModelConfig config_;
  std::vector<attn::LinearAttention> linear_;  // [L], nullptr for softmax layers
  std::optional<torch::ScalarType> computeDtype_;
};

using ModelPtr = std::shared_ptr<TransformerModel>;

}  // namespace hh::models
