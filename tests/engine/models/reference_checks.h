// The reference-model suites' shared checks (tests/engine/models/test_reference_models.cpp: BERT,
// Qwen2 and a tied head; test_reference_llama.cpp: Llama and RoPE): seeded checkpoints written as
// Hugging Face folders with the same values kept in fp64 for the independent reference
// (reference_transformer.h), and the engine's logits and softmax weights compared with it.
#pragma once
#include <torch/types.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "engine/models/layers.h"
#include "engine/models/model_io.h"
#include "tests/engine/models/model_test_support.h"
#include "tests/engine/models/reference_transformer.h"

namespace hh::test::reference_checks {

namespace m = hh::models;
namespace ref = hh::test::ref;
using nlohmann::json;

inline constexpr double kTolerance = 1e-4;

// Seeded random weights, kept twice: as fp32 tensors for the file and as the same values in
// fp64 for the reference.
class Checkpoint {
 public:
  explicit Checkpoint(uint32_t seed) : rng_(seed) {}

  // offset + scale * N(0, 1), rounded to fp32 once (both sides see the same numbers).
  void add(const std::string& name, const std::vector<int64_t>& shape, double scale, double offset = 0.0) {
    std::normal_distribution<double> normal(0.0, 1.0);
    int64_t count = 1;
    for (auto d : shape) count *= d;
    std::vector<float> values(static_cast<size_t>(count));
    ref::Array array{shape, {}};
    for (auto& v : values) {
      v = static_cast<float>(offset + scale * normal(rng_));
      array.data.push_back(double(v));
    }
    tensors_.emplace_back(name, torch::from_blob(values.data(), shape, torch::kFloat).clone());
    weights_[name] = std::move(array);
  }
  void linear(const std::string& name, int64_t in, int64_t out, double scale, bool bias) {
    add(name + ".weight", {out, in}, scale);
    if (bias) add(name + ".bias", {out}, 0.1);
  }
  void layerNorm(const std::string& name, int64_t c) {
    add(name + ".weight", {c}, 0.1, 1.0);
    add(name + ".bias", {c}, 0.1);
  }

  void write(const std::string& dir, const json& config) const { hh::test::writeFolder(dir, config, tensors_); }
  const ref::Weights& weights() const { return weights_; }

 private:
  std::mt19937 rng_;
  std::vector<std::pair<std::string, torch::Tensor>> tensors_;
  ref::Weights weights_;
};

inline torch::Tensor idsTensor(const ref::Rows& rows) {
  const int64_t B = int64_t(rows.size()), T = int64_t(rows[0].size());
  auto t = torch::empty({B, T}, torch::kLong);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < T; ++i) t[b][i] = rows[size_t(b)][size_t(i)];
  return t;
}

inline torch::Tensor asTensor(const std::vector<double>& values, const std::vector<int64_t>& shape) {
  return torch::tensor(values, torch::kDouble).view(shape);
}

// Engine softmax weights of every layer stacked: [L, B, H, T, T].
inline torch::Tensor stackCaptures(const m::ModelOutput& out) {
  std::vector<torch::Tensor> layers;
  for (const auto& c : out.captures) layers.push_back(c.softmaxWeights.cpu());
  return torch::stack(layers, 0);
}
inline torch::Tensor stackReference(const ref::Output& r, int64_t heads) {
  std::vector<torch::Tensor> layers;
  for (const auto& a : r.attentions) layers.push_back(asTensor(a, {r.batch, heads, r.length, r.length}));
  return torch::stack(layers, 0);
}

struct Errors {
  double logits = 0, attentions = 0;
};

// Runs the engine on `dir` and compares with the reference output. `mask` (may be empty)
// selects the real tokens whose logits are compared.
inline Errors compare(const std::string& dir, const ref::Output& expected, int64_t heads, const ref::Rows& ids,
                      const ref::Rows& types = {}, const ref::Rows& mask = {}) {
  auto model = hh::test::loadOnTestDevice(dir);
  at::NoGradGuard noGrad;
  m::CaptureRequest request;
  m::ForwardOptions options;
  options.capture = &request;
  if (!types.empty()) options.tokenTypes = hh::test::onTestDevice(idsTensor(types));
  if (!mask.empty()) options.attentionMask = hh::test::onTestDevice(idsTensor(mask));
  const auto out = model->forward(hh::test::onTestDevice(idsTensor(ids)), options);
  auto refLogits = asTensor(expected.logits, {expected.batch, expected.length, expected.vocab});
  auto logits = out.logits.to(torch::kCPU, torch::kDouble);
  if (!mask.empty()) {  // padded positions set to 0 on both sides
    const auto keep = idsTensor(mask).to(torch::kDouble).unsqueeze(-1);
    refLogits = refLogits * keep;
    logits = logits * keep;
  }
  Errors e;
  e.logits = hh::test::relativeError(logits, refLogits);
  e.attentions = hh::test::relativeError(stackCaptures(out), stackReference(expected, heads));
  return e;
}

