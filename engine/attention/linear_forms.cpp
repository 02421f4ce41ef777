// Quadratic and chunked forms of every update rule (declared in linear_attention.h).
// Shapes: fq, fk [B,H,T,F]; v [B,H,T,D]; gates as in RuleInputs.
// Decays are handled in log space: for gated and decay rules L_t = sum_{l<=t} log g_l, so the
// product of gates between key j and query i is exp(L_i - L_j) with L_i - L_j <= 0 for j <= i.
// Chunked forms restart L at every chunk to keep those differences small.
#include <torch/autograd.h>
#include <torch/types.h>

#include <limits>

#include "engine/attention/chunked_product.h"
#include "engine/attention/form_helpers.h"
#include "engine/attention/linear_attention.h"

namespace hh::attn {

using detail::accumulateType;
using detail::deltaNormalize;
using detail::kNegInf;
using detail::withOnes;

namespace {

// exp(L_i - L_j) for j <= i (else 0): L [B,H,T] -> [B,H,T,T]
torch::Tensor pairDecay(const torch::Tensor& logCum, const torch::Tensor& causal) {
  auto diff = logCum.unsqueeze(-1) - logCum.unsqueeze(-2);
  return torch::exp(diff.masked_fill(causal.logical_not(), kNegInf));
}

torch::Tensor lowerMask(int64_t t, const torch::Tensor& like) {
  return torch::ones({t, t}, like.options().dtype(torch::kBool)).tril();
}

// The additive rule's weights a = mask(q k^T) / (rowsum + eps) [B,H,T,T] from q, k [B,H,T,F]
// (mask: j <= i when causal), as one autograd node: the forward works in place on the product,
// and the backward needs only a and the row sums,
//   gs = (ga - rowsum(ga * a)) / (rowsum + eps) on the kept pairs, gq = gs k, gk = gs^T q,
// where the composed ops (mask, sum, divide) kept the scores and took about twice the passes over
// the [B,H,T,T] tensors. The forward's values are the composed ops' to the bit.
class NormalizedScores : public torch::autograd::Function<NormalizedScores> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& q, const torch::Tensor& k,
                               bool causal, double eps) {
    auto a = torch::matmul(q, k.transpose(-1, -2));
    if (causal) a.tril_();
    const auto den = a.sum(-1, true).add_(eps);  // [B,H,T,1]
    a.div_(den);
    ctx->save_for_backward({q, k, a, den});
    ctx->saved_data["causal"] = causal;
    return a;
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto &q = saved[0], &k = saved[1], &a = saved[2], &den = saved[3];
    auto gs = grads[0] - (grads[0] * a).sum(-1, true);
    gs.div_(den);
    if (ctx->saved_data["causal"].toBool()) gs.tril_();
    const auto gq = ctx->needs_input_grad(0) ? torch::matmul(gs, k) : torch::Tensor();
    const auto gk = ctx->needs_input_grad(1) ? torch::matmul(gs.transpose(-1, -2), q) : torch::Tensor();
    return {gq, gk, torch::Tensor(), torch::Tensor()};
  }
};

// Delta rule within one block starting from state S: returns (Y, U) with
// (I + diag(beta) strict_tril(K K^T)) U = diag(beta) (V - K S),  Y = Q S + tril(Q K^T) U.
std::pair<torch::Tensor, torch::Tensor> deltaBlock(const torch::Tensor& q, const torch::Tensor& k,
                                                   const torch::Tensor& v, const torch::Tensor& beta,
                                                   const torch::Tensor& state) {
  // q, k [B,H,C,F]; v [B,H,C,D]; beta [B,H,C]; state [B,H,F,D] or undefined (zero)
  const int64_t c = q.size(2);
  const auto strictLower = torch::ones({c, c}, q.options()).tril(-1);
  const auto eye = torch::eye(c, q.options());
  const auto system = eye + beta.unsqueeze(-1) * (torch::matmul(k, k.transpose(-1, -2)) * strictLower);
  auto rhs = state.defined() ? v - torch::matmul(k, state) : v;
  rhs = beta.unsqueeze(-1) * rhs;
  const auto u = torch::linalg_solve_triangular(system, rhs, /*upper=*/false, /*left=*/true, /*unitriangular=*/true);
  auto y = torch::matmul(torch::matmul(q, k.transpose(-1, -2)) * torch::ones({c, c}, q.options()).tril(), u);
  if (state.defined()) y = y + torch::matmul(q, state);
  return {y, u};
}
}  // namespace

