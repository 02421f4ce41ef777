#include "engine/config/attention_types.h"

#include <charconv>
#include <cmath>
#include <stdexcept>
#include <utility>

namespace hh::attn {

namespace {
template <typename E>
struct NamedValue {
  E value;
  const char* name;
};

const NamedValue<FeatureMapKind> kFeatureMapNames[] = {
    {FeatureMapKind::Hedgehog, "hedgehog"},   {FeatureMapKind::HedgehogSoftmax, "hedgehog_softmax"},
    {FeatureMapKind::T2R, "t2r"},             {FeatureMapKind::Elu, "elu"},
    {FeatureMapKind::Performer, "performer"}, {FeatureMapKind::CosFormer, "cosformer"},
    {FeatureMapKind::Taylor, "taylor"},       {FeatureMapKind::ExpT, "exp_t"},
    {FeatureMapKind::Identity, "identity"},   {FeatureMapKind::Linear, "linear"},
};
const NamedValue<UpdateRule> kRuleNames[] = {
    {UpdateRule::Additive, "additive"},
    {UpdateRule::Gated, "gated"},
    {UpdateRule::Delta, "delta"},
    {UpdateRule::Decay, "decay"},
    {UpdateRule::DecayMao, "decay_mao"},
    {UpdateRule::DeltaMao, "delta_mao"},
};
const NamedValue<AttentionForm> kFormNames[] = {
    {AttentionForm::Quadratic, "quadratic"},
    {AttentionForm::Chunked, "chunked"},
    {AttentionForm::Recurrent, "recurrent"},
};

template <typename E, size_t N>
std::string nameOf(const NamedValue<E> (&table)[N], E value) {
  for (const auto& entry : table)
    if (entry.value == value) return entry.name;
  return "unknown";
}

template <typename E, size_t N>
E parse(const NamedValue<E> (&table)[N], const std::string& name, const char* what) {
  std::string allowed;
  for (const auto& entry : table) {
    if (name == entry.name) return entry.value;
    allowed += allowed.empty() ? "" : ", ";
    allowed += entry.name;
  }
  throw std::invalid_argument("unknown " + std::string(what) + " '" + name + "' (allowed: " + allowed + ")");
}
}  // namespace

std::string toString(FeatureMapKind kind) { return nameOf(kFeatureMapNames, kind); }
std::string toString(UpdateRule rule) { return nameOf(kRuleNames, rule); }
std::string toString(AttentionForm form) { return nameOf(kFormNames, form); }

FeatureMapKind parseFeatureMapKind(const std::string& name) { return parse(kFeatureMapNames, name, "feature map"); }

FeatureMapConfig parseFeatureMapSpec(const std::string& spec) {
  FeatureMapConfig config;
  const auto eq = spec.find('=');
  config.kind = parseFeatureMapKind(spec.substr(0, eq));
  if (eq == std::string::npos) return config;
  if (config.kind != FeatureMapKind::ExpT)
    throw std::invalid_argument("feature map '" + spec + "': only exp_t takes a value (exp_t=<t>)");
  // from_chars, not stod: strtod follows LC_NUMERIC, which the workbench's Qt sets from the
  // user's locale (de_DE would refuse "exp_t=0.5" and take "exp_t=0,5", which the CLI refuses).
  const char* first = spec.data() + eq + 1;
  const char* last = spec.data() + spec.size();
  double t = 0;
  const auto [end, status] = std::from_chars(first, last, t);
  if (first == last || status != std::errc() || end != last || !(t > 0) || !std::isfinite(t))
    throw std::invalid_argument("feature map '" + spec + "': t must be a positive number");
  config.expT = t;
  return config;
}

std::string featureMapSpec(const FeatureMapConfig& config) {
  if (config.kind != FeatureMapKind::ExpT || config.expT == 1.0) return toString(config.kind);
  // to_chars with precision 6 writes what printf's %g writes in the C locale, whatever LC_NUMERIC is.
  char buffer[32];
  const auto written = std::to_chars(buffer, buffer + sizeof buffer, config.expT, std::chars_format::general, 6);
  return "exp_t=" + std::string(buffer, written.ptr);
}
UpdateRule parseUpdateRule(const std::string& name) { return parse(kRuleNames, name, "update rule"); }
AttentionForm parseAttentionForm(const std::string& name) { return parse(kFormNames, name, "attention form"); }

const std::vector<FeatureMapKind>& allFeatureMapKinds() {
  static const std::vector<FeatureMapKind> kinds = [] {
    std::vector<FeatureMapKind> out;
    for (const auto& entry : kFeatureMapNames) out.push_back(entry.value);
    return out;
  }();
  return kinds;
}

const std::vector<FeatureMapKind>& untrainedComparisonKinds() {
  static const std::vector<FeatureMapKind> kinds = [] {
    std::vector<FeatureMapKind> out;
    for (const auto kind : allFeatureMapKinds())
      if (kind != FeatureMapKind::Linear) out.push_back(kind);
    return out;
  }();
  return kinds;
}

const std::vector<UpdateRule>& allUpdateRules() {
  static const std::vector<UpdateRule> rules = {UpdateRule::Additive, UpdateRule::Gated, UpdateRule::Delta,
                                                UpdateRule::Decay, UpdateRule::DecayMao, UpdateRule::DeltaMao};
  return rules;
}

int64_t featureDimOf(const FeatureMapConfig& config) {
  const int64_t d = config.headDim;
  switch (config.kind) {
    case FeatureMapKind::Hedgehog:
    case FeatureMapKind::HedgehogSoftmax:
    case FeatureMapKind::CosFormer:
      return 2 * d;
    case FeatureMapKind::Performer:
      return config.randomFeatures > 0 ? config.randomFeatures : 2 * d;
    case FeatureMapKind::Taylor:
      return 1 + d + d * d;
    case FeatureMapKind::T2R:
    case FeatureMapKind::Elu:
    case FeatureMapKind::ExpT:
    case FeatureMapKind::Identity:
    case FeatureMapKind::Linear:
      return d;
  }
  return d;
}

bool isTrainable(FeatureMapKind kind) {
  return kind == FeatureMapKind::Hedgehog || kind == FeatureMapKind::HedgehogSoftmax || kind == FeatureMapKind::T2R ||
         kind == FeatureMapKind::Linear;
}

UpdateRule formRule(UpdateRule rule) { return rule == UpdateRule::DecayMao ? UpdateRule::Decay : rule; }

bool hasNonNegativeFeatures(FeatureMapKind kind) {
  return kind != FeatureMapKind::Taylor && kind != FeatureMapKind::Identity && kind != FeatureMapKind::Linear;
}

std::string ruleFeatureMapConflict(const LinearAttentionConfig& config) {
  if (config.rule.rule != UpdateRule::DeltaMao || hasNonNegativeFeatures(config.featureMap.kind)) return "";
  return "the delta_mao rule divides features by their sum, which the signed " + toString(config.featureMap.kind) +
         " map can bring to zero: use a map with non-negative features (hedgehog, elu, t2r, ...)";
}

std::string describe(const LinearAttentionConfig& config) {
  std::string name = featureMapSpec(config.featureMap);
  if (config.window > 0) name += "_window(" + std::to_string(config.window) + ")";
  if (config.rule.rule != UpdateRule::Additive) name += "/" + toString(config.rule.rule);
  return name;
}

std::optional<LinearAttentionConfig> parseLayerAttention(const std::string& spec) {
  if (spec == "softmax") return std::nullopt;
  LinearAttentionConfig config;
  std::string map = spec;
  if (const auto slash = map.find('/'); slash != std::string::npos) {
    config.rule.rule = parseUpdateRule(map.substr(slash + 1));
    map = map.substr(0, slash);
  }
  if (const auto at = map.find("_window"); at != std::string::npos) {
    const std::string size = map.substr(at + 7);  // "" or "(W)"
    config.window = kDefaultWindow;
    if (!size.empty()) {
      size_t used = 0;
      try {
        if (size.size() > 2 && size.front() == '(' && size.back() == ')') config.window = std::stoll(size.substr(1), &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used + 2 != size.size() || config.window < 1)
        throw std::invalid_argument("attention '" + spec + "': the window is written _window(W), W >= 1");
    }
    if (config.rule.rule != UpdateRule::Additive)
      throw std::invalid_argument("attention '" + spec + "': the window hybrid takes the additive rule");
    map = map.substr(0, at);
  }
  config.featureMap = parseFeatureMapSpec(map);
  return config;
}

}  // namespace hh::attn
