// The three forms of the window-hybrid attention (declared in window_attention.h).
// Everything is computed in the accumulate type (fp32, fp64 for fp64 inputs) and returned in v's.
#include "engine/attention/window_attention.h"

#include <ATen/core/grad_mode.h>
#include <torch/types.h>

#include <cmath>
#include <limits>
#include <sstream>
#include <stdexcept>

#include "engine/attention/chunked_product.h"
#include "engine/attention/form_helpers.h"

namespace hh::attn {

using detail::accumulateType;
using detail::kNegInf;
using detail::withOnes;

namespace {

// Key positions [j0, j1) against query positions [i0, i1): which pairs are near (the window).
torch::Tensor nearMask(int64_t i0, int64_t i1, int64_t j0, int64_t j1, const WindowOptions& o, torch::Device device) {
  const auto opts = torch::TensorOptions().dtype(torch::kLong).device(device);
  const auto diff = torch::arange(i0, i1, opts).unsqueeze(1) - torch::arange(j0, j1, opts).unsqueeze(0);  // i - j
  return o.causal ? (diff >= 0).logical_and(diff < o.window) : diff.abs() < o.window;
}

// 1 / sqrt(D): the softmax score is q.k / sqrt(D).
double scoreScale(const WindowInputs& in) { return 1.0 / std::sqrt(double(in.q.size(-1))); }

// gamma [H] -> [1,H,1,1] in the accumulate type.
torch::Tensor mixOf(const WindowInputs& in, torch::ScalarType type) { return in.mix.to(type).view({1, -1, 1, 1}); }

// keyMask [B,T] restricted to keys [j0, j1) as [B,1,1,len], or undefined.
torch::Tensor keyColumns(const torch::Tensor& keyMask, int64_t j0, int64_t j1) {
  return keyMask.defined() ? keyMask.narrow(1, j0, j1 - j0).unsqueeze(1).unsqueeze(1) : keyMask;
}

// The near term gamma exp(s - c) over the allowed pairs (0 elsewhere) and the factor exp(-c) the
// far term takes, with the row shift c = max(0, max over the allowed pairs of s) (window_attention.h).
// s [B,H,Tq,Tk], allowed bool broadcastable to it, gamma [1,H,1,1].
struct NearTerm {
  torch::Tensor weights;   // [B,H,Tq,Tk]
  torch::Tensor farScale;  // [B,H,Tq,1]
};
NearTerm nearTerm(const torch::Tensor& scores, const torch::Tensor& allowed, const torch::Tensor& gamma) {
  const auto masked = scores.masked_fill(allowed.logical_not(), kNegInf);
  const auto shift = std::get<0>(masked.max(-1, true)).clamp_min(0.0);  // a row with no key: 0
  return {gamma * torch::exp(masked - shift), torch::exp(-shift)};
}

// [B,H,T,E] -> the same shifted `by` positions later along T (zeros in front).
torch::Tensor shiftLater(const torch::Tensor& x, int64_t by) {
  const int64_t t = x.size(2);
  if (by >= t) return torch::zeros_like(x);
  return torch::constant_pad_nd(x.narrow(2, 0, t - by), {0, 0, by, 0});
}

// sum_{j <= i} (a_i . b_j) c_j, [B,H,T,F] x [B,H,T,F] x [B,H,T,E] -> [B,H,T,E], differentiable.
torch::Tensor causalSums(const torch::Tensor& a, const torch::Tensor& b, const torch::Tensor& c, int64_t chunk) {
  const bool grad = at::GradMode::is_enabled() && (a.requires_grad() || b.requires_grad() || c.requires_grad());
  if (!grad) return chunkedLinearProduct(a, b, c, chunk, /*antiCausal=*/false);
  const int64_t B = a.size(0), H = a.size(1), T = a.size(2), F = a.size(3), E = c.size(3);
  const int64_t n = (T + chunk - 1) / chunk, pad = n * chunk - T;
  auto blocks = [&](const torch::Tensor& x, int64_t width) {  // [B,H,T,w] -> [B,H,N,C,w]
    return torch::constant_pad_nd(x, {0, 0, 0, pad}).view({B, H, n, chunk, width});
  };
  const auto ac = blocks(a, F), bc = blocks(b, F), cc = blocks(c, E);
  const auto states = torch::matmul(bc.transpose(-1, -2), cc);                               // [B,H,N,F,E]
  const auto before = torch::constant_pad_nd(states.cumsum(2), {0, 0, 0, 0, 1, 0}).narrow(2, 0, n);  // exclusive
  const auto lower = torch::ones({chunk, chunk}, a.options().dtype(torch::kBool)).tril();
  const auto intra = torch::matmul(torch::matmul(ac, bc.transpose(-1, -2)).masked_fill(lower.logical_not(), 0.0), cc);
  return (torch::matmul(ac, before) + intra).view({B, H, n * chunk, E}).narrow(2, 0, T);
}

// The far term's [numerator, denominator] per query: [B,H,T,D+1], before the (1 - gamma) factor.
torch::Tensor farSums(const torch::Tensor& fq, const torch::Tensor& fk, const torch::Tensor& ve,
                      const WindowOptions& o) {
  auto out = causalSums(fq, shiftLater(fk, o.window), shiftLater(ve, o.window), o.chunkSize);
  if (!o.causal) {  // keys j >= i + W: the same on the reversed sequence
    const auto flip = [](const torch::Tensor& x) { return x.flip(2); };
    out = out + flip(causalSums(flip(fq), shiftLater(flip(fk), o.window), shiftLater(flip(ve), o.window), o.chunkSize));
  }
  return out;
}

torch::Tensor normalised(const torch::Tensor& sums, double eps) {
  // [.., D+1] -> [.., D]
  const int64_t d = sums.size(-1) - 1;
  return sums.narrow(-1, 0, d) / (sums.narrow(-1, d, 1) + eps);
}
}  // namespace

WindowOptions windowOptions(const LinearAttentionConfig& config) {
  return {config.window, config.rule.causal, config.rule.chunkSize, config.rule.eps};
}

void validateWindowInputs(const WindowInputs& in, const WindowOptions& o) {
  if (o.window < 1) throw std::invalid_argument("the window must hold at least one key");
  if (o.chunkSize < 1) throw std::invalid_argument("chunk size must be at least 1");
  for (const auto* t : {&in.q, &in.k, &in.fq, &in.fk, &in.v})
    if (!t->defined() || t->dim() != 4) throw std::invalid_argument("window attention needs q, k, v, fq, fk as [B,H,T,*]");
  if (in.q.sizes() != in.k.sizes() || in.fq.sizes() != in.fk.sizes() || in.q.sizes().slice(0, 3) != in.fq.sizes().slice(0, 3) ||
      in.v.sizes().slice(0, 3) != in.q.sizes().slice(0, 3)) {
    std::ostringstream os;
    os << "window attention: q " << in.q.sizes() << ", k " << in.k.sizes() << ", fq " << in.fq.sizes() << ", fk "
       << in.fk.sizes() << ", v " << in.v.sizes() << " do not agree";
    throw std::invalid_argument(os.str());
  }
  if (!in.mix.defined() || in.mix.dim() != 1 || in.mix.size(0) != in.q.size(1))
    throw std::invalid_argument("window attention: the mix must be one value per head");
}

torch::Tensor windowWeights(const WindowInputs& in, const WindowOptions& o) {
  validateWindowInputs(in, o);
  const auto type = accumulateType(in.v);
  const int64_t t = in.q.size(2);
  const auto gamma = mixOf(in, type);
  const auto nearPairs = nearMask(0, t, 0, t, o, in.q.device());  // [T,T]
  auto far = nearPairs.logical_not();
  if (o.causal) far = far.logical_and(torch::ones({t, t}, nearPairs.options()).tril());
  auto allowed = nearPairs.unsqueeze(0).unsqueeze(0);
  if (in.keyMask.defined()) allowed = allowed.logical_and(keyColumns(in.keyMask, 0, t));
  const auto scores = torch::matmul(in.q.to(type), in.k.to(type).transpose(-1, -2)) * scoreScale(in);
  const auto linear = torch::matmul(in.fq.to(type), in.fk.to(type).transpose(-1, -2)).masked_fill(far.logical_not(), 0.0);
  const auto near = nearTerm(scores, allowed, gamma);
  const auto a = near.weights + (1 - gamma) * linear * near.farScale;
  return a / (a.sum(-1, true) + o.eps);
}

torch::Tensor windowQuadratic(const WindowInputs& in, const WindowOptions& o) {
  return torch::matmul(windowWeights(in, o), in.v.to(accumulateType(in.v))).to(in.v.scalar_type());
}

torch::Tensor windowChunked(const WindowInputs& in, const WindowOptions& o) {
  validateWindowInputs(in, o);
  const auto type = accumulateType(in.v);
  const int64_t t = in.q.size(2);
  const auto gamma = mixOf(in, type);
  const auto q = in.q.to(type), k = in.k.to(type), ve = withOnes(in.v.to(type));
  const double scale = scoreScale(in);
  const auto far = (1 - gamma) * farSums(in.fq.to(type), in.fk.to(type), ve, o);  // [B,H,T,D+1]
  std::vector<torch::Tensor> blocks, farScales;
  for (int64_t i0 = 0; i0 < t; i0 += o.chunkSize) {
    const int64_t i1 = std::min(t, i0 + o.chunkSize);
    const int64_t j0 = std::max<int64_t>(0, i0 - o.window + 1), j1 = o.causal ? i1 : std::min(t, i1 + o.window - 1);
    auto allowed = nearMask(i0, i1, j0, j1, o, q.device()).unsqueeze(0).unsqueeze(0);
    if (in.keyMask.defined()) allowed = allowed.logical_and(keyColumns(in.keyMask, j0, j1));
    const auto scores = torch::matmul(q.narrow(2, i0, i1 - i0), k.narrow(2, j0, j1 - j0).transpose(-1, -2)) * scale;
    const auto near = nearTerm(scores, allowed, gamma);
    blocks.push_back(torch::matmul(near.weights, ve.narrow(2, j0, j1 - j0)));
    farScales.push_back(near.farScale);
  }
  return normalised(torch::cat(blocks, 2) + far * torch::cat(farScales, 2), o.eps).to(in.v.scalar_type());
}

RecurrentState initialWindowState(int64_t batch, int64_t heads, int64_t featureDim, int64_t headDim,
                                  const WindowOptions& options, at::ScalarType dtype, at::Device device) {
  const auto opts = torch::TensorOptions().dtype(dtype == torch::kDouble ? torch::kDouble : torch::kFloat).device(device);
  RecurrentState state;
  state.S = torch::zeros({batch, heads, featureDim, headDim}, opts);
  state.z = torch::zeros({batch, heads, featureDim}, opts);
  state.ringKeys = torch::zeros({batch, heads, options.window, headDim}, opts);
  state.ringValues = torch::zeros({batch, heads, options.window, headDim}, opts);
  state.ringFeatures = torch::zeros({batch, heads, options.window, featureDim}, opts);
  return state;
}

namespace {
// One token of windowStep (checked there). ringValid bool [B,W]: false where the slot holds a
// padded key, which the near term then leaves out (the far term already has its features zero);
// undefined when every key is real.
torch::Tensor stepToken(RecurrentState& state, const WindowInputs& in, const WindowOptions& o,
                        const torch::Tensor& ringValid) {
  const auto type = state.S.scalar_type();
  const auto one = [&](const torch::Tensor& x) { return x.select(2, 0).to(type); };  // [B,H,1,*] -> [B,H,*]
  const auto q = one(in.q), fq = one(in.fq);
  const int64_t w = o.window, slot = state.position % w;
  if (state.position >= w) {  // token position - W leaves the window for the far term
    const auto leaving = state.ringFeatures.select(2, slot);  // [B,H,F]
    state.S.add_(leaving.unsqueeze(-1) * state.ringValues.select(2, slot).unsqueeze(-2));
    state.z.add_(leaving);
  }
  state.ringKeys.select(2, slot).copy_(one(in.k));
  state.ringValues.select(2, slot).copy_(one(in.v));
  state.ringFeatures.select(2, slot).copy_(one(in.fk));
  const int64_t filled = std::min(state.position + 1, w);
  auto scores = torch::matmul(state.ringKeys, q.unsqueeze(-1)).squeeze(-1) * scoreScale(in);  // [B,H,W]
  if (filled < w) scores.narrow(-1, filled, w - filled).fill_(kNegInf);
  if (ringValid.defined()) scores.masked_fill_(ringValid.logical_not().unsqueeze(1), kNegInf);
  const auto shift = std::get<0>(scores.max(-1, true)).clamp_min(0.0);  // [B,H,1]
  const auto e = torch::exp(scores - shift);
  const auto gamma = in.mix.to(type).view({1, -1, 1});
  const auto farGamma = (1 - gamma) * torch::exp(-shift);
  const auto num = gamma * torch::matmul(e.unsqueeze(-2), state.ringValues).squeeze(-2) +
                   farGamma * torch::matmul(fq.unsqueeze(-2), state.S).squeeze(-2);  // [B,H,D]
  const auto den = gamma * e.sum(-1, true) + farGamma * (fq * state.z).sum(-1, true);
  state.position += 1;
  return (num / (den + o.eps)).unsqueeze(2).to(in.v.scalar_type());
}

WindowInputs tokenOf(const WindowInputs& in, int64_t t) {
  return {in.q.narrow(2, t, 1), in.k.narrow(2, t, 1), in.fq.narrow(2, t, 1), in.fk.narrow(2, t, 1),
          in.v.narrow(2, t, 1), in.mix, {}};
}

void checkStep(const RecurrentState& state, const WindowInputs& in, const WindowOptions& o) {
  validateWindowInputs(in, o);
  if (!o.causal) throw std::invalid_argument("the recurrent form is causal; this attention is bidirectional");
  TORCH_CHECK(in.q.size(2) == 1, "a window step takes one token");
  TORCH_CHECK(state.ringKeys.defined() && state.ringKeys.size(2) == o.window, "the state has no ring buffer of ",
              o.window, " keys (made by initialWindowState?)");
}
}  // namespace

torch::Tensor windowStep(RecurrentState& state, const WindowInputs& in, const WindowOptions& o) {
  checkStep(state, in, o);
  TORCH_CHECK(!in.keyMask.defined(), "a window step takes no key mask: the recurrent state keeps none");
  return stepToken(state, in, o, {});
}

torch::Tensor windowRecurrent(const WindowInputs& in, const WindowOptions& o) {
  validateWindowInputs(in, o);
  auto state = initialWindowState(in.q.size(0), in.q.size(1), in.fq.size(3), in.v.size(3), o, in.v.scalar_type(),
                                  in.v.device());
  // Which ring slots hold real keys: slot t % W takes token t's entry of the key mask [B,T].
  torch::Tensor ringValid;
  if (in.keyMask.defined())
    ringValid =
        torch::ones({in.q.size(0), o.window}, torch::TensorOptions(torch::kBool).device(in.q.device()));  // [B,W]
  std::vector<torch::Tensor> out;
  for (int64_t t = 0; t < in.q.size(2); ++t) {
    const auto token = tokenOf(in, t);
    checkStep(state, token, o);
    if (ringValid.defined()) ringValid.select(1, t % o.window).copy_(in.keyMask.select(1, t));
    out.push_back(stepToken(state, token, o, ringValid));
  }
  return torch::cat(out, 2);
}

torch::Tensor windowPrefill(RecurrentState& state, const WindowInputs& in, const WindowOptions& o) {
  validateWindowInputs(in, o);
  if (!o.causal) throw std::invalid_argument("prefill continues a causal state; this attention is bidirectional");
  // The state keeps no key mask: padded keys would enter S, z and the ring as real ones.
  if (in.keyMask.defined()) throw std::invalid_argument("a window prefill takes no key mask: the recurrent state keeps none");
  if (state.position > 0) {  // continuing: token by token
    std::vector<torch::Tensor> out;
    for (int64_t t = 0; t < in.q.size(2); ++t) out.push_back(windowStep(state, tokenOf(in, t), o));
    return torch::cat(out, 2);
  }
  const auto y = windowChunked(in, o);
  const auto type = state.S.scalar_type();
  const int64_t t = in.q.size(2), w = o.window, far = std::max<int64_t>(0, t - w);
  const auto fk = in.fk.to(type), v = in.v.to(type);
  if (far > 0) {
    state.S.add_(torch::matmul(fk.narrow(2, 0, far).transpose(-1, -2), v.narrow(2, 0, far)));
    state.z.add_(fk.narrow(2, 0, far).sum(2));
  }
  const auto slots = torch::arange(far, t, torch::TensorOptions().dtype(torch::kLong).device(y.device())).remainder(w);
  state.ringKeys.index_copy_(2, slots, in.k.narrow(2, far, t - far).to(type));
  state.ringValues.index_copy_(2, slots, v.narrow(2, far, t - far));
  state.ringFeatures.index_copy_(2, slots, fk.narrow(2, far, t - far));
  state.position = t;
  return y;
}

torch::Tensor windowAttention(AttentionForm form, const WindowInputs& in, const WindowOptions& o) {
  switch (form) {
    case AttentionForm::Quadratic: return windowQuadratic(in, o);
    case AttentionForm::Chunked: return windowChunked(in, o);
    case AttentionForm::Recurrent: return windowRecurrent(in, o);
  }
  return windowChunked(in, o);
}

}  // namespace hh::attn