torch::Tensor linearWeights(const torch::Tensor& fq, const torch::Tensor& fk, const RuleInputs& gates,
                            const RuleOptions& options) {
  // -> [B,H,T,T]
  validateLinearInputs(fq, fk, torch::Tensor(), gates, options);
  const auto type = accumulateType(fq);
  auto q = fq.to(type), k = fk.to(type);
  const int64_t t = q.size(2);
  switch (options.rule) {
    case UpdateRule::Additive:
    case UpdateRule::Gated: {
      if (options.rule == UpdateRule::Additive) return NormalizedScores::apply(q, k, options.causal, options.eps);
      auto scores = torch::matmul(q, k.transpose(-1, -2));  // [B,H,T,T]
      if (options.causal) scores = scores * pairDecay(torch::log(gates.gate.to(type)).cumsum(-1), lowerMask(t, q));
      return scores / (scores.sum(-1, true) + options.eps);
    }
    case UpdateRule::Delta:
    case UpdateRule::DeltaMao: {
      q = deltaNormalize(q, options.rule);
      k = deltaNormalize(k, options.rule);
      const auto beta = gates.beta.to(type);
      const auto eyeValues = torch::eye(t, q.options()).expand({q.size(0), q.size(1), t, t});
      // The weights are the block output for V = I: y = A V for every V.
      return deltaBlock(q, k, eyeValues, beta, torch::Tensor()).first;
    }
    case UpdateRule::Decay:
    case UpdateRule::DecayMao: {  // Decay on values LinearAttention has scaled
      const auto causal = lowerMask(t, q);
      const auto logA = torch::log(gates.keyDecay.to(type)).cumsum(2);  // [B,H,T,F]
      auto diff = logA.unsqueeze(3) - logA.unsqueeze(2);                // [B,H,T,T,F]
      diff = diff.masked_fill(causal.logical_not().unsqueeze(-1), kNegInf);
      return (q.unsqueeze(3) * k.unsqueeze(2) * torch::exp(diff)).sum(-1);
    }
  }
  throw std::logic_error("linearWeights: unhandled rule");
}

torch::Tensor linearQuadratic(const torch::Tensor& fq, const torch::Tensor& fk, const torch::Tensor& v,
                              const RuleInputs& gates, const RuleOptions& options) {
  // -> [B,H,T,D]
  validateLinearInputs(fq, fk, v, gates, options);
  const auto type = accumulateType(fq);
  if (formRule(options.rule) != UpdateRule::Decay) {
    return torch::matmul(linearWeights(fq, fk, gates, options), v.to(type)).to(v.scalar_type());
  }
  // Decay: the value-side gates make the weight depend on the output channel, so build the
  // pairwise decays per block of queries: y_ie = sum_j A_ij exp(Lb_ie - Lb_je) v_je.
  const auto q = fq.to(type), k = fk.to(type), vv = v.to(type);
  const int64_t t = q.size(2);
  const auto weights = linearWeights(fq, fk, gates, options);          // [B,H,T,T]
  const auto logB = torch::log(gates.valueDecay.to(type)).cumsum(2);  // [B,H,T,D]
  const auto causal = lowerMask(t, q);
  std::vector<torch::Tensor> rows;
  const int64_t block = 64;
  for (int64_t i0 = 0; i0 < t; i0 += block) {
    const int64_t len = std::min(block, t - i0);
    auto diff = logB.narrow(2, i0, len).unsqueeze(3) - logB.unsqueeze(2);  // [B,H,len,T,D]
    diff = diff.masked_fill(causal.narrow(0, i0, len).logical_not().unsqueeze(-1), kNegInf);
    const auto w = weights.narrow(2, i0, len).unsqueeze(-1);               // [B,H,len,T,1]
    rows.push_back((w * torch::exp(diff) * vv.unsqueeze(2)).sum(3));       // [B,H,len,D]
  }
  return torch::cat(rows, 2).to(v.scalar_type());
}

