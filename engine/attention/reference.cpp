#include "engine/attention/reference.h"

#include <torch/types.h>

#include <cmath>
#include <cstdlib>
#include <vector>

namespace hh::attn {

namespace {
using Acc4 = torch::TensorAccessor<double, 4>;
using Acc3 = torch::TensorAccessor<double, 3>;

torch::Tensor toCpuDouble(const torch::Tensor& t) {
  return t.defined() ? t.detach().to(torch::kCPU, torch::kDouble).contiguous() : t;
}

double dot(const Acc4& a, const Acc4& b, int64_t bi, int64_t h, int64_t i, int64_t j, int64_t f) {
  double s = 0.0;
  for (int64_t x = 0; x < f; ++x) s += a[bi][h][i][x] * b[bi][h][j][x];
  return s;
}

// The delta rule's feature normalisation: L2 (delta) or the sum (delta_mao).
std::vector<double> deltaNormalized(const Acc4& a, int64_t bi, int64_t h, int64_t i, int64_t f, UpdateRule rule) {
  std::vector<double> out(f);
  double n = 0.0;
  for (int64_t x = 0; x < f; ++x) n += rule == UpdateRule::DeltaMao ? a[bi][h][i][x] : a[bi][h][i][x] * a[bi][h][i][x];
  n = (rule == UpdateRule::DeltaMao ? n : std::sqrt(n)) + 1e-6;
  for (int64_t x = 0; x < f; ++x) out[x] = a[bi][h][i][x] / n;
  return out;
}

// Causal weight numerators for additive/gated: w_ij = phi_i . phi_j * prod_{l=j+1..i} g_l.
double gatedScore(const Acc4& q, const Acc4& k, const torch::Tensor& gate, int64_t bi, int64_t h, int64_t i,
                  int64_t j, int64_t f, bool gated) {
  double s = dot(q, k, bi, h, i, j, f);
  if (gated) {
    auto g = gate.accessor<double, 3>();
    for (int64_t l = j + 1; l <= i; ++l) s *= g[bi][h][l];
  }
  return s;
}
}  // namespace

torch::Tensor referenceLinearWeights(const torch::Tensor& fqIn, const torch::Tensor& fkIn, const RuleInputs& gatesIn,
                                     const RuleOptions& options) {
  TORCH_CHECK(options.rule == UpdateRule::Additive || options.rule == UpdateRule::Gated,
              "reference weights exist for the additive and gated rules");
  const auto fq = toCpuDouble(fqIn), fk = toCpuDouble(fkIn), gate = toCpuDouble(gatesIn.gate);
  const int64_t nb = fq.size(0), nh = fq.size(1), t = fq.size(2), f = fq.size(3);
  auto out = torch::zeros({nb, nh, t, t}, torch::kDouble);
  auto q = fq.accessor<double, 4>(), k = fk.accessor<double, 4>();
  auto o = out.accessor<double, 4>();
  const bool gated = options.rule == UpdateRule::Gated;
  for (int64_t b = 0; b < nb; ++b)
    for (int64_t h = 0; h < nh; ++h)
      for (int64_t i = 0; i < t; ++i) {
        const int64_t last = options.causal ? i : t - 1;
        double den = options.eps;
        for (int64_t j = 0; j <= last; ++j) {
          o[b][h][i][j] = gatedScore(q, k, gate, b, h, i, j, f, gated);
          den += o[b][h][i][j];
        }
        for (int64_t j = 0; j <= last; ++j) o[b][h][i][j] /= den;
      }
  return out;
}

namespace {

// The state S (F x D, S[x * d + e]) of head (b, h) after position i of the delta rule (DeltaMao
// normalises k and q first): S += k (beta (v - S^T k))^T; then o_i = S^T q.
void deltaStep(std::vector<double>& S, const Acc4& q, const Acc4& k, const Acc4& v, double beta, int64_t b, int64_t h,
               int64_t i, int64_t f, int64_t d, UpdateRule rule, Acc4& o) {
  const auto kn = deltaNormalized(k, b, h, i, f, rule), qn = deltaNormalized(q, b, h, i, f, rule);
  std::vector<double> u(d);
  for (int64_t e = 0; e < d; ++e) {
    double recalled = 0.0;
    for (int64_t x = 0; x < f; ++x) recalled += S[x * d + e] * kn[x];
    u[e] = beta * (v[b][h][i][e] - recalled);
  }
  for (int64_t x = 0; x < f; ++x)
    for (int64_t e = 0; e < d; ++e) S[x * d + e] += kn[x] * u[e];
  for (int64_t e = 0; e < d; ++e)
    for (int64_t x = 0; x < f; ++x) o[b][h][i][e] += qn[x] * S[x * d + e];
}

// The same for the decay rule: S = (a b^T) * S + k v^T, elementwise decay; then o_i = S^T q.
void decayStep(std::vector<double>& S, const Acc4& q, const Acc4& k, const Acc4& v, const Acc4& keyDecay,
               const Acc4& valueDecay, int64_t b, int64_t h, int64_t i, int64_t f, int64_t d, Acc4& o) {
  for (int64_t x = 0; x < f; ++x)
    for (int64_t e = 0; e < d; ++e)
      S[x * d + e] = keyDecay[b][h][i][x] * valueDecay[b][h][i][e] * S[x * d + e] + k[b][h][i][x] * v[b][h][i][e];
  for (int64_t e = 0; e < d; ++e)
    for (int64_t x = 0; x < f; ++x) o[b][h][i][e] += q[b][h][i][x] * S[x * d + e];
}

}  // namespace

torch::Tensor referenceLinearAttention(const torch::Tensor& fqIn, const torch::Tensor& fkIn, const torch::Tensor& vIn,
                                       const RuleInputs& gatesIn, const RuleOptions& options) {
  const auto fq = toCpuDouble(fqIn), fk = toCpuDouble(fkIn), v = toCpuDouble(vIn);
  const int64_t nb = fq.size(0), nh = fq.size(1), t = fq.size(2), f = fq.size(3), d = v.size(3);
  auto out = torch::zeros({nb, nh, t, d}, torch::kDouble);
  auto o = out.accessor<double, 4>();
  auto va = v.accessor<double, 4>();

  if (options.rule == UpdateRule::Additive || options.rule == UpdateRule::Gated) {
    const auto w = referenceLinearWeights(fq, fk, gatesIn, options);
    auto wa = w.accessor<double, 4>();
    for (int64_t b = 0; b < nb; ++b)
      for (int64_t h = 0; h < nh; ++h)
        for (int64_t i = 0; i < t; ++i)
          for (int64_t j = 0; j < t; ++j)
            for (int64_t e = 0; e < d; ++e) o[b][h][i][e] += wa[b][h][i][j] * va[b][h][j][e];
    return out;
  }

  // Delta and decay: run the state recurrence of the definition, element by element.
  auto q = fq.accessor<double, 4>(), k = fk.accessor<double, 4>();
  const bool delta = options.rule == UpdateRule::Delta || options.rule == UpdateRule::DeltaMao;
  const auto beta = toCpuDouble(gatesIn.beta), keyDecay = toCpuDouble(gatesIn.keyDecay),
             valueDecay = toCpuDouble(gatesIn.valueDecay);
  for (int64_t b = 0; b < nb; ++b)
    for (int64_t h = 0; h < nh; ++h) {
      std::vector<double> S(f * d, 0.0);
      for (int64_t i = 0; i < t; ++i) {
        if (delta)
          deltaStep(S, q, k, va, beta.accessor<double, 3>()[b][h][i], b, h, i, f, d, options.rule, o);
        else
          decayStep(S, q, k, va, keyDecay.accessor<double, 4>(), valueDecay.accessor<double, 4>(), b, h, i, f, d, o);
      }
    }
  return out;
}

torch::Tensor referenceSoftmaxAttention(const torch::Tensor& qIn, const torch::Tensor& kIn, const torch::Tensor& vIn,
                                        bool causal) {
  const auto qd = toCpuDouble(qIn), kd = toCpuDouble(kIn), vd = toCpuDouble(vIn);
  const int64_t nb = qd.size(0), nh = qd.size(1), t = qd.size(2), dk = qd.size(3), d = vd.size(3);
  auto out = torch::zeros({nb, nh, t, d}, torch::kDouble);
  auto q = qd.accessor<double, 4>(), k = kd.accessor<double, 4>(), v = vd.accessor<double, 4>();
  auto o = out.accessor<double, 4>();
  const double scale = 1.0 / std::sqrt(static_cast<double>(dk));
  for (int64_t b = 0; b < nb; ++b)
    for (int64_t h = 0; h < nh; ++h)
      for (int64_t i = 0; i < t; ++i) {
        const int64_t last = causal ? i : t - 1;
        std::vector<double> s(last + 1);
        double mx = -INFINITY, sum = 0.0;
        for (int64_t j = 0; j <= last; ++j) {
          s[j] = dot(q, k, b, h, i, j, dk) * scale;
          mx = std::max(mx, s[j]);
        }
        for (int64_t j = 0; j <= last; ++j) sum += (s[j] = std::exp(s[j] - mx));
        for (int64_t j = 0; j <= last; ++j)
          for (int64_t e = 0; e < d; ++e) o[b][h][i][e] += s[j] / sum * v[b][h][j][e];
      }
  return out;
}

torch::Tensor referenceWindowAttention(const WindowInputs& in, const WindowOptions& o) {
  const auto q = toCpuDouble(in.q), k = toCpuDouble(in.k), fq = toCpuDouble(in.fq), fk = toCpuDouble(in.fk);
  const auto v = toCpuDouble(in.v), mix = toCpuDouble(in.mix);
  const auto mask = in.keyMask.defined() ? in.keyMask.to(torch::kCPU, torch::kBool) : torch::ones({q.size(0), q.size(2)}, torch::kBool);
  const int64_t nb = q.size(0), nh = q.size(1), t = q.size(2), d = q.size(3), f = fq.size(3), e = v.size(3);
  auto out = torch::zeros({nb, nh, t, e}, torch::kDouble);
  auto qa = q.accessor<double, 4>(), ka = k.accessor<double, 4>(), fqa = fq.accessor<double, 4>(), fka = fk.accessor<double, 4>();
  auto va = v.accessor<double, 4>(), ya = out.accessor<double, 4>();
  auto real = mask.accessor<bool, 2>();
  auto gammas = mix.accessor<double, 1>();
  for (int64_t b = 0; b < nb; ++b)
    for (int64_t h = 0; h < nh; ++h)
      for (int64_t i = 0; i < t; ++i) {
        const auto near = [&](int64_t j) { return o.causal ? (i - j >= 0 && i - j < o.window) : std::abs(i - j) < o.window; };
        const auto far = [&](int64_t j) { return o.causal ? i - j >= o.window : std::abs(i - j) >= o.window; };
        double m = -INFINITY;
        for (int64_t j = 0; j < t; ++j)
          if (near(j) && real[b][j]) m = std::max(m, dot(qa, ka, b, h, i, j, d) / std::sqrt(double(d)));
        const double gamma = gammas[h], shift = std::max(m, 0.0);
        double den = o.eps;
        std::vector<double> num(e, 0.0);
        for (int64_t j = 0; j < t; ++j) {
          if (!real[b][j]) continue;
          double a = 0.0;
          if (near(j)) a = gamma * std::exp(dot(qa, ka, b, h, i, j, d) / std::sqrt(double(d)));
          else if (far(j)) a = (1 - gamma) * dot(fqa, fka, b, h, i, j, f);
          a *= std::exp(-shift);  // the guard eps applies to the shifted sums
          den += a;
          for (int64_t x = 0; x < e; ++x) num[x] += a * va[b][h][j][x];
        }
        for (int64_t x = 0; x < e; ++x) ya[b][h][i][x] = num[x] / den;
      }
  return out;
}

}  // namespace hh::attn