// Mean over attention rows (with at least two allowed keys) of the row entropy divided by the
// log of its key count: 1 for uniform attention, 0 for one-hot rows.
inline double meanNormalizedEntropy(const ref::Output& r) {
  const int64_t T = r.length;
  double sum = 0;
  int64_t rows = 0;
  for (const auto& a : r.attentions)
    for (size_t start = 0; start < a.size(); start += size_t(T)) {
      double h = 0;
      int64_t keys = 0;
      for (int64_t j = 0; j < T; ++j) {
        const double p = a[start + size_t(j)];
        if (p > 0) h -= p * std::log(p), ++keys;
      }
      if (keys < 2) continue;
      sum += h / std::log(double(keys));
      ++rows;
    }
  return sum / double(rows);
}

inline double maxRelativeDifference(const std::vector<double>& a, const std::vector<double>& b) {
  double err = 0, scale = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    err = std::max(err, std::abs(a[i] - b[i]));
    scale = std::max(scale, std::abs(b[i]));
  }
  return err / scale;
}

// A Llama checkpoint in Hugging Face names for `spec` (V tokens, MLP width I).
inline Checkpoint llamaCheckpoint(const ref::LlamaSpec& s, int64_t V, int64_t I, uint32_t seed) {
  Checkpoint ck(seed);
  const int64_t C = s.hidden, HD = s.heads * s.headDim, KD = s.kvHeads * s.headDim;
  ck.add("model.embed_tokens.weight", {V, C}, 0.5);
  for (int64_t l = 0; l < s.layers; ++l) {
    const auto p = "model.layers." + std::to_string(l) + ".";
    ck.add(p + "input_layernorm.weight", {C}, 0.1, 1.0);
    ck.linear(p + "self_attn.q_proj", C, HD, 0.3, s.qkvBias);
    ck.linear(p + "self_attn.k_proj", C, KD, 0.3, s.qkvBias);
    ck.linear(p + "self_attn.v_proj", C, KD, 0.3, s.qkvBias);
    ck.linear(p + "self_attn.o_proj", HD, C, 0.2, s.outputBias);
    ck.add(p + "post_attention_layernorm.weight", {C}, 0.1, 1.0);
    ck.linear(p + "mlp.gate_proj", C, I, 0.3, s.mlpBias);
    ck.linear(p + "mlp.up_proj", C, I, 0.3, s.mlpBias);
    ck.linear(p + "mlp.down_proj", I, C, 0.2, s.mlpBias);
  }
  ck.add("model.norm.weight", {C}, 0.1, 1.0);
  if (!s.tied) ck.add("lm_head.weight", {V, C}, 0.3);
  return ck;
}

inline json llamaConfig(const ref::LlamaSpec& s, int64_t V, int64_t I) {
  json j{{"model_type", "llama"},
         {"architectures", {"LlamaForCausalLM"}},
         {"vocab_size", V},
         {"hidden_size", s.hidden},
         {"num_hidden_layers", s.layers},
         {"num_attention_heads", s.heads},
         {"num_key_value_heads", s.kvHeads},
         {"intermediate_size", I},
         {"max_position_embeddings", 64},
         {"rms_norm_eps", s.eps},
         {"hidden_act", "silu"},
         {"attention_bias", s.outputBias},
         {"mlp_bias", s.mlpBias},
         {"tie_word_embeddings", s.tied}};
  if (s.headDim * s.heads != s.hidden) j["head_dim"] = s.headDim;  // otherwise implied: C / H
  return j;
}

inline const ref::Rows kLlamaIds{{3, 17, 42, 5, 29, 60, 11, 0, 33}, {8, 8, 51, 2, 19, 44, 7, 63, 25}};

}  // namespace hh::test::reference_checks