namespace {
// The chunk loops below start from `carry` when given (and leave the final state there): the
// prefill of generation continues a RecurrentState; plain training passes nullptr (zero state).
torch::Tensor startState(torch::Tensor* carry, std::vector<int64_t> shape, const torch::Tensor& like) {
  return carry && carry->defined() ? carry->to(like.scalar_type()) : torch::zeros(shape, like.options());
}

torch::Tensor gatedChunked(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                           const torch::Tensor& gate, const RuleOptions& options, torch::Tensor* carry = nullptr) {
  // q, k [B,H,T,F]; v [B,H,T,D]; gate [B,H,T] (undefined: the additive rule); carry [B,H,F,D+1]
  const int64_t t = q.size(2), d = v.size(-1);
  const auto vOnes = withOnes(v);  // [B,H,T,D+1]
  auto state = startState(carry, {q.size(0), q.size(1), q.size(3), d + 1}, q);
  std::vector<torch::Tensor> outs;
  for (int64_t t0 = 0; t0 < t; t0 += options.chunkSize) {
    const int64_t len = std::min(options.chunkSize, t - t0);
    const auto qc = q.narrow(2, t0, len), kc = k.narrow(2, t0, len), vc = vOnes.narrow(2, t0, len);
    const auto logCum = gate.defined() ? torch::log(gate.narrow(2, t0, len)).cumsum(-1)
                                       : torch::zeros({q.size(0), q.size(1), len}, q.options());  // [B,H,len]
    const auto decay = pairDecay(logCum, lowerMask(len, q));
    auto o = torch::matmul(torch::matmul(qc, kc.transpose(-1, -2)) * decay, vc);
    o = o + torch::matmul(qc * torch::exp(logCum).unsqueeze(-1), state);
    const auto last = logCum.narrow(-1, len - 1, 1);  // [B,H,1]
    state = torch::exp(last).unsqueeze(-1) * state +
            torch::matmul((kc * torch::exp(last - logCum).unsqueeze(-1)).transpose(-1, -2), vc);
    outs.push_back(o);
  }
  if (carry) *carry = state;
  const auto o = torch::cat(outs, 2);
  return o.narrow(-1, 0, d) / (o.narrow(-1, d, 1) + options.eps);
}

torch::Tensor decayChunked(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                           const torch::Tensor& keyDecay, const torch::Tensor& valueDecay,
                           const RuleOptions& options, torch::Tensor* carry = nullptr) {
  // q, k [B,H,T,F]; v [B,H,T,D]; keyDecay [B,H,T,F]; valueDecay [B,H,T,D]; carry [B,H,F,D]
  const int64_t t = q.size(2);
  auto state = startState(carry, {q.size(0), q.size(1), q.size(3), v.size(3)}, q);  // [B,H,F,D]
  std::vector<torch::Tensor> outs;
  for (int64_t t0 = 0; t0 < t; t0 += options.chunkSize) {
    const int64_t len = std::min(options.chunkSize, t - t0);
    const auto qc = q.narrow(2, t0, len), kc = k.narrow(2, t0, len), vc = v.narrow(2, t0, len);
    const auto la = torch::log(keyDecay.narrow(2, t0, len)).cumsum(2);    // [B,H,len,F]
    const auto lb = torch::log(valueDecay.narrow(2, t0, len)).cumsum(2);  // [B,H,len,D]
    const auto causal = lowerMask(len, q).logical_not().unsqueeze(-1);     // [len,len,1]
    const auto da = torch::exp((la.unsqueeze(3) - la.unsqueeze(2)).masked_fill(causal, kNegInf));  // [B,H,len,len,F]
    const auto db = torch::exp((lb.unsqueeze(3) - lb.unsqueeze(2)).masked_fill(causal, kNegInf));  // [B,H,len,len,D]
    const auto a = (qc.unsqueeze(3) * kc.unsqueeze(2) * da).sum(-1, true);                       // [B,H,len,len,1]
    auto o = (a * db * vc.unsqueeze(2)).sum(3);                                                   // [B,H,len,D]
    o = o + torch::matmul(qc * torch::exp(la), state) * torch::exp(lb);
    const auto lastA = la.narrow(2, len - 1, 1), lastB = lb.narrow(2, len - 1, 1);  // [B,H,1,F], [B,H,1,D]
    state = torch::exp(lastA).transpose(-1, -2) * torch::exp(lastB) * state +
            torch::matmul((kc * torch::exp(lastA - la)).transpose(-1, -2), vc * torch::exp(lastB - lb));
    outs.push_back(o);
  }
  if (carry) *carry = state;
  return torch::cat(outs, 2);
}

torch::Tensor deltaChunked(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                           const torch::Tensor& beta, const RuleOptions& options, torch::Tensor* carry = nullptr) {
  // q, k [B,H,T,F] (normalised); v [B,H,T,D]; beta [B,H,T]; carry [B,H,F,D]
  const int64_t t = q.size(2);
  auto state = startState(carry, {q.size(0), q.size(1), q.size(3), v.size(3)}, q);  // [B,H,F,D]
  std::vector<torch::Tensor> outs;
  for (int64_t t0 = 0; t0 < t; t0 += options.chunkSize) {
    const int64_t len = std::min(options.chunkSize, t - t0);
    const auto kc = k.narrow(2, t0, len);
    auto [y, u] = deltaBlock(q.narrow(2, t0, len), kc, v.narrow(2, t0, len), beta.narrow(2, t0, len), state);
    state = state + torch::matmul(kc.transpose(-1, -2), u);
    outs.push_back(y);
  }
  if (carry) *carry = state;
  return torch::cat(outs, 2);
}
}  // namespace

