// Validation, the recurrent form, dispatch, and the LinearAttention module (declared in
// linear_attention.h; quadratic and chunked forms are in linear_forms.cpp, the rules' gates in
// rule_gates.cpp).
#include "engine/attention/linear_attention.h"

#include <torch/types.h>

#include "engine/attention/form_helpers.h"
#include "engine/attention/fused_hedgehog_cpu.h"
#include "engine/attention/stable_exp.h"
#include "engine/attention/window_attention.h"
#if HH_CUDA_KERNELS
#include "engine/cuda/hedgehog_cuda_torch.h"
#endif

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <sstream>
#include <stdexcept>
#include <string>

namespace hh::attn {

namespace {
FusedCudaPolicy policyFromEnvironment() {
  const char* env = std::getenv("HH_FUSED_CUDA");
  const std::string value = env ? env : "auto";
  if (value == "on") return FusedCudaPolicy::Always;
  if (value == "off") return FusedCudaPolicy::Never;
  return FusedCudaPolicy::Auto;
}
std::atomic<FusedCudaPolicy>& policySetting() {
  static std::atomic<FusedCudaPolicy> policy{policyFromEnvironment()};
  return policy;
}
}  // namespace

FusedCudaPolicy fusedCudaPolicy() { return policySetting().load(); }
void setFusedCudaPolicy(FusedCudaPolicy policy) { policySetting().store(policy); }

namespace {
#if HH_CUDA_KERNELS
// Measured on an H100 in bf16 (docs/gpu.md, 2026-11-26): the kernels' forward was 8-14 % faster
// than the generic LibTorch path at B=8 H=32 D=128 and 1.04-4x slower at B=1 H=12 D=64 (12
// thread blocks on 132 multiprocessors); forward + backward, the generic path was 1.6-4x faster
// at both shapes while it fit, and peaked at about 115 bytes per element of q [B,H,T,D] (58.5 GB
// at B=8 H=32 T=16K D=128; out of memory at 32K), the kernels at under a sixth of that.
constexpr double kGenericTrainingBytesPerElement = 115.0;

bool cudaKernelPays(const torch::Tensor& q, bool step, bool needsGrad) {
  switch (fusedCudaPolicy()) {
    case FusedCudaPolicy::Never: return false;
    case FusedCudaPolicy::Always: return true;
    case FusedCudaPolicy::Auto: break;
  }
  if (q.size(-1) != 64 && q.size(-1) != 128) return false;  // the head dims measured (D = 32 came after)
  if (step) return true;
  if (!needsGrad) return hh::cuda::hedgehogCudaFillsDevice(q);
  const double scale = q.element_size() / 2.0;  // the measurement was bf16
  return double(q.numel()) * kGenericTrainingBytesPerElement * scale > 0.5 * double(hh::cuda::deviceBytesAvailable(q));
}

// The fused CUDA kernels (engine/cuda) serve Hedgehog, additive, causal, no window mix, CUDA fp32
// or bf16 of a supported head dim, where the policy says they pay (fusedCudaPolicy). The
// chunked kernel has a backward (training takes it too); the step has none, so it serves only
// when nothing needs a gradient.
bool cudaKernelServes(const LinearAttentionConfig& config, bool windowMix, const FeatureMap& map, const torch::Tensor& q,
                      const torch::Tensor& k, const torch::Tensor& v, bool step) {
  const bool needsGrad = torch::GradMode::is_enabled() && (q.requires_grad() || k.requires_grad() ||
                                                           v.requires_grad() || map->weight().requires_grad() ||
                                                           map->bias().requires_grad());
  return !windowMix && !(step && needsGrad) && config.featureMap.kind == FeatureMapKind::Hedgehog &&
         config.rule.rule == UpdateRule::Additive && config.rule.causal && hh::cuda::hedgehogCudaAccepts(q, k, v) &&
         cudaKernelPays(q, step, needsGrad);
}
#endif
torch::Tensor sliceTime(const torch::Tensor& x, int64_t t0, int64_t len) {
  return x.defined() ? x.narrow(2, t0, len) : x;
}

void requireGate(const torch::Tensor& g, const std::vector<int64_t>& shape, const char* what) {
  if (!g.defined()) throw std::invalid_argument(std::string("update rule needs the ") + what + " gate");
  if (g.sizes().vec() != shape) {
    std::ostringstream os;
    os << what << " gate has shape " << g.sizes() << ", expected " << torch::IntArrayRef(shape);
    throw std::invalid_argument(os.str());
  }
}

}  // namespace

RuleInputs RuleInputs::slice(int64_t t0, int64_t len) const {
  return {sliceTime(gate, t0, len), sliceTime(beta, t0, len), sliceTime(keyDecay, t0, len),
          sliceTime(valueDecay, t0, len)};
}

RuleInputs RuleInputs::head(int64_t h) const {
  const auto one = [h](const torch::Tensor& x) { return x.defined() ? x.narrow(1, h, 1) : x; };
  return {one(gate), one(beta), one(keyDecay), one(valueDecay)};
}

void validateLinearInputs(const torch::Tensor& fq, const torch::Tensor& fk, const torch::Tensor& v,
                          const RuleInputs& gates, const RuleOptions& options) {
  if (fq.dim() != 4 || fk.dim() != 4) throw std::invalid_argument("features must be [B,H,T,F]");
  if (fq.sizes() != fk.sizes()) {
    std::ostringstream os;
    os << "query features " << fq.sizes() << " and key features " << fk.sizes() << " differ";
    throw std::invalid_argument(os.str());
  }
  if (v.defined() && (v.dim() != 4 || v.size(0) != fq.size(0) || v.size(1) != fq.size(1) || v.size(2) != fq.size(2)))
    throw std::invalid_argument("values must be [B,H,T,D] matching the features");
  if (options.chunkSize < 1) throw std::invalid_argument("chunk size must be at least 1");
  if (!options.causal && options.rule != UpdateRule::Additive)
    throw std::invalid_argument("the " + toString(options.rule) + " rule is causal only");
  const int64_t b = fq.size(0), h = fq.size(1), t = fq.size(2), f = fq.size(3);
  switch (options.rule) {
    case UpdateRule::Additive:
      break;
    case UpdateRule::Gated:
      requireGate(gates.gate, {b, h, t}, "gated rule's g");
      break;
    case UpdateRule::Delta:
    case UpdateRule::DeltaMao:
      requireGate(gates.beta, {b, h, t}, "delta rule's beta");
      break;
    case UpdateRule::Decay:
    case UpdateRule::DecayMao:  // Decay on values LinearAttention has scaled
      requireGate(gates.keyDecay, {b, h, t, f}, "decay rule's key-side");
      if (v.defined()) requireGate(gates.valueDecay, {b, h, t, v.size(3)}, "decay rule's value-side");
      break;
  }
}

int64_t RecurrentState::bytes() const {
  int64_t n = 0;
  for (const auto& t : {S, z, keyShift, ringKeys, ringValues, ringFeatures})
    if (t.defined()) n += t.numel() * static_cast<int64_t>(t.element_size());
  return n;
}

RecurrentState initialState(int64_t batch, int64_t heads, int64_t featureDim, int64_t valueDim,
                            const RuleOptions& options, torch::ScalarType dtype, torch::Device device) {
  const auto type = dtype == torch::kDouble ? torch::kDouble : torch::kFloat;
  const auto opts = torch::TensorOptions().dtype(type).device(device);
  RecurrentState state;
  state.S = torch::zeros({batch, heads, featureDim, valueDim}, opts);
  if (options.rule == UpdateRule::Additive || options.rule == UpdateRule::Gated)
    state.z = torch::zeros({batch, heads, featureDim}, opts);
  return state;
}

torch::Tensor linearStep(RecurrentState& state, const torch::Tensor& fq, const torch::Tensor& fk,
                         const torch::Tensor& v, const RuleInputs& gates, const RuleOptions& options) {
  // fq, fk [B,H,F]; v [B,H,D]; gates sliced to one token -> y [B,H,D]
  if (!options.causal) throw std::invalid_argument("the recurrent form is causal only");
  const auto type = state.S.scalar_type();
  auto q = fq.to(type), k = fk.to(type);
  const auto vv = v.to(type);
  torch::Tensor y;
  switch (options.rule) {
    case UpdateRule::Additive:
    case UpdateRule::Gated: {
      if (options.rule == UpdateRule::Gated) {
        const auto g = gates.gate.to(type).reshape({q.size(0), q.size(1), 1});  // [B,H,1]
        state.S = state.S * g.unsqueeze(-1);
        state.z = state.z * g;
      }
      if (options.rule == UpdateRule::Gated) state.lastDecay = gates.gate.reshape({q.size(0), q.size(1)}).to(torch::kFloat);
      state.S = state.S + k.unsqueeze(-1) * vv.unsqueeze(-2);  // [B,H,F,D]
      state.z = state.z + k;
      const auto num = torch::matmul(q.unsqueeze(-2), state.S).squeeze(-2);  // [B,H,D]
      const auto den = (q * state.z).sum(-1, true) + options.eps;             // [B,H,1]
      y = num / den;
      break;
    }
    case UpdateRule::Delta:
    case UpdateRule::DeltaMao: {
      q = detail::deltaNormalize(q, options.rule);
      k = detail::deltaNormalize(k, options.rule);
      const auto beta = gates.beta.to(type).reshape({q.size(0), q.size(1), 1});
      const auto recalled = torch::matmul(k.unsqueeze(-2), state.S).squeeze(-2);  // S^T k: [B,H,D]
      const auto u = beta * (vv - recalled);
      state.S = state.S + k.unsqueeze(-1) * u.unsqueeze(-2);
      y = torch::matmul(q.unsqueeze(-2), state.S).squeeze(-2);
      break;
    }
    case UpdateRule::Decay:
    case UpdateRule::DecayMao: {  // Decay on values LinearAttention has scaled
      const auto a = gates.keyDecay.to(type).reshape({q.size(0), q.size(1), q.size(2), 1});
      const auto b = gates.valueDecay.to(type).reshape({q.size(0), q.size(1), 1, vv.size(2)});
      state.S = a * b * state.S + k.unsqueeze(-1) * vv.unsqueeze(-2);
      state.lastDecay = (a.mean({2, 3}) * b.mean({2, 3})).to(torch::kFloat);  // [B,H]
      y = torch::matmul(q.unsqueeze(-2), state.S).squeeze(-2);
      break;
    }
  }
  state.position += 1;
  return y.to(v.scalar_type());
}

torch::Tensor linearRecurrent(const torch::Tensor& fq, const torch::Tensor& fk, const torch::Tensor& v,
                              const RuleInputs& gates, const RuleOptions& options) {
  // -> [B,H,T,D]
  validateLinearInputs(fq, fk, v, gates, options);
  if (!options.causal) throw std::invalid_argument("the recurrent form is causal only");
  const int64_t t = fq.size(2);
  auto state = initialState(fq.size(0), fq.size(1), fq.size(3), v.size(3), options, detail::accumulateType(fq), fq.device());
  std::vector<torch::Tensor> ys;
  ys.reserve(t);
  for (int64_t i = 0; i < t; ++i) {
    const auto g = gates.slice(i, 1);
    ys.push_back(linearStep(state, fq.select(2, i), fk.select(2, i), v.select(2, i), g, options));
  }
  return torch::stack(ys, 2);
}

torch::Tensor linearAttention(AttentionForm form, const torch::Tensor& fq, const torch::Tensor& fk,
                              const torch::Tensor& v, const RuleInputs& gates, const RuleOptions& options) {
  switch (form) {
    case AttentionForm::Quadratic:
      return linearQuadratic(fq, fk, v, gates, options);
    case AttentionForm::Chunked:
      return linearChunked(fq, fk, v, gates, options);
    case AttentionForm::Recurrent:
      return linearRecurrent(fq, fk, v, gates, options);
  }
  throw std::logic_error("linearAttention: unhandled form");
}

// ---- modules ----

LinearAttentionImpl::LinearAttentionImpl(LinearAttentionConfig config, int64_t hiddenSize) : config_(config) {
  if (const auto conflict = ruleFeatureMapConflict(config); !conflict.empty()) throw std::invalid_argument(conflict);
  featureMap_ = register_module("feature_map", FeatureMap(config.featureMap));
  if (config.window > 0) {
    if (config.rule.rule != UpdateRule::Additive)
      throw std::invalid_argument("the window hybrid takes the additive rule, not " + toString(config.rule.rule));
    // gamma = sigmoid(logit) per head, 0.5 at the start: the window's softmax and the feature map
    // share each row by their own weights.
    windowMix_ = register_parameter("window_mix", torch::zeros({config.featureMap.heads}));
  }
  if (config.rule.rule != UpdateRule::Additive) {
    gates_ = register_module("gates", RuleGates(config.rule.rule, hiddenSize, config.featureMap.heads,
                                                featureMap_->featureDim(), config.featureMap.headDim));
  }
}

RuleInputs LinearAttentionImpl::gatesFor(const torch::Tensor& hidden, int64_t batch, int64_t length) {
  if (!gates_) return {};
  TORCH_CHECK(hidden.defined() && hidden.size(0) == batch && hidden.size(1) == length,
              "hidden states must be [B,T,C] matching q");
  return gates_->forward(hidden);
}

torch::Tensor LinearAttentionImpl::maskedKeyFeatures(const torch::Tensor& k, const torch::Tensor& keyMask) {
  auto fk = featureMap_->forward(k);  // [B,H,T,F]
  if (!keyMask.defined()) return fk;
  TORCH_CHECK(keyMask.dim() == 2 && keyMask.size(0) == k.size(0) && keyMask.size(1) == k.size(2),
              "keyMask must be [B,T] matching k");
  return fk * keyMask.to(fk.scalar_type()).unsqueeze(1).unsqueeze(-1);  // [B,1,T,1]
}

torch::Tensor LinearAttentionImpl::forward(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                           const torch::Tensor& hidden, AttentionForm form,
                                           const torch::Tensor& keyMask) {
  if (windowMix_.defined()) return windowAttention(form, windowInputs(q, k, v, keyMask), windowOptions(config_));
  const auto gates = gatesFor(hidden, q.size(0), q.size(2));
#if HH_CUDA_KERNELS
  if (form == AttentionForm::Chunked && !keyMask.defined() &&
      cudaKernelServes(config_, windowMix_.defined(), featureMap_, q, k, v, false))
    return hh::cuda::hedgehogCudaCausal(q, k, v, featureMap_->weight(), featureMap_->bias(), config_.rule.chunkSize,
                                        config_.rule.eps);
#endif
  if (form == AttentionForm::Chunked && !keyMask.defined() && canUseFusedKernel(q, k, v))
    return fusedHedgehogCausalForward(q, k, v, featureMap_->weight(), featureMap_->bias(), config_.rule.chunkSize,
                                      config_.rule.eps);
  if (usesShiftedExp(config_)) {
    const auto f = shiftedExpFeatures(q, k, config_.featureMap.expT, config_.rule.causal, keyMask);
    return linearAttention(form, f.fq, f.fk, scaled(v), gates, config_.rule);
  }
  return linearAttention(form, featureMap_->forward(q), maskedKeyFeatures(k, keyMask), scaled(v), gates, config_.rule);
}

torch::Tensor LinearAttentionImpl::scaled(const torch::Tensor& v) const { return gates_ ? gates_->scaleValues(v) : v; }

WindowInputs LinearAttentionImpl::windowInputs(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                               const torch::Tensor& keyMask, int64_t position) {
  WindowInputs in{q, k, featureMap_->forward(q, position), {}, v, torch::sigmoid(windowMix_), keyMask};
  in.fk = keyMask.defined() ? maskedKeyFeatures(k, keyMask) : featureMap_->forward(k, position);
  return in;
}

bool LinearAttentionImpl::canUseFusedKernel(const torch::Tensor& q, const torch::Tensor& k,
                                            const torch::Tensor& v) const {
  // The fused kernel has no backward: only when nothing needs a gradient.
  const bool needsGrad = torch::GradMode::is_enabled() &&
                         (q.requires_grad() || k.requires_grad() || v.requires_grad() ||
                          featureMap_->weight().requires_grad() || featureMap_->bias().requires_grad());
  return fusedHedgehogAvailable() && !needsGrad && !windowMix_.defined() &&
         config_.featureMap.kind == FeatureMapKind::Hedgehog && config_.rule.rule == UpdateRule::Additive &&
         config_.rule.causal && q.device().is_cpu() && q.scalar_type() == torch::kFloat &&
         k.scalar_type() == torch::kFloat && v.scalar_type() == torch::kFloat && q.dim() == 4 &&
         k.sizes() == q.sizes() && v.sizes() == q.sizes() && q.size(3) % 8 == 0 &&
         featureMap_->weight().sizes() == torch::IntArrayRef{q.size(1), q.size(3), q.size(3)};  // W [H,D,D]
}

bool LinearAttentionImpl::canUseFusedStep(const RecurrentState& state, const torch::Tensor& q, const torch::Tensor& k,
                                          const torch::Tensor& v) const {
  // q, k, v [B,H,1,D]; the fused step updates S [B,H,2D,D] and z [B,H,2D] in place, fp32 contiguous.
  if (!canUseFusedKernel(q, k, v) || q.size(2) != 1 || !state.S.defined() || !state.z.defined()) return false;
  const int64_t b = q.size(0), h = q.size(1), d = q.size(3);
  return state.S.scalar_type() == torch::kFloat && state.z.scalar_type() == torch::kFloat && state.S.is_contiguous() &&
         state.z.is_contiguous() && state.S.sizes() == torch::IntArrayRef{b, h, 2 * d, d} &&
         state.z.sizes() == torch::IntArrayRef{b, h, 2 * d};
}

LinearAttentionImpl::WeightInputs LinearAttentionImpl::weightInputs(const torch::Tensor& q, const torch::Tensor& k,
                                                                    const torch::Tensor& hidden,
                                                                    const torch::Tensor& keyMask) {
  if (windowMix_.defined()) {                       // the window's scores need q, k; its mix is per head
    const auto w = windowInputs(q, k, q, keyMask);  // q stands in for v: the weights need no values
    return {w.q, w.k, w.fq, w.fk, w.mix, keyMask, {}};
  }
  WeightInputs in;
  in.keyMask = keyMask;
  in.gates = gatesFor(hidden, q.size(0), q.size(2));
  if (usesShiftedExp(config_)) {
    auto f = shiftedExpFeatures(q, k, config_.featureMap.expT, config_.rule.causal, keyMask);
    in.fq = f.fq;
    in.fk = f.fk;
  } else {
    in.fq = featureMap_->forward(q);
    in.fk = maskedKeyFeatures(k, keyMask);
  }
  return in;
}

torch::Tensor LinearAttentionImpl::weightsFrom(const WeightInputs& in, int64_t head) const {
  const auto pick = [head](const torch::Tensor& x, int64_t dim) {  // [B,H,T,*] -> [B,1,T,*]; mix [H] -> [1]
    return head < 0 || !x.defined() ? x : x.narrow(dim, head, 1);
  };
  if (windowMix_.defined())
    return windowWeights(
        {pick(in.q, 1), pick(in.k, 1), pick(in.fq, 1), pick(in.fk, 1), pick(in.q, 1), pick(in.mix, 0), in.keyMask},
        windowOptions(config_));
  return linearWeights(pick(in.fq, 1), pick(in.fk, 1), head < 0 ? in.gates : in.gates.head(head), config_.rule);
}

torch::Tensor LinearAttentionImpl::weights(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& hidden,
                                           const torch::Tensor& keyMask) {
  return weightsFrom(weightInputs(q, k, hidden, keyMask), -1);
}

torch::Tensor LinearAttentionImpl::headWeights(const torch::Tensor& q, const torch::Tensor& k, int64_t head,
                                               const torch::Tensor& hidden) {
  TORCH_CHECK(q.dim() == 4 && head >= 0 && head < q.size(1), "no head ", head, " in q ", q.sizes());
  return weightsFrom(weightInputs(q, k, hidden, {}), head);
}

void LinearAttentionImpl::forEachHeadWeights(const torch::Tensor& q, const torch::Tensor& k,
                                             const torch::Tensor& hidden,
                                             const std::function<void(int64_t, const torch::Tensor&)>& use) {
  const auto in = weightInputs(q, k, hidden, {});
  for (int64_t h = 0; h < q.size(1); ++h) use(h, weightsFrom(in, h));
}

LinearAttentionImpl::AdditiveFeatures LinearAttentionImpl::additiveFeatures(const torch::Tensor& q, const torch::Tensor& k,
                                                                           const torch::Tensor& keyMask) {
  if (windowMix_.defined() || config_.rule.rule != UpdateRule::Additive) return {};
  if (usesShiftedExp(config_)) {
    auto f = shiftedExpFeatures(q, k, config_.featureMap.expT, config_.rule.causal, keyMask);
    return {f.fq, f.fk, config_.rule.eps};
  }
  return {featureMap_->forward(q), maskedKeyFeatures(k, keyMask), config_.rule.eps};
}

torch::Tensor LinearAttentionImpl::calibrateWindowMix(const torch::Tensor& q, const torch::Tensor& k) {
  // q, k [B,H,T,D]
  const int64_t t = q.size(2), window = config_.window;
  if (!windowMix_.defined() || t <= window) return {};
  torch::NoGradGuard noGrad;
  const auto positions = torch::arange(t, q.options().dtype(torch::kLong));
  const auto distance = positions.unsqueeze(1) - positions.unsqueeze(0);  // i - j
  const auto far = config_.rule.causal ? distance >= window : distance.abs() >= window;  // [T,T]
  const auto scores = torch::matmul(q.to(torch::kFloat), k.to(torch::kFloat).transpose(-1, -2)) / std::sqrt(double(q.size(3)));
  const auto logSoftmax = scores.masked_fill(far.logical_not(), -INFINITY).logsumexp(-1);  // [B,H,T]
  const auto linear = torch::matmul(featureMap_->forward(q).to(torch::kFloat), featureMap_->forward(k).to(torch::kFloat).transpose(-1, -2));
  const auto logLinear = linear.masked_fill(far.logical_not(), 0.0).sum(-1).log();          // [B,H,T]
  const auto rows = far.any(-1);                                                              // queries with far keys
  const auto logits = (logLinear - logSoftmax).index({torch::indexing::Slice(), torch::indexing::Slice(), rows}).mean(at::IntArrayRef{0, 2});
  windowMix_.copy_(logits.to(windowMix_.scalar_type()));
  return logits;
}

RecurrentState LinearAttentionImpl::initialState(int64_t batch, torch::Device device, torch::ScalarType dtype) const {
  if (windowMix_.defined())
    return initialWindowState(batch, config_.featureMap.heads, featureMap_->featureDim(), config_.featureMap.headDim,
                              windowOptions(config_), dtype, device);
  return hh::attn::initialState(batch, config_.featureMap.heads, featureMap_->featureDim(),
                                config_.featureMap.headDim, config_.rule, dtype, device);
}

torch::Tensor LinearAttentionImpl::step(RecurrentState& state, const torch::Tensor& q, const torch::Tensor& k,
                                        const torch::Tensor& v, const torch::Tensor& hidden) {
  // q, k, v [B,H,1,D]
  if (windowMix_.defined()) return windowStep(state, windowInputs(q, k, v, {}, state.position), windowOptions(config_));
  const auto gates = gatesFor(hidden, q.size(0), 1);
#if HH_CUDA_KERNELS
  if (cudaKernelServes(config_, windowMix_.defined(), featureMap_, q, k, v, true) &&
      state.S.scalar_type() == torch::kFloat && state.S.is_contiguous() && state.S.device() == q.device() &&
      state.z.defined() && state.z.scalar_type() == torch::kFloat && state.z.is_contiguous()) {
    state.position += 1;
    return hh::cuda::hedgehogCudaStep(state.S, state.z, q.select(2, 0), k.select(2, 0), v.select(2, 0),
                                      featureMap_->weight(), featureMap_->bias(), config_.rule.eps)
        .unsqueeze(2);
  }
#endif
  // Hedgehog, additive: the fused step (same conditions as the fused chunked kernel, fp32 state).
  if (canUseFusedStep(state, q, k, v)) {
    state.position += 1;
    return fusedHedgehogStep(state.S, state.z, q.select(2, 0), k.select(2, 0), v.select(2, 0), featureMap_->weight(),
                             featureMap_->bias(), config_.rule.eps)
        .unsqueeze(2);
  }
  if (usesShiftedExp(config_)) {
    const auto f = shiftedExpFeatures(state, q, k, config_.featureMap.expT);
    return linearStep(state, f.fq.select(2, 0), f.fk.select(2, 0), scaled(v).select(2, 0), gates.slice(0, 1),
                      config_.rule)
        .unsqueeze(2);
  }
  const auto fq = featureMap_->forward(q, state.position).select(2, 0);
  const auto fk = featureMap_->forward(k, state.position).select(2, 0);
  return linearStep(state, fq, fk, scaled(v).select(2, 0), gates.slice(0, 1), config_.rule).unsqueeze(2);
}

torch::Tensor LinearAttentionImpl::prefill(RecurrentState& state, const torch::Tensor& q, const torch::Tensor& k,
                                           const torch::Tensor& v, const torch::Tensor& hidden) {
  // q, k, v [B,H,T,D]
  if (windowMix_.defined()) return windowPrefill(state, windowInputs(q, k, v, {}, state.position), windowOptions(config_));
  const auto gates = gatesFor(hidden, q.size(0), q.size(2));
  if (usesShiftedExp(config_)) {
    const auto f = shiftedExpFeatures(state, q, k, config_.featureMap.expT);
    return linearPrefill(state, f.fq, f.fk, scaled(v), gates, config_.rule);
  }
  return linearPrefill(state, featureMap_->forward(q, state.position), featureMap_->forward(k, state.position), scaled(v),
                       gates, config_.rule);
}

}  // namespace hh::attn
