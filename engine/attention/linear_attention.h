// Linear attention: the three forms (quadratic, chunked, recurrent) of every update rule, on
// features that a FeatureMap produced, plus the module a model layer calls.
// Shapes: fq, fk [B, H, T, F] features of queries and keys; v [B, H, T, D]; y [B, H, T, D].
// The fp64 brute force these are tested against lives in engine/attention/reference.h.
#pragma once
#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>

#include <functional>

#include "engine/config/attention_types.h"
#include "engine/attention/feature_map.h"

namespace hh::attn {

// Per-token gates of the non-additive rules, computed by the layer (see RuleGates) or by a test.
struct RuleInputs {
  torch::Tensor gate;        // Gated: [B, H, T] in (0, 1)
  torch::Tensor beta;        // Delta: [B, H, T] in (0, 1), write strength
  torch::Tensor keyDecay;    // Decay: [B, H, T, F] in (0, 1), the a_t of G_t = a_t b_t^T
  torch::Tensor valueDecay;  // Decay: [B, H, T, D] in (0, 1), the b_t
  // Slice [t0, t0 + len) along T (used by the recurrent form and by chunking).
  RuleInputs slice(int64_t t0, int64_t len) const;
  // Head h alone (H becomes 1), for one head's weights.
  RuleInputs head(int64_t h) const;
};

// Attention weights a_ij [B, H, T, T] of the quadratic form. Additive: phi(q_i).phi(k_j) /
// (sum_m phi(q_i).phi(k_m) + eps). Gated: scores scaled by prod_{l=j+1..i} g_l. Delta: the
// effective matrix tril(QK^T) (I + diag(beta) strict_tril(KK^T))^-1 diag(beta), so y = A v.
// Decay: feature-side decayed scores sum_f q_if k_jf prod_{l=j+1..i} a_lf; the value-side gate
// b_t acts per output channel and is not part of the returned matrix.
torch::Tensor linearWeights(const torch::Tensor& fq, const torch::Tensor& fk, const RuleInputs& gates,
                            const RuleOptions& options);

// Quadratic form output [B, H, T, D].
torch::Tensor linearQuadratic(const torch::Tensor& fq, const torch::Tensor& fk, const torch::Tensor& v,
                              const RuleInputs& gates, const RuleOptions& options);

// Chunked form output [B, H, T, D]. The causal additive rule has its own backward that
// recomputes chunk states (memory linear in T); other rules differentiate through autograd.
torch::Tensor linearChunked(const torch::Tensor& fq, const torch::Tensor& fk, const torch::Tensor& v,
                            const RuleInputs& gates, const RuleOptions& options);

// Recurrent state for one layer: S [B, H, F, D] and (additive, gated) z [B, H, F], kept in fp32
// or fp64 whatever the input dtype.
struct RecurrentState {
  torch::Tensor S;
  torch::Tensor z;
  int64_t position = 0;    // tokens consumed so far
  torch::Tensor lastDecay; // gated, decay: [B, H] float, the mean factor S was scaled by at the last token
  torch::Tensor keyShift;  // exp_t (stable_exp.h): [B, H, F], the constant taken off each feature of t k
  // Window-hybrid layers (window_attention.h): the last W keys, values [B, H, W, D] and key
  // features [B, H, W, F]; slot p % W holds token p.
  torch::Tensor ringKeys, ringValues, ringFeatures;
  int64_t bytes() const;
};
RecurrentState initialState(int64_t batch, int64_t heads, int64_t featureDim, int64_t valueDim,
                            const RuleOptions& options, torch::ScalarType dtype = torch::kFloat,
                            torch::Device device = torch::kCPU);

// One causal step: fq, fk [B, H, F], v [B, H, D], gates sliced to length 1. Returns y [B, H, D].
torch::Tensor linearStep(RecurrentState& state, const torch::Tensor& fq, const torch::Tensor& fk,
                         const torch::Tensor& v, const RuleInputs& gates, const RuleOptions& options);

// Many causal steps at once (the prefill of generation): the chunked form started from `state`,
// which it leaves advanced by T tokens. fq, fk [B, H, T, F], v [B, H, T, D]; returns [B, H, T, D],
// equal to T calls of linearStep.
torch::Tensor linearPrefill(RecurrentState& state, const torch::Tensor& fq, const torch::Tensor& fk,
                            const torch::Tensor& v, const RuleInputs& gates, const RuleOptions& options);

// The recurrent form over a whole sequence (T steps): [B, H, T, D]. For tests and parity.
torch::Tensor linearRecurrent(const torch::Tensor& fq, const torch::Tensor& fk, const torch::Tensor& v,
                              const RuleInputs& gates, const RuleOptions& options);

// Dispatch by form.
torch::Tensor linearAttention(AttentionForm form, const torch::Tensor& fq, const torch::Tensor& fk,
                              const torch::Tensor& v, const RuleInputs& gates, const RuleOptions& options);

// Checks shapes and rule/causality combinations; throws std::invalid_argument with a reason.
void validateLinearInputs(const torch::Tensor& fq, const torch::Tensor& fk, const torch::Tensor& v,
                          const RuleInputs& gates, const RuleOptions& options);

// Gates of the non-additive rules from the layer's hidden states x [B, T, C]:
//   gated: g = sigmoid(x W_g + b_g) per head; delta: beta = sigmoid(x W_b + b_b) per head;
//   decay: a = sigmoid(x W_z + b_z) [H*F], b = sigmoid(x W_f + b_f) [H*D].
// Biases start at +4 so the gates start near 1 (close to the additive rule).
class RuleGatesImpl : public torch::nn::Module {
 public:
  RuleGatesImpl(UpdateRule rule, int64_t hiddenSize, int64_t heads, int64_t featureDim, int64_t headDim);
  RuleInputs forward(const torch::Tensor& hidden);  // hidden [B, T, C]
  // DecayMao: v [B,H,T,D] times its fixed per-channel scale 1 - sigmoid(b_z); other rules: v.
  torch::Tensor scaleValues(const torch::Tensor& v) const;

