// An independent fp64 reference of the BERT and Llama forward passes, for the model tests only.
// Written from the Hugging Face definitions (modeling_bert.py, modeling_llama.py), with plain
// loops over std::vector<double>: no Torch, no engine code, so a mistake shared with the engine
// cannot hide here.
//
// BERT (BertForMaskedLM): x = LN(word[id] + pos[t] + type[tt]); per layer
//   a = LN(dense(attn(x)) + x), x = LN(out(act(inter(a))) + a)   (post-LN, eps from the config)
//   attention: softmax(q.k / sqrt(D) + (1 - mask_k) * lowest) over all keys (bidirectional), or
//   over keys j <= i when the spec is causal (is_decoder)
//   head: logits = LN(act(transform(x))) . word^T + cls.predictions.bias (decoder tied)
// Llama (LlamaForCausalLM): x = embed[id]; per layer
//   h = rms(x) * w_in; q, k, v = proj(h); q, k = rope(q), rope(k) at positions 0..T-1
//   x = x + o(attn(q, k, v)); m = rms(x) * w_post; x = x + down(silu(gate m) * up m)
//   logits = (rms(x) * w_norm) . W^T with W = lm_head, or embed when tied
//   rope: inv_freq_i = theta^(-2i/D), i < D/2 (llama3 / linear scaling applied to it), angle
//   t * inv_freq_i shared by dims i and i + D/2, rotate_half(x) = [-x2, x1]
//   GQA: query head h reads kv head h / (H / H_kv), i.e. kv head j serves j*g .. (j+1)*g - 1.
// Weights are looked up by their Hugging Face names (with the given body prefix).
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace hh::test::ref {

// A dense row-major array: shape and values.
struct Array {
  std::vector<int64_t> shape;
  std::vector<double> data;
};
using Weights = std::map<std::string, Array>;

// Token ids (or types, or a 0/1 mask) per batch row: [B][T].
using Rows = std::vector<std::vector<int64_t>>;

struct BertSpec {
  int64_t hidden = 0, layers = 0, heads = 0;
  double eps = 1e-12;
  std::string activation = "gelu";  // gelu (erf) | gelu_new (tanh) | relu
  std::string prefix = "bert.";
  bool causal = false;  // is_decoder: keys j <= i only, as well as the padding mask
};

struct LlamaSpec {
  int64_t hidden = 0, layers = 0, heads = 0, kvHeads = 0, headDim = 0;
  double eps = 1e-6;
  double theta = 10000.0;
  bool qkvBias = false, outputBias = false, mlpBias = false, tied = false;
  std::string ropeType = "default";  // default | linear | llama3
  double factor = 1.0, lowFreqFactor = 1.0, highFreqFactor = 4.0;
  int64_t originalMaxPositions = 8192;
  std::string prefix = "model.";
};

struct Output {
  int64_t batch = 0, length = 0, vocab = 0;
  std::vector<double> logits;                   // [B, T, V]
  std::vector<std::vector<double>> attentions;  // per layer: [B, H, T, T]
  double logit(int64_t b, int64_t t, int64_t v) const { return logits[size_t((b * length + t) * vocab + v)]; }
};

// types and mask may be empty (all zeros / all ones).
Output bertForward(const BertSpec& spec, const Weights& w, const Rows& ids, const Rows& types = {},
                   const Rows& mask = {});
Output llamaForward(const LlamaSpec& spec, const Weights& w, const Rows& ids);

// inv_freq [D/2] with the spec's scaling, as Hugging Face's rope init functions compute it.
std::vector<double> llamaInverseFrequencies(const LlamaSpec& spec);
// x [D] rotated to `position` with those frequencies (half-split rotate_half).
std::vector<double> rotate(const std::vector<double>& x, const std::vector<double>& invFreq, int64_t position);

}  // namespace hh::test::ref
