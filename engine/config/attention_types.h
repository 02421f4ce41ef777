// Names and settings shared by every attention form: the feature maps, the update rules of the
// causal state, the three computational forms, and their configuration structs.
// Shapes everywhere in engine/attention: B batch, H heads, T length, D head dim, F feature dim.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace hh::attn {

// phi, applied per head to queries and keys (docs/design.md, "The math").
// Hedgehog's u = Wx + b is clamped to [-kHedgehogClamp, kHedgehogClamp] before exp: a product of
// a query's and a key's features then stays below e^60 and a sum over 10^12 of them within fp32
// (unclamped, distilling a real Llama ended in NaN: docs/jobs.md, "The stories demo"). Where |u| < 30
// the map is exactly [exp(u), exp(-u)]; past the clamp its gradient is 0.
constexpr double kHedgehogClamp = 30.0;

enum class FeatureMapKind {
  Hedgehog,         // [exp(u), exp(-u)], u = clamp(Wx+b, +-kHedgehogClamp), W per head init identity, b = 0; F = 2D
  HedgehogSoftmax,  // [softmax(Wx+b), softmax(-(Wx+b))] over the feature dim; F = 2D
  T2R,              // ReLU(Wx+b), learnable per head, init identity; F = D
  Elu,              // elu(x) + 1; F = D
  Performer,        // FAVOR+ positive random features, m seeded orthogonal projections; F = m
  CosFormer,        // [ReLU(x) cos(pi i / 2M), ReLU(x) sin(pi i / 2M)], i the position; F = 2D
  Taylor,           // [1, x / d^(1/4), vec(x x^T) / (sqrt(2) sqrt(d))]; F = 1 + D + D^2
  ExpT,             // exp(t x) element-wise; F = D
  Identity,         // x; F = D
  Linear,           // Wx+b, learnable per head, init identity (Mao 2022's projection, no positivity); F = D
};

// How the causal state S (F x D) and normalizer z (F) evolve from token to token.
enum class UpdateRule {
  Additive,  // S_t = S_{t-1} + phi(k_t) v_t^T, z_t = z_{t-1} + phi(k_t); y = phi(q)^T S / (phi(q)^T z + eps)
  Gated,     // S_t = g_t S_{t-1} + phi(k_t) v_t^T, z likewise, g_t in (0,1) a scalar per head
  Delta,     // S_t = S_{t-1} + beta_t phi(k_t) (v_t - S_{t-1}^T phi(k_t))^T, features L2-normalised, no z
  Decay,     // S_t = (a_t b_t^T) * S_{t-1} + phi(k_t) v_t^T, a_t in (0,1)^F, b_t in (0,1)^D, no z
  // Mao 2022's decaying fast weights: Decay with its gate biases b_f (key side) and b_z (value
  // side) from uniform gate initialisation (sigmoid(b) uniform in [1/n, 1 - 1/n], n the channels)
  // and v scaled per channel by 1 - sigmoid(b_z) as initialised (his W_v rescaling), so the state
  // starts as a moving average of the values rather than a sum. The forms compute it as Decay
  // on the scaled values (LinearAttentionImpl does the scaling).
  DecayMao,
  // Mao 2022's delta rule: Delta with the features sum-normalised (phi / sum phi, Schlag et al.
  // 2021's choice for positive maps; it keeps beta |phi|^2 <= 1, so the update stays contractive)
  // and the write strength beta = sigmoid(x W_b + b_b) starting near 0.007 (b_b = logit(0.007)):
  // the state starts as a small, slowly written memory. Needs a feature map with non-negative
  // features (ruleFeatureMapConflict).
  DeltaMao,
};

// Three ways to compute the same causal output (tested equal to an fp64 brute force).
enum class AttentionForm {
  Quadratic,  // materialise the T x T weights: distillation, inspection
  Chunked,    // intra-chunk quadratic + inter-chunk state carry: training and prefill
  Recurrent,  // one token at a time carrying (S, z): generation
};