 private:
  static void initialiseProjection(torch::nn::Linear& projection, double bias);
  static void uniformGateBias(torch::Tensor& bias, int64_t channels);
  UpdateRule rule_;
  int64_t heads_, featureDim_, headDim_;
  torch::nn::Linear first_{nullptr}, second_{nullptr};
  torch::Tensor valueScale_;  // [H, D], DecayMao only
};
TORCH_MODULE(RuleGates);

struct WindowInputs;  // window_attention.h

// When Hedgehog layers on a GPU take the fused CUDA kernels of a HH_CUDA_KERNELS build (docs/gpu.md):
//   Auto    at the head dims measured on a GPU (64, 128): the decode step always; the chunked
//           forward without gradients when B * H fills the GPU (hh::cuda::hedgehogCudaFillsDevice),
//           with gradients only where the generic LibTorch path would not fit in the GPU's memory
//           (it is faster where it fits);
//   Always  whenever the kernels accept the tensors (tests, parity, benchmarks);
//   Never   the generic path only.
// Process-wide. The default comes from the environment, HH_FUSED_CUDA=auto|on|off (auto if unset).
enum class FusedCudaPolicy { Auto, Always, Never };
FusedCudaPolicy fusedCudaPolicy();
void setFusedCudaPolicy(FusedCudaPolicy policy);
// Sets a policy for a scope and puts the previous one back.
class ScopedFusedCudaPolicy {
 public:
  explicit ScopedFusedCudaPolicy(FusedCudaPolicy policy) : previous_(fusedCudaPolicy()) { setFusedCudaPolicy(policy); }
  ~ScopedFusedCudaPolicy() { setFusedCudaPolicy(previous_); }
  ScopedFusedCudaPolicy(const ScopedFusedCudaPolicy&) = delete;
  ScopedFusedCudaPolicy& operator=(const ScopedFusedCudaPolicy&) = delete;

 private:
  FusedCudaPolicy previous_;
};

// What a model layer calls: feature map + rule + form, with the gates it needs; with
// config.window > 0 the window hybrid of window_attention.h (the map's features for the far keys).
class LinearAttentionImpl : public torch::nn::Module {
 public:
  // hiddenSize is the model width C (needed by the gated, delta and decay rules; ignored otherwise).
  LinearAttentionImpl(LinearAttentionConfig config, int64_t hiddenSize = 0);

