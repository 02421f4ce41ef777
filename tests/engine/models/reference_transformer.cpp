// fp64 scalar reference of BERT and Llama (see reference_transformer.h). Matrices are
// std::vector<std::vector<double>> indexed [row][column]; a layer sees one batch row at a time.
#include "tests/engine/models/reference_transformer.h"

#include <cmath>
#include <limits>
#include <stdexcept>

namespace hh::test::ref {
namespace {

using Vec = std::vector<double>;
using Mat = std::vector<Vec>;  // [T][C]

// The name by value: GCC 13 warns (-Wdangling-reference) of a returned reference when a
// temporary string binds to a reference parameter, though the result refers into w.
const Array& get(const Weights& w, std::string name) {
  const auto it = w.find(name);
  if (it == w.end()) throw std::runtime_error("reference: no weight \"" + name + "\"");
  return it->second;
}
const Array* find(const Weights& w, const std::string& name) {
  const auto it = w.find(name);
  return it == w.end() ? nullptr : &it->second;
}

// y[t][o] = sum_i x[t][i] W[o][i] + b[o]; W [out, in] (nn.Linear layout), b [out] or null.
Mat linear(const Mat& x, const Array& W, const Array* b) {
  const int64_t out = W.shape.at(0), in = W.shape.at(1);
  Mat y(x.size(), Vec(size_t(out), 0.0));
  for (size_t t = 0; t < x.size(); ++t) {
    if (int64_t(x[t].size()) != in) throw std::runtime_error("reference: linear input width mismatch");
    for (int64_t o = 0; o < out; ++o) {
      double s = b ? b->data[size_t(o)] : 0.0;
      for (int64_t i = 0; i < in; ++i) s += x[t][size_t(i)] * W.data[size_t(o * in + i)];
      y[t][size_t(o)] = s;
    }
  }
  return y;
}
Mat linear(const Mat& x, const Weights& w, const std::string& name, bool bias) {
  return linear(x, get(w, name + ".weight"), bias ? &get(w, name + ".bias") : nullptr);
}

// LayerNorm over the last dim: (x - mean) / sqrt(var + eps) * g + b, biased variance.
Mat layerNorm(const Mat& x, const Weights& w, const std::string& name, double eps) {
  const auto& g = get(w, name + ".weight");
  const auto& b = get(w, name + ".bias");
  Mat y = x;
  for (auto& row : y) {
    const double n = double(row.size());
    double mean = 0;
    for (double v : row) mean += v;
    mean /= n;
    double var = 0;
    for (double v : row) var += (v - mean) * (v - mean);
    var /= n;
    const double inv = 1.0 / std::sqrt(var + eps);
    for (size_t c = 0; c < row.size(); ++c) row[c] = (row[c] - mean) * inv * g.data[c] + b.data[c];
  }
  return y;
}

// RMSNorm: x / sqrt(mean(x^2) + eps) * g.
Mat rmsNorm(const Mat& x, const Array& g, double eps) {
  Mat y = x;
  for (auto& row : y) {
    double ms = 0;
    for (double v : row) ms += v * v;
    ms /= double(row.size());
    const double inv = 1.0 / std::sqrt(ms + eps);
    for (size_t c = 0; c < row.size(); ++c) row[c] = row[c] * inv * g.data[c];
  }
  return y;
}

double act(double x, const std::string& name) {
  if (name == "gelu") return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
  if (name == "gelu_new" || name == "gelu_pytorch_tanh")
    return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
  if (name == "relu") return x > 0 ? x : 0.0;
  if (name == "silu" || name == "swish") return x / (1.0 + std::exp(-x));
  throw std::runtime_error("reference: unknown activation " + name);
}
Mat applyAct(Mat x, const std::string& name) {
  for (auto& row : x)
    for (auto& v : row) v = act(v, name);
  return x;
}

void addInto(Mat& x, const Mat& y) {
  for (size_t t = 0; t < x.size(); ++t)
    for (size_t c = 0; c < x[t].size(); ++c) x[t][c] += y[t][c];
}

// Multi-head attention for one batch row. q [T][H*D], k, v [T][Hkv*D]; query head h reads kv
// head h / (H / Hkv). keyValid[j] = false adds the most negative double to the score (HF's
// additive mask); causal keeps j <= i. Writes the weights into `weights` at [h][i][j] (offset
// by `base`, layout [H, T, T]) and returns [T][H*D].
Mat attention(const Mat& q, const Mat& k, const Mat& v, int64_t H, int64_t Hkv, int64_t D, bool causal,
              const std::vector<bool>& keyValid, Vec& weights, size_t base) {
  const int64_t T = int64_t(q.size()), group = H / Hkv;
  const double scale = 1.0 / std::sqrt(double(D));
  Mat out(size_t(T), Vec(size_t(H * D), 0.0));
  for (int64_t h = 0; h < H; ++h) {
    const int64_t kvh = h / group;
    for (int64_t i = 0; i < T; ++i) {
      const int64_t last = causal ? i : T - 1;
      Vec s(size_t(last + 1));
      double top = -std::numeric_limits<double>::infinity();
      for (int64_t j = 0; j <= last; ++j) {
        double dot = 0;
        for (int64_t d = 0; d < D; ++d) dot += q[size_t(i)][size_t(h * D + d)] * k[size_t(j)][size_t(kvh * D + d)];
        s[size_t(j)] = dot * scale + (keyValid[size_t(j)] ? 0.0 : std::numeric_limits<double>::lowest());
        top = std::max(top, s[size_t(j)]);
      }
      double sum = 0;
      for (auto& e : s) sum += (e = std::exp(e - top));
      for (int64_t j = 0; j <= last; ++j) {
        const double p = s[size_t(j)] / sum;
        weights[base + size_t((h * T + i) * T + j)] = p;
        for (int64_t d = 0; d < D; ++d) out[size_t(i)][size_t(h * D + d)] += p * v[size_t(j)][size_t(kvh * D + d)];
      }
    }
  }
  return out;
}

void checkRows(const Rows& ids, const Rows& other, const char* what) {
  if (other.empty()) return;
  if (other.size() != ids.size()) throw std::runtime_error(std::string("reference: ") + what + " rows differ from ids");
  for (size_t b = 0; b < ids.size(); ++b)
    if (other[b].size() != ids[b].size())
      throw std::runtime_error(std::string("reference: ") + what + " length differs");
}

}  // namespace

std::vector<double> llamaInverseFrequencies(const LlamaSpec& s) {
  const int64_t D = s.headDim;
  std::vector<double> inv(size_t(D / 2));
  for (int64_t i = 0; i < D / 2; ++i) inv[size_t(i)] = 1.0 / std::pow(s.theta, double(2 * i) / double(D));
  if (s.ropeType == "linear") {
    for (auto& f : inv) f /= s.factor;
  } else if (s.ropeType == "llama3") {
    // HF _compute_llama3_parameters: wavelengths longer than old_context / low_freq_factor are
    // divided by the factor, shorter than old_context / high_freq_factor kept, and the band in
    // between interpolated with smooth = (old_context / wavelen - low) / (high - low).
    const double old = double(s.originalMaxPositions);
    const double lowWavelen = old / s.lowFreqFactor, highWavelen = old / s.highFreqFactor;
    for (auto& f : inv) {
      const double wavelen = 2.0 * M_PI / f;
      if (wavelen > lowWavelen) {
        f = f / s.factor;
      } else if (wavelen >= highWavelen) {
        const double smooth = (old / wavelen - s.lowFreqFactor) / (s.highFreqFactor - s.lowFreqFactor);
        f = (1.0 - smooth) * f / s.factor + smooth * f;
      }
    }
  } else if (s.ropeType != "default") {
    throw std::runtime_error("reference: rope type " + s.ropeType);
  }
  return inv;
}

std::vector<double> rotate(const std::vector<double>& x, const std::vector<double>& invFreq, int64_t position) {
  // out = x * cos + rotate_half(x) * sin; dims i and i + D/2 share the angle position * inv_freq_i.
  const size_t half = x.size() / 2;
  std::vector<double> out(x.size());
  for (size_t i = 0; i < half; ++i) {
    const double angle = double(position) * invFreq[i];
    const double c = std::cos(angle), s = std::sin(angle);
    out[i] = x[i] * c - x[i + half] * s;
    out[i + half] = x[i + half] * c + x[i] * s;
  }
  return out;
}

Output bertForward(const BertSpec& spec, const Weights& w, const Rows& ids, const Rows& types, const Rows& mask) {
  checkRows(ids, types, "token types");
  checkRows(ids, mask, "mask");
  const auto& p = spec.prefix;
  const auto& words = get(w, p + "embeddings.word_embeddings.weight");
  const auto& positions = get(w, p + "embeddings.position_embeddings.weight");
  const auto& typeTable = get(w, p + "embeddings.token_type_embeddings.weight");
  const int64_t C = spec.hidden, H = spec.heads, D = C / H, V = words.shape.at(0);
  const int64_t B = int64_t(ids.size()), T = B ? int64_t(ids[0].size()) : 0;

  Output out;
  out.batch = B, out.length = T, out.vocab = V;
  out.logits.assign(size_t(B * T * V), 0.0);
  out.attentions.assign(size_t(spec.layers), Vec(size_t(B * H * T * T), 0.0));
  for (int64_t b = 0; b < B; ++b) {
    Mat x(static_cast<size_t>(T), Vec(static_cast<size_t>(C)));
    std::vector<bool> valid(size_t(T), true);
    for (int64_t t = 0; t < T; ++t) {
      const int64_t id = ids[size_t(b)][size_t(t)];
      const int64_t tt = types.empty() ? 0 : types[size_t(b)][size_t(t)];
      if (!mask.empty()) valid[size_t(t)] = mask[size_t(b)][size_t(t)] != 0;
      for (int64_t c = 0; c < C; ++c)
        x[size_t(t)][size_t(c)] =
            words.data[size_t(id * C + c)] + positions.data[size_t(t * C + c)] + typeTable.data[size_t(tt * C + c)];
    }
    x = layerNorm(x, w, p + "embeddings.LayerNorm", spec.eps);
    for (int64_t l = 0; l < spec.layers; ++l) {
      const auto L = p + "encoder.layer." + std::to_string(l) + ".";
      const Mat q = linear(x, w, L + "attention.self.query", true);
      const Mat k = linear(x, w, L + "attention.self.key", true);
      const Mat v = linear(x, w, L + "attention.self.value", true);
      const Mat ctx = attention(q, k, v, H, H, D, spec.causal, valid, out.attentions[size_t(l)], size_t(b * H * T * T));
      Mat a = linear(ctx, w, L + "attention.output.dense", true);
      addInto(a, x);
      a = layerNorm(a, w, L + "attention.output.LayerNorm", spec.eps);
      Mat f =
          linear(applyAct(linear(a, w, L + "intermediate.dense", true), spec.activation), w, L + "output.dense", true);
      addInto(f, a);
      x = layerNorm(f, w, L + "output.LayerNorm", spec.eps);
    }
    // MLM head: transform -> act -> LN -> decoder (word embeddings) + bias.
    Mat h = applyAct(linear(x, w, "cls.predictions.transform.dense", true), spec.activation);
    h = layerNorm(h, w, "cls.predictions.transform.LayerNorm", spec.eps);
    const Array* bias = find(w, "cls.predictions.bias");
    if (!bias) bias = &get(w, "cls.predictions.decoder.bias");
    for (int64_t t = 0; t < T; ++t)
      for (int64_t vId = 0; vId < V; ++vId) {
        double s = bias->data[size_t(vId)];
        for (int64_t c = 0; c < C; ++c) s += h[size_t(t)][size_t(c)] * words.data[size_t(vId * C + c)];
        out.logits[size_t((b * T + t) * V + vId)] = s;
      }
  }
  return out;
}

Output llamaForward(const LlamaSpec& spec, const Weights& w, const Rows& ids) {
  const auto& p = spec.prefix;
  const auto& embed = get(w, p + "embed_tokens.weight");
  const int64_t C = spec.hidden, H = spec.heads, Hkv = spec.kvHeads, D = spec.headDim, V = embed.shape.at(0);
  const int64_t B = int64_t(ids.size()), T = B ? int64_t(ids[0].size()) : 0;
  const auto invFreq = llamaInverseFrequencies(spec);
  const Array& head = spec.tied ? embed : get(w, "lm_head.weight");

  Output out;
  out.batch = B, out.length = T, out.vocab = V;
  out.logits.assign(size_t(B * T * V), 0.0);
  out.attentions.assign(size_t(spec.layers), Vec(size_t(B * H * T * T), 0.0));
  const std::vector<bool> valid(size_t(T), true);
  // Rotates every head of every position of x [T][heads*D].
  auto rope = [&](Mat x, int64_t heads) {
    for (int64_t t = 0; t < T; ++t)
      for (int64_t h = 0; h < heads; ++h) {
        Vec part(x[size_t(t)].begin() + h * D, x[size_t(t)].begin() + (h + 1) * D);
        part = rotate(part, invFreq, t);
        std::copy(part.begin(), part.end(), x[size_t(t)].begin() + h * D);
      }
    return x;
  };
  for (int64_t b = 0; b < B; ++b) {
    Mat x(static_cast<size_t>(T), Vec(static_cast<size_t>(C)));
    for (int64_t t = 0; t < T; ++t)
      for (int64_t c = 0; c < C; ++c) x[size_t(t)][size_t(c)] = embed.data[size_t(ids[size_t(b)][size_t(t)] * C + c)];
    for (int64_t l = 0; l < spec.layers; ++l) {
      const auto L = p + "layers." + std::to_string(l) + ".";
      const Mat h = rmsNorm(x, get(w, L + "input_layernorm.weight"), spec.eps);
      const Mat q = rope(linear(h, w, L + "self_attn.q_proj", spec.qkvBias), H);
      const Mat k = rope(linear(h, w, L + "self_attn.k_proj", spec.qkvBias), Hkv);
      const Mat v = linear(h, w, L + "self_attn.v_proj", spec.qkvBias);
      const Mat ctx =
          attention(q, k, v, H, Hkv, D, /*causal=*/true, valid, out.attentions[size_t(l)], size_t(b * H * T * T));
      addInto(x, linear(ctx, w, L + "self_attn.o_proj", spec.outputBias));
      const Mat m = rmsNorm(x, get(w, L + "post_attention_layernorm.weight"), spec.eps);
      Mat gate = applyAct(linear(m, w, L + "mlp.gate_proj", spec.mlpBias), "silu");
      const Mat up = linear(m, w, L + "mlp.up_proj", spec.mlpBias);
      for (size_t t = 0; t < gate.size(); ++t)
        for (size_t i = 0; i < gate[t].size(); ++i) gate[t][i] *= up[t][i];
      addInto(x, linear(gate, w, L + "mlp.down_proj", spec.mlpBias));
    }
    const Mat hidden = rmsNorm(x, get(w, p + "norm.weight"), spec.eps);
    for (int64_t t = 0; t < T; ++t)
      for (int64_t vId = 0; vId < V; ++vId) {
        double s = 0;
        for (int64_t c = 0; c < C; ++c) s += hidden[size_t(t)][size_t(c)] * head.data[size_t(vId * C + c)];
        out.logits[size_t((b * T + t) * V + vId)] = s;
      }
  }
  return out;
}

}  // namespace hh::test::ref
