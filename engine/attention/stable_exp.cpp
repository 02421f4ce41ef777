// exp_t's shifted features (stable_exp.h). The shifts are computed and applied in fp32 (fp64 for
// fp64 inputs): c_f reaches the size of t x itself (80 and more), where bf16's spacing is 0.5 and
// a rounded shift would scale features by up to e^0.25.
#include "engine/attention/stable_exp.h"

#include <limits>

#include "engine/attention/form_helpers.h"
#include "engine/attention/linear_attention.h"

namespace hh::attn {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// exp(tq + c - b) and exp(tk - c), b = max_f (tq + seen) per query (queries that see no key: the
// largest tq + c): tq, tk [B,H,T,F]; c [B,H,1,F]; seen [B,H,T,F] or [B,H,1,F], the largest t k of
// each feature among the keys each query sees.
ShiftedFeatures features(const torch::Tensor& tq, const torch::Tensor& tk, const torch::Tensor& c,
                         const torch::Tensor& seen) {
  const auto queries = tq.detach();
  auto b = (queries + seen).amax(-1, true);  // [B,H,T,1]
  b = torch::where(torch::isfinite(b), b, (queries + c).amax(-1, true));
  return {torch::exp(tq + c - b), torch::exp(tk - c)};
}

}  // namespace

bool usesShiftedExp(const LinearAttentionConfig& config) {
  return config.featureMap.kind == FeatureMapKind::ExpT && config.window == 0 &&
         (config.rule.rule == UpdateRule::Additive || config.rule.rule == UpdateRule::Gated);
}

ShiftedFeatures shiftedExpFeatures(const torch::Tensor& q, const torch::Tensor& k, double t, bool causal,
                                   const torch::Tensor& keyMask) {
  // q, k [B,H,T,D] -> features [B,H,T,D] in q's dtype
  const auto type = detail::accumulateType(q);
  const auto tq = q.to(type) * t;
  auto tk = k.to(type) * t;
  if (keyMask.defined()) {  // padded keys at -inf: feature 0, no part in c or b
    TORCH_CHECK(keyMask.dim() == 2 && keyMask.size(0) == k.size(0) && keyMask.size(1) == k.size(2),
                "keyMask must be [B,T] matching k");
    tk = tk.masked_fill(keyMask.to(torch::kBool).logical_not().unsqueeze(1).unsqueeze(-1), -kInf);
  }
  const auto keys = tk.detach();
  auto c = keys.amax(2, true);                                     // [B,H,1,F]
  c = torch::where(torch::isfinite(c), c, torch::zeros_like(c));  // a row without a real key
  // b_i: the largest t q_if + t k_jf over the keys query i sees (causal: j <= i), so that its
  // largest product is exactly 1 and the normaliser's epsilon stays negligible beside it.
  const auto f = features(tq, tk, c, causal ? std::get<0>(keys.cummax(2)) : c);
  return {f.fq.to(q.scalar_type()), f.fk.to(k.scalar_type())};
}

ShiftedFeatures shiftedExpFeatures(RecurrentState& state, const torch::Tensor& q, const torch::Tensor& k, double t) {
  // q, k [B,H,T,D]; state.S [B,H,F,D], z [B,H,F], keyShift [B,H,F] -> features [B,H,T,F] in S's dtype
  const auto type = state.S.scalar_type();
  const auto tq = q.to(type) * t, tk = k.to(type) * t;  // decoding: no gradient through the shifts needed
  const auto previous = state.keyShift;
  const auto newest = tk.amax(2);  // [B,H,F]
  state.keyShift = previous.defined() ? torch::maximum(previous, newest) : newest;
  if (previous.defined()) {
    const auto factor = torch::exp(previous - state.keyShift);  // [B,H,F] in (0, 1]
    state.S = state.S * factor.unsqueeze(-1);
    if (state.z.defined()) state.z = state.z * factor;
  }
  auto seen = std::get<0>(tk.cummax(2));  // [B,H,T,F]: the keys so far, this call's
  if (previous.defined()) seen = torch::maximum(seen, previous.unsqueeze(2));  // and the state's
  return features(tq, tk, state.keyShift.unsqueeze(2), seen);
}

}  // namespace hh::attn