  // q, k, v [B, H, T, D]; hidden [B, T, C] (non-additive rules); keyMask bool [B, T], true = real
  // token: padded keys get zero features, so they drop out of every sum. Returns [B, H, T, D].
  torch::Tensor forward(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                        const torch::Tensor& hidden = {}, AttentionForm form = AttentionForm::Chunked,
                        const torch::Tensor& keyMask = {});
  // Quadratic-form weights [B, H, T, T] for distillation and display (same keyMask meaning).
  torch::Tensor weights(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& hidden = {},
                        const torch::Tensor& keyMask = {});
  // Head `head`'s weights alone, [B, 1, T, T]: weights(q, k, hidden).narrow(1, head, 1) with one
  // T x T alive instead of H (what a display of one head needs: 805 MB less at T = 4096, H = 12).
  // The features and gates are computed for every head (linear in T) and then narrowed.
  torch::Tensor headWeights(const torch::Tensor& q, const torch::Tensor& k, int64_t head,
                            const torch::Tensor& hidden = {});
  // Every head's weights in turn, as headWeights gives them, handed to use(head, weights): the
  // features and gates computed once for all heads, one head's T x T alive at a time.
  void forEachHeadWeights(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& hidden,
                          const std::function<void(int64_t head, const torch::Tensor& weights)>& use);
  // What the additive rule's weights are made of: fq, fk [B, H, T, F] (weights = tril(fq fk^T)
  // over its row sums + eps), for a loss that takes them instead of the weights. Undefined tensors
  // for window layers and every other rule.
  struct AdditiveFeatures {
    torch::Tensor fq, fk;
    double eps = 0.0;
  };
  AdditiveFeatures additiveFeatures(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& keyMask = {});
  // Recurrent decoding: q, k, v [B, H, 1, D], hidden [B, 1, C]; returns [B, H, 1, D].
  // The state is fp64 for an fp64 model, fp32 otherwise (see initialState above).
  RecurrentState initialState(int64_t batch, torch::Device device = torch::kCPU,
                              torch::ScalarType dtype = torch::kFloat) const;
  torch::Tensor step(RecurrentState& state, const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                     const torch::Tensor& hidden = {});
  // Prefill: q, k, v [B,H,T,D], hidden [B,T,C]; the chunked form from `state`. Returns [B,H,T,D].
  torch::Tensor prefill(RecurrentState& state, const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                        const torch::Tensor& hidden = {});

  const LinearAttentionConfig& config() const { return config_; }
  FeatureMap featureMap() const { return featureMap_; }
  // Window layers: sets each head's mix so that on q, k [B,H,T,D] (T > window) the far term's
  // total per query equals softmax's over the same keys, log gamma/(1-gamma) = mean over queries
  // of log sum_far phi(q).phi(k) - log sum_far exp(s): both terms start on one scale. Returns the
  // logits [H]; undefined (nothing done) for other layers or T <= window.
  torch::Tensor calibrateWindowMix(const torch::Tensor& q, const torch::Tensor& k);

 private:
  // What the quadratic-form weights are made of, for every head: features, gates, and for window
  // layers q, k and the mix. weightsFrom: every head's [B,H,T,T] (head < 0) or one head's [B,1,T,T].
  struct WeightInputs {
    torch::Tensor q, k, fq, fk, mix, keyMask;
    RuleInputs gates;
  };
  WeightInputs weightInputs(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& hidden,
                            const torch::Tensor& keyMask);
  torch::Tensor weightsFrom(const WeightInputs& in, int64_t head) const;
  RuleInputs gatesFor(const torch::Tensor& hidden, int64_t batch, int64_t length);
  torch::Tensor maskedKeyFeatures(const torch::Tensor& k, const torch::Tensor& keyMask);  // [B,H,T,F]
  torch::Tensor scaled(const torch::Tensor& v) const;  // the rule's value scaling (DecayMao)
  // The window hybrid's inputs (features at `position` for cosFormer; keyMask zeroes padded keys).
  struct WindowInputs windowInputs(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                   const torch::Tensor& keyMask, int64_t position = 0);
  // Whether the fused CPU kernel (Hedgehog, additive, causal, fp32, no gradient) can serve forward().
  // Checks q, k, v against each other and against the feature map's heads; other inputs take the
  // generic path, which names what disagrees.
  bool canUseFusedKernel(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v) const;
  // The same for step(), with the state's S [B,H,2D,D] and z [B,H,2D] fp32 contiguous for q [B,H,1,D].
  bool canUseFusedStep(const RecurrentState& state, const torch::Tensor& q, const torch::Tensor& k,
                       const torch::Tensor& v) const;

  LinearAttentionConfig config_;
  FeatureMap featureMap_{nullptr};
  RuleGates gates_{nullptr};
  torch::Tensor windowMix_;  // [H] logits of gamma (window > 0 only): "window_mix" in the adapters
};
TORCH_MODULE(LinearAttention);

}  // namespace hh::attn