struct FeatureMapConfig {
  FeatureMapKind kind = FeatureMapKind::Hedgehog;
  int64_t heads = 1;                 // H: trainable maps keep one MLP per head
  int64_t headDim = 64;              // D
  int64_t randomFeatures = 0;        // Performer's m; 0 means 2 * D
  double expT = 1.0;                 // ExpT's t
  int64_t cosformerMaxLength = 4096; // CosFormer's M: positions must stay below it
  uint64_t seed = 0;                 // Performer's projection seed
};

struct RuleOptions {
  UpdateRule rule = UpdateRule::Additive;
  bool causal = true;        // non-causal is defined for the additive rule only
  int64_t chunkSize = 64;    // chunked form's chunk length
  double eps = 1e-6;         // normaliser guard: y = num / (den + eps) (additive, gated)
};

struct LinearAttentionConfig {
  FeatureMapConfig featureMap;
  RuleOptions rule;
  // > 0: the window hybrid (hedgehog_window, engine/attention/window_attention.h): softmax over
  // the last `window` keys, the feature map over every key before them; additive rule only.
  int64_t window = 0;
};
// The name of the attention a linear config describes, for logs and tables: "hedgehog",
// "hedgehog_window(64)", "t2r/gated" (the map, the window, the rule when it is not additive).
std::string describe(const LinearAttentionConfig& config);
// The window a new hedgehog_window layer gets when none is named.
constexpr int64_t kDefaultWindow = 64;
// One layer's attention as plans write it: "softmax" (nullopt), or "<map>[_window[(W)]][/<rule>]",
// e.g. "hedgehog", "hedgehog_window" (W = kDefaultWindow), "hedgehog_window(16)", "t2r/gated",
// "exp_t=2". describe() writes this form back. Throws std::invalid_argument naming the problem.
std::optional<LinearAttentionConfig> parseLayerAttention(const std::string& spec);

std::string toString(FeatureMapKind kind);
std::string toString(UpdateRule rule);
std::string toString(AttentionForm form);
// Parse names as written by toString ("hedgehog", "hedgehog_softmax", "t2r", "elu", "performer",
// "cosformer", "taylor", "exp_t", "identity", "linear"; "additive", "gated", "delta", "decay",
// "decay_mao", "delta_mao";
// "quadratic", "chunked", "recurrent"). Throws std::invalid_argument naming the allowed values.
FeatureMapKind parseFeatureMapKind(const std::string& name);
UpdateRule parseUpdateRule(const std::string& name);
AttentionForm parseAttentionForm(const std::string& name);
// A feature map with its parameter, as tables and experiments name it: a kind name, or
// "exp_t=<t>" (t > 0; "exp_t" alone is t = 1). featureMapSpec writes it back ("exp_t=2").
FeatureMapConfig parseFeatureMapSpec(const std::string& spec);
std::string featureMapSpec(const FeatureMapConfig& config);

const std::vector<FeatureMapKind>& allFeatureMapKinds();
// The maps worth comparing untrained (evaluate's default table, `hedgehog compare`, the
// comparison view): every kind but linear, which starts as the identity and would repeat its row.
const std::vector<FeatureMapKind>& untrainedComparisonKinds();
const std::vector<UpdateRule>& allUpdateRules();

// Feature dimension F that a map produces for head dim D.
int64_t featureDimOf(const FeatureMapConfig& config);
// Whether the map has trainable parameters (hedgehog, hedgehog_softmax, t2r).
bool isTrainable(FeatureMapKind kind);
// The rule the forms compute for `rule` (DecayMao is Decay on scaled values; DeltaMao is its
// own form, Delta with sum-normalised features).
UpdateRule formRule(UpdateRule rule);
// Whether the map's features are never negative (what sum normalisation needs): every kind but
// taylor, identity and linear.
bool hasNonNegativeFeatures(FeatureMapKind kind);
// Why this rule cannot run on this feature map ("" when it can): delta_mao divides features by
// their sum, which a signed map can bring to zero.
std::string ruleFeatureMapConflict(const LinearAttentionConfig& config);
// The starting write strength of delta_mao, sigmoid(b_b).
constexpr double kDeltaMaoInitialBeta = 0.007;

}  // namespace hh::attn
