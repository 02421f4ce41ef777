// The attention plan: per layer, softmax (the original) or a linear attention from the core,
// built from a job's plan keys (one attention on chosen layers, or one spec per layer). Its JSON
// form, stored in a converted model's config.json, is in model_config.h.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "engine/config/attention_types.h"

namespace hh::models {

// Per-layer attention: softmax (the original) or a linear attention from the core.
struct LayerAttentionSpec {
  bool linear = false;
  attn::LinearAttentionConfig config;  // used when linear; heads/headDim are filled by the model
};

struct AttentionPlan {
  std::vector<LayerAttentionSpec> layers;  // one per layer; empty means all softmax

  bool anyLinear() const;
  int64_t linearLayerCount() const;
  // Every layer linear with the same map and rule (the usual full conversion).
  static AttentionPlan uniform(int64_t layers, const attn::LinearAttentionConfig& config);
  // Only the named layers linear; the others keep softmax.
  static AttentionPlan hybrid(int64_t layers, const std::vector<int64_t>& linearLayers,
                              const attn::LinearAttentionConfig& config);
  // One spec per layer in attn::parseLayerAttention's form ("softmax", "hedgehog_window(16)", ...)
  // and back. fromSpecs throws std::invalid_argument naming the layer.
  static AttentionPlan fromSpecs(const std::vector<std::string>& specs);
  std::vector<std::string> specs() const;
  // For logs: "hedgehog_window(64) in all 4 layers", or the specs joined by ", ".
  std::string summary() const;
};

// The keys a job's config uses to describe its plan: either `specs`, one per layer, or one
// attention (feature_map, rule, window) on `layers` (empty = all) with softmax elsewhere.
struct PlanKeys {
  std::string featureMap = "hedgehog";
  std::string rule = "additive";
  int64_t window = 0;  // > 0: hedgehog_window with this many keys
  std::vector<int64_t> layers;
  std::vector<std::string> specs;  // wins when not empty; must list every layer
  uint64_t seed = 0;               // the maps' seed (Performer)
};
// Throws std::invalid_argument naming the problem (a spec count that is not the model's layers).
AttentionPlan planFromKeys(const PlanKeys& keys, int64_t layerCount);
// What planFromKeys checks without the model: every name, the window, the rule's maps, the layer
// indices' sign, throwing "<where>: <problem>". Config parsers call it so that a bad key fails
// before any work.
void checkPlanKeys(const PlanKeys& keys, const std::string& where);

}  // namespace hh::models