torch::Tensor linearChunked(const torch::Tensor& fq, const torch::Tensor& fk, const torch::Tensor& v,
                            const RuleInputs& gates, const RuleOptions& options) {
  // -> [B,H,T,D]
  validateLinearInputs(fq, fk, v, gates, options);
  const auto type = accumulateType(fq);
  const auto q = fq.to(type), k = fk.to(type), vv = v.to(type);
  torch::Tensor y;
  if (!options.causal) {
    // Non-causal additive: one global state, O(T F D).
    const auto vOnes = withOnes(vv);
    const auto o = torch::matmul(q, torch::matmul(k.transpose(-1, -2), vOnes));  // [B,H,T,D+1]
    const int64_t d = v.size(-1);
    y = o.narrow(-1, 0, d) / (o.narrow(-1, d, 1) + options.eps);
  } else {
    switch (options.rule) {
      case UpdateRule::Additive:
        y = causalAdditiveChunked(q, k, vv, options.chunkSize, options.eps);
        break;
      case UpdateRule::Gated:
        y = gatedChunked(q, k, vv, gates.gate.to(type), options);
        break;
      case UpdateRule::Decay:
      case UpdateRule::DecayMao:  // Decay on values LinearAttention has scaled
        y = decayChunked(q, k, vv, gates.keyDecay.to(type), gates.valueDecay.to(type), options);
        break;
      case UpdateRule::Delta:
      case UpdateRule::DeltaMao:
        y = deltaChunked(deltaNormalize(q, options.rule), deltaNormalize(k, options.rule), vv, gates.beta.to(type),
                         options);
        break;
    }
  }
  return y.to(v.scalar_type());
}

torch::Tensor linearPrefill(RecurrentState& state, const torch::Tensor& fq, const torch::Tensor& fk,
                            const torch::Tensor& v, const RuleInputs& gates, const RuleOptions& options) {
  // fq, fk [B,H,T,F]; v [B,H,T,D]; state S [B,H,F,D] (z [B,H,F]) -> y [B,H,T,D], state advanced by T
  validateLinearInputs(fq, fk, v, gates, options);
  if (!options.causal) throw std::invalid_argument("prefill continues a causal state; this attention is bidirectional");
  const auto type = state.S.scalar_type();
  auto q = fq.to(type), k = fk.to(type);
  const auto vv = v.to(type);
  const int64_t t = q.size(2), d = vv.size(-1);
  torch::Tensor y;
  switch (options.rule) {
    case UpdateRule::Additive:
    case UpdateRule::Gated: {
      auto carry = torch::cat({state.S, state.z.unsqueeze(-1)}, -1);  // [B,H,F,D+1]
      const auto gate = options.rule == UpdateRule::Gated ? gates.gate.to(type) : torch::Tensor();
      y = gatedChunked(q, k, vv, gate, options, &carry);
      state.S = carry.narrow(-1, 0, d).contiguous();
      state.z = carry.select(-1, d).contiguous();
      if (gate.defined()) state.lastDecay = gate.select(2, t - 1).to(torch::kFloat);
      break;
    }
    case UpdateRule::Decay:
    case UpdateRule::DecayMao: {  // Decay on values LinearAttention has scaled
      y = decayChunked(q, k, vv, gates.keyDecay.to(type), gates.valueDecay.to(type), options, &state.S);
      state.lastDecay = (gates.keyDecay.select(2, t - 1).mean(-1) * gates.valueDecay.select(2, t - 1).mean(-1))
                            .to(torch::kFloat);
      break;
    }
    case UpdateRule::Delta:
    case UpdateRule::DeltaMao:
      y = deltaChunked(deltaNormalize(q, options.rule), deltaNormalize(k, options.rule), vv, gates.beta.to(type),
                       options, &state.S);
      break;
  }
  state.position += t;
  return y.to(v.scalar_type());
}

}  // namespace hh::attn
