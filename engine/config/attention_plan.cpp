#include "engine/config/attention_plan.h"

#include <algorithm>
#include <stdexcept>

namespace hh::models {

bool AttentionPlan::anyLinear() const {
  return linearLayerCount() > 0;
}
int64_t AttentionPlan::linearLayerCount() const {
  int64_t n = 0;
  for (const auto& l : layers) n += l.linear ? 1 : 0;
  return n;
}
AttentionPlan AttentionPlan::uniform(int64_t layers, const attn::LinearAttentionConfig& config) {
  AttentionPlan plan;
  plan.layers.assign(static_cast<size_t>(layers), LayerAttentionSpec{true, config});
  return plan;
}
AttentionPlan AttentionPlan::hybrid(int64_t layers, const std::vector<int64_t>& linearLayers,
                                    const attn::LinearAttentionConfig& config) {
  AttentionPlan plan;
  plan.layers.assign(static_cast<size_t>(layers), LayerAttentionSpec{false, config});
  for (int64_t l : linearLayers) {
    if (l < 0 || l >= layers)
      throw std::invalid_argument("layer " + std::to_string(l) + " is out of range (0.." + std::to_string(layers - 1) +
                                  ")");
    plan.layers[static_cast<size_t>(l)].linear = true;
  }
  return plan;
}

AttentionPlan AttentionPlan::fromSpecs(const std::vector<std::string>& specs) {
  AttentionPlan plan;
  for (size_t l = 0; l < specs.size(); ++l) {
    try {
      const auto linear = attn::parseLayerAttention(specs[l]);
      plan.layers.push_back(linear ? LayerAttentionSpec{true, *linear} : LayerAttentionSpec{});
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument("plan, layer " + std::to_string(l) + ": " + e.what());
    }
  }
  return plan;
}

std::vector<std::string> AttentionPlan::specs() const {
  std::vector<std::string> out;
  for (const auto& l : layers) out.push_back(l.linear ? attn::describe(l.config) : "softmax");
  return out;
}

std::string AttentionPlan::summary() const {
  const auto all = specs();
  if (all.empty()) return "softmax";
  if (std::all_of(all.begin(), all.end(), [&](const std::string& s) { return s == all.front(); }))
    return all.front() + " in all " + std::to_string(all.size()) + " layers";
  std::string out;
  for (const auto& s : all) out += (out.empty() ? "" : ", ") + s;
  return out;
}

namespace {

// The one attention that `keys` puts on its layers (when it lists no specs).
attn::LinearAttentionConfig linearFromKeys(const PlanKeys& keys) {
  attn::LinearAttentionConfig linear;
  linear.featureMap = attn::parseFeatureMapSpec(keys.featureMap);
  linear.rule.rule = attn::parseUpdateRule(keys.rule);
  linear.window = keys.window;
  if (keys.window < 0) throw std::invalid_argument("window must be 0 (none) or positive");
  if (keys.window > 0 && linear.rule.rule != attn::UpdateRule::Additive)
    throw std::invalid_argument("the window hybrid takes the additive rule, not " + keys.rule);
  if (const auto conflict = attn::ruleFeatureMapConflict(linear); !conflict.empty())
    throw std::invalid_argument(conflict);
  for (const int64_t l : keys.layers)
    if (l < 0) throw std::invalid_argument("layer " + std::to_string(l) + " is out of range (layers count from 0)");
  return linear;
}

}  // namespace

void checkPlanKeys(const PlanKeys& keys, const std::string& where) {
  try {
    if (!keys.specs.empty())
      AttentionPlan::fromSpecs(keys.specs);
    else
      linearFromKeys(keys);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(where + ": " + e.what());
  }
}

AttentionPlan planFromKeys(const PlanKeys& keys, int64_t layerCount) {
  AttentionPlan plan;
  if (!keys.specs.empty()) {
    if (static_cast<int64_t>(keys.specs.size()) != layerCount)
      throw std::invalid_argument("the plan lists " + std::to_string(keys.specs.size()) + " layers, the model has " +
                                  std::to_string(layerCount));
    plan = AttentionPlan::fromSpecs(keys.specs);
  } else {
    const auto linear = linearFromKeys(keys);
    plan = keys.layers.empty() ? AttentionPlan::uniform(layerCount, linear)
                               : AttentionPlan::hybrid(layerCount, keys.layers, linear);
  }
  for (auto& l : plan.layers) l.config.featureMap.seed = keys.seed;
  return plan;
}

}  // namespace hh::models
