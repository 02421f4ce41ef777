#include "engine/parity/parity_check.h"

#include <torch/types.h>

#include "engine/attention/feature_map.h"
#include "engine/attention/linear_attention.h"
#include "engine/attention/reference.h"
#include "engine/attention/softmax_attention.h"

namespace hh::parity {

namespace {
using attn::FeatureMapKind;
using attn::UpdateRule;

torch::ScalarType dtypeOf(const std::string& name) {
  if (name == "float32") return torch::kFloat;
  if (name == "float64") return torch::kDouble;
  if (name == "bfloat16") return torch::kBFloat16;
  throw std::invalid_argument("unknown dtype '" + name + "' (allowed: float32, float64, bfloat16)");
}

struct Inputs {
  torch::Tensor q, k, v;  // [B,H,T,D] float64
  attn::RuleInputs gates;  // float64
};

// Random inputs; the identity and linear maps need a positive kernel (their features are signed,
// and a normaliser near zero would amplify rounding), so their q, k are drawn in (0.1, 1).
Inputs makeInputs(const ParityOptions& o, int64_t t, FeatureMapKind kind, int64_t featureDim, uint64_t seed) {
  torch::manual_seed(seed);
  const auto opts = torch::TensorOptions().dtype(torch::kDouble);
  Inputs in;
  if (kind == FeatureMapKind::Identity || kind == FeatureMapKind::Linear) {
    in.q = torch::rand({o.batch, o.heads, t, o.headDim}, opts) * 0.9 + 0.1;
    in.k = torch::rand({o.batch, o.heads, t, o.headDim}, opts) * 0.9 + 0.1;
  } else {
    in.q = torch::randn({o.batch, o.heads, t, o.headDim}, opts) * 0.5;
    in.k = torch::randn({o.batch, o.heads, t, o.headDim}, opts) * 0.5;
  }
  in.v = torch::randn({o.batch, o.heads, t, o.headDim}, opts);
  in.gates.gate = torch::sigmoid(torch::randn({o.batch, o.heads, t}, opts) + 3.0);
  in.gates.beta = torch::sigmoid(torch::randn({o.batch, o.heads, t}, opts));
  in.gates.keyDecay = torch::sigmoid(torch::randn({o.batch, o.heads, t, featureDim}, opts) + 3.0);
  in.gates.valueDecay = torch::sigmoid(torch::randn({o.batch, o.heads, t, o.headDim}, opts) + 3.0);
  return in;
}

attn::RuleInputs castGates(const attn::RuleInputs& g, torch::Device device, torch::ScalarType type) {
  return {g.gate.to(device, type), g.beta.to(device, type), g.keyDecay.to(device, type), g.valueDecay.to(device, type)};
}

void compare(ParityRow& row, const torch::Tensor& got, const torch::Tensor& ref) {
  const auto diff = (got.to(torch::kCPU, torch::kDouble) - ref).abs();
  row.maxAbsError = diff.max().item<double>();
  row.relError = row.maxAbsError / std::max(ref.abs().max().item<double>(), 1e-300);
}

// Perturb trainable maps away from identity so the per-head MLP is exercised (the linear map by
// non-negative amounts, so that its features stay positive on positive inputs).
void randomizeTrainable(attn::FeatureMap& fm, uint64_t seed) {
  if (!fm->trainable()) return;
  at::NoGradGuard guard;
  torch::manual_seed(seed);
  auto w = torch::randn_like(fm->weight()) * 0.2, b = torch::randn_like(fm->bias()) * 0.1;
  if (fm->config().kind == FeatureMapKind::Linear) w = w.abs(), b = b.abs();
  fm->weight().add_(w);
  fm->bias().add_(b);
}
// The causal additive Hedgehog layer's own chunked forward: LinearAttention dispatches to the
// fused kernels where they apply (the CPU kernel for fp32 CPU tensors, the CUDA kernels in a
// HH_CUDA_KERNELS build for fp32/bf16 CUDA tensors of head dim 32, 64 or 128, whatever B * H), else
// the generic forms.
torch::Tensor layerForward(const attn::FeatureMap& fm, int64_t chunkSize, const torch::Tensor& q, const torch::Tensor& k,
                           const torch::Tensor& v) {
  attn::LinearAttentionConfig c;
  c.featureMap = fm->config();
  c.rule.rule = UpdateRule::Additive;
  c.rule.causal = true;
  c.rule.chunkSize = chunkSize;
  attn::LinearAttention layer(c, q.size(1) * q.size(3));
  layer->to(q.device());
  layer->featureMap()->weight().copy_(fm->weight());
  layer->featureMap()->bias().copy_(fm->bias());
  // The parity shapes are small: under the default policy the CUDA kernels would leave them to
  // the generic path (they pay only when B * H fills the GPU), and these rows are their check.
  const attn::ScopedFusedCudaPolicy always(attn::FusedCudaPolicy::Always);
  return layer->forward(q, k, v, {}, attn::AttentionForm::Chunked);
}
}  // namespace

double toleranceFor(const std::string& dtype) {
  if (dtype == "float64") return 1e-10;
  if (dtype == "float32") return 1e-5;
  return 5e-2;
}

namespace {

// Where the rows go: to the caller as each is made, and into the result.
struct RowSink {
  const std::function<void(const ParityRow&)>& onRow;
  std::vector<ParityRow> rows;
  void emit(ParityRow row) {
    if (onRow) onRow(row);
    rows.push_back(std::move(row));
  }
};

// Softmax against its own brute force, causal and not, in every dtype.
void softmaxRows(const ParityOptions& o, int64_t t, uint64_t& seed, const torch::Device& device, RowSink& sink) {
  const auto in = makeInputs(o, t, FeatureMapKind::Elu, o.headDim, ++seed);
  for (const bool causal : {true, false}) {
    const auto ref = attn::referenceSoftmaxAttention(in.q, in.k, in.v, causal);
    for (const auto& dt : o.dtypes) {
      const auto type = dtypeOf(dt);
      ParityRow row{"softmax", "-", causal, "quadratic", dt, t};
      compare(row, attn::softmaxAttention(in.q.to(device, type), in.k.to(device, type), in.v.to(device, type), causal), ref);
      sink.emit(row);
    }
  }
}

// One feature map under one rule: every form (and the layer, and the weights where there is a
// reference) in every dtype, the whole pipeline in that dtype (inputs -> features -> form), against
// the fp64 reference on the CPU's features `fq64`, `fk64`.
void ruleRows(const ParityOptions& o, attn::FeatureMap& fm, const Inputs& in, const torch::Tensor& fq64,
              const torch::Tensor& fk64, FeatureMapKind kind, const attn::RuleOptions& ro, int64_t t,
              const torch::Device& device, RowSink& sink) {
  const auto ref = attn::referenceLinearAttention(fq64, fk64, in.v, in.gates, ro);
  const bool hasRefWeights = ro.rule == UpdateRule::Additive || ro.rule == UpdateRule::Gated;
  const auto refWeights = hasRefWeights ? attn::referenceLinearWeights(fq64, fk64, in.gates, ro) : torch::Tensor();
  const std::string map = attn::toString(kind), rule = attn::toString(ro.rule);
  for (const auto& dt : o.dtypes) {
    const auto type = dtypeOf(dt);
    const auto q = in.q.to(device, type), k = in.k.to(device, type);
    const auto fq = fm->forward(q), fk = fm->forward(k);
    const auto v = in.v.to(device, type);
    const auto gates = castGates(in.gates, device, type);
    std::vector<attn::AttentionForm> forms = {attn::AttentionForm::Quadratic, attn::AttentionForm::Chunked};
    if (ro.causal) forms.push_back(attn::AttentionForm::Recurrent);
    for (const auto form : forms) {
      ParityRow row{map, rule, ro.causal, attn::toString(form), dt, t};
      compare(row, attn::linearAttention(form, fq, fk, v, gates, ro), ref);
      sink.emit(row);
    }
    if (kind == FeatureMapKind::Hedgehog && ro.rule == UpdateRule::Additive && ro.causal && type != torch::kDouble) {
      ParityRow row{map, rule, ro.causal, "layer", dt, t};
      compare(row, layerForward(fm, o.chunkSize, q, k, v), ref);
      sink.emit(row);
    }
    if (hasRefWeights) {
      ParityRow row{map, rule, ro.causal, "weights", dt, t};
      compare(row, attn::linearWeights(fq, fk, gates, ro), refWeights);
      sink.emit(row);
    }
  }
}

// One feature map (its trainable weights random) under every rule the engine takes with it.
void featureMapRows(const ParityOptions& o, FeatureMapKind kind, int64_t t, uint64_t& seed, const torch::Device& device,
                    RowSink& sink) {
  attn::FeatureMapConfig fc;
  fc.kind = kind;
  fc.heads = o.heads;
  fc.headDim = o.headDim;
  fc.expT = 2.0;
  fc.cosformerMaxLength = 256;
  fc.seed = seed;
  attn::FeatureMap fm(fc);
  randomizeTrainable(fm, ++seed);
  const auto in = makeInputs(o, t, kind, fm->featureDim(), ++seed);
  const auto fq64 = fm->forward(in.q), fk64 = fm->forward(in.k);  // the reference's, on the CPU
  fm->to(device);
  for (const auto rule : o.rules) {
    if (rule == UpdateRule::DeltaMao && !attn::hasNonNegativeFeatures(kind)) continue;  // refused by the engine
    for (const bool causal : {true, false}) {
      if (!causal && rule != UpdateRule::Additive) continue;
      attn::RuleOptions ro;
      ro.rule = rule;
      ro.causal = causal;
      ro.chunkSize = o.chunkSize;
      ruleRows(o, fm, in, fq64, fk64, kind, ro, t, device, sink);
    }
  }
}

}  // namespace

std::vector<ParityRow> runParity(const ParityOptions& o, const std::function<void(const ParityRow&)>& onRow) {
  at::NoGradGuard noGrad;
  const torch::Device device(o.device);
  RowSink sink{onRow, {}};
  uint64_t seed = o.seed;
  for (const int64_t t : o.lengths) {
    softmaxRows(o, t, seed, device, sink);
    for (const auto kind : o.featureMaps) featureMapRows(o, kind, t, seed, device, sink);
  }
  return std::move(sink.rows);
}

}  // namespace hh::parity
