// The fused distillation-loss kernel's cases (engine/cuda/distill_loss_cuda.h and its Torch wrapper)
// against the loss's definition in float64 on the CPU, shared by the suite that runs them on a GPU
// (test_distill_loss.cpp) and the one that runs them under the host emulation of CUDA
// (test_distill_loss_emulated.cpp). The raw kernels write into NaN-filled outputs, so an element
// they forget fails the comparison.
#pragma once
#include "tests/engine/cuda/hedgehog_cuda_cases.h"  // kernelDevice, kernelStream, rowsOf, rel, check

#include "engine/cuda/distill_loss_cuda.h"
#include "engine/cuda/distill_loss_torch.h"

namespace hh::test::distill_loss_cases {
using namespace hh::test::cuda_cases;

constexpr double kFloor = 1e-10;

struct LossCase {
  int64_t b, h, t, d;
  bool causal = true;
  bool strided = false;  // q, k and fq as [B, T, H, X] memory seen as [B, H, T, X]
};

struct Inputs {
  at::Tensor q, k, fq, fk;  // on the kernels' device; q, k in the case's dtype, fq, fk fp32 (dtype-exact)
  double scale = 0;
};

// q, k O(1); features exp(u) with |u| up to ~3, positive as the Hedgehog map's.
inline Inputs makeInputs(const LossCase& c, torch::ScalarType dtype) {
  torch::manual_seed(c.t * 7 + c.d + (c.causal ? 0 : 1));
  auto make = [&](int64_t x, bool features) {
    auto t = c.strided ? torch::randn({c.b, c.t, c.h, x}).transpose(1, 2) : torch::randn({c.b, c.h, c.t, x});
    if (features) t = torch::exp(t.clamp(-3.0, 3.0));
    return t.to(dtype).to(kernelDevice());  // rounded to the dtype: the fp64 reference sees the same values
  };
  Inputs in;
  in.q = make(c.d, false);
  in.k = make(c.d, false);
  in.fq = make(2 * c.d, true).to(torch::kFloat);
  in.fk = make(2 * c.d, true).to(torch::kFloat);
  in.scale = 1.0 / std::sqrt(double(c.d));
  return in;
}

struct RowTerms {
  at::Tensor loss, coef, negEntropy, lse;  // [B, H, T]
};

// The definitions in fp64: p = softmax(scale q k^T), s = fq fk^T (both over the valid pairs),
// loss_i = -sum p log(s / den + floor) for the given den (fp64, [B, H, T]).
inline RowTerms referenceRows(const Inputs& in, const at::Tensor& fq, const at::Tensor& fk, const at::Tensor& den,
                              bool causal) {
  const auto d64 = [](const at::Tensor& t) { return t.detach().cpu().to(torch::kDouble); };
  const int64_t T = in.q.size(2);
  const auto valid = causal ? torch::ones({T, T}, torch::kBool).tril() : torch::ones({T, T}, torch::kBool);
  const auto t = torch::matmul(d64(in.q), d64(in.k).transpose(-1, -2)) * in.scale;
  const auto lse = t.masked_fill(valid.logical_not(), -INFINITY).logsumexp(-1);
  const auto p = torch::exp(t - lse.unsqueeze(-1)).masked_fill(valid.logical_not(), 0.0);
  const auto s = torch::matmul(fq, fk.transpose(-1, -2)).masked_fill(valid.logical_not(), 1.0);
  const auto x = s + kFloor * den.unsqueeze(-1);
  RowTerms r;
  r.loss = -(p * (torch::log(x) - torch::log(den).unsqueeze(-1))).sum(-1);
  r.coef = (p * s / x).sum(-1);
  r.negEntropy = (p * torch::log(p.masked_fill(valid.logical_not(), 1.0))).sum(-1);
  r.lse = lse;
  return r;
}

inline at::Tensor denOf(const at::Tensor& fq, const at::Tensor& fk, bool causal, double eps) {
  const auto sums = causal ? fk.cumsum(2) : fk.sum(2, true);
  return (fq * sums).sum(-1) + eps;
}

// The raw kernels on NaN-filled outputs; the backward's gradient scale 1 (d sum_i loss_i, den fixed).
struct RawOutputs {
  RowTerms rows;
  at::Tensor gfq, gfk;
};
inline RawOutputs runRaw(const Inputs& in, bool causal, const at::Tensor& den) {
  const auto type = in.q.scalar_type();
  const auto fq = in.fq.to(type), fk = in.fk.to(type);
  hh::cuda::DistillLossProblem p;
  p.batch = static_cast<int>(in.q.size(0));
  p.heads = static_cast<int>(in.q.size(1));
  p.length = in.q.size(2);
  p.headDim = static_cast<int>(in.q.size(3));
  p.features = static_cast<int>(fq.size(3));
  p.dtype = type == torch::kBFloat16 ? hh::cuda::DType::BF16 : hh::cuda::DType::F32;
  p.causal = causal;
  p.scale = static_cast<float>(in.scale);
  p.floor = static_cast<float>(kFloor);
  p.stream = kernelStream();
  const auto f32 = in.q.options().dtype(torch::kFloat);
  auto rows = at::full({4, in.q.size(0), in.q.size(1), in.q.size(2)}, NAN, f32);
  const auto den32 = den.to(torch::kFloat).to(kernelDevice()).contiguous();
  hh::cuda::DistillLossArgs a{p,
                              rowsOf(in.q),
                              rowsOf(in.k),
                              rowsOf(fq),
                              rowsOf(fk),
                              den32.data_ptr<float>(),
                              rows[0].data_ptr<float>(),
                              rows[1].data_ptr<float>(),
                              rows[2].data_ptr<float>(),
                              rows[3].data_ptr<float>()};
  check(hh::cuda::distillLossCudaForward(a));
  RawOutputs out;
  out.rows = {rows[0], rows[1], rows[2], rows[3]};
  out.gfq = at::full(fq.sizes(), NAN, f32);
  out.gfk = at::full(fq.sizes(), NAN, f32);
  const auto one = at::ones({1}, f32);
  hh::cuda::DistillLossBackwardArgs g{p,
                                      rowsOf(in.q),
                                      rowsOf(in.k),
                                      rowsOf(fq),
                                      rowsOf(fk),
                                      den32.data_ptr<float>(),
                                      rows[3].data_ptr<float>(),
                                      one.data_ptr<float>()};
  g.gfq = out.gfq.data_ptr<float>();
  g.gfk = out.gfk.data_ptr<float>();
  check(hh::cuda::distillLossCudaBackward(g));
  return out;
}

inline double tolerance(torch::ScalarType dtype) {
  return dtype == torch::kBFloat16 ? 2e-2 : 1e-4;
}

// The raw kernels' rows and gradients (den held fixed) against fp64.
inline void compareRaw(const LossCase& c, torch::ScalarType dtype) {
  const auto in = makeInputs(c, dtype);
  auto fq = in.fq.detach().cpu().to(torch::kDouble).requires_grad_(true);
  auto fk = in.fk.detach().cpu().to(torch::kDouble).requires_grad_(true);
  const auto den = denOf(fq, fk, c.causal, 1e-6).detach();
  const auto ref = referenceRows(in, fq, fk, den, c.causal);
  ref.loss.sum().backward();
  const auto got = runRaw(in, c.causal, den);
  const double tol = tolerance(dtype);
  const std::string where = std::string(dtype == torch::kBFloat16 ? "bf16" : "fp32") + " T=" + std::to_string(c.t) +
                            " D=" + std::to_string(c.d) + (c.causal ? " causal" : " full") +
                            (c.strided ? " strided" : "");
  // Errors relative to the largest reference value, or to 1 nat for the row terms (at T = 1 the
  // loss is ~eps / s and only rounding is left).
  double worst = 0.0;
  const auto expect = [&](const char* what, const at::Tensor& g, const at::Tensor& r, double t, double floor = 1e-300) {
    const double e = rel(g, r, floor);
    worst = std::isfinite(e) ? std::max(worst, e) : e;
    QVERIFY2(std::isfinite(e) && e < t, (where + " " + what + ": rel err " + std::to_string(e)).c_str());
  };
  expect("loss", got.rows.loss, ref.loss, tol, 1.0);
  expect("coef", got.rows.coef, ref.coef, tol, 1.0);
  expect("negEntropy", got.rows.negEntropy, ref.negEntropy, tol, 1.0);
  expect("lse", got.rows.lse, ref.lse, tol, 1.0);
  expect("gfq", got.gfq, fq.grad(), tol);
  expect("gfk", got.gfk, fk.grad(), tol);
  qInfo("%s: largest rel err %.2g (tolerance %g)", where.c_str(), worst, tol);
}

// fusedDistillLoss (autograd through den too) against the mean loss in fp64 and its gradients.
inline void compareWrapper(const LossCase& c, torch::ScalarType dtype) {
  const auto in = makeInputs(c, dtype);
  auto fq64 = in.fq.detach().cpu().to(torch::kDouble).requires_grad_(true);
  auto fk64 = in.fk.detach().cpu().to(torch::kDouble).requires_grad_(true);
  const double eps = 1e-6, count = double(c.b * c.t);
  const auto ref = referenceRows(in, fq64, fk64, denOf(fq64, fk64, c.causal, eps), c.causal);
  const auto refLoss = ref.loss.sum() / count;
  refLoss.backward();
  auto fq = in.fq.detach().clone().requires_grad_(true), fk = in.fk.detach().clone().requires_grad_(true);
  const auto got = hh::cuda::fusedDistillLoss(in.q, in.k, fq, fk, in.scale, eps, c.causal);
  (got.crossEntropy * 3.0).backward();  // a gradient other than 1 reaches the kernels through the device scalar
  const double tol = tolerance(dtype);
  const double lossErr =
      std::abs(got.crossEntropy.item<double>() - refLoss.item<double>()) / std::abs(refLoss.item<double>());
  QVERIFY2(lossErr < tol, ("cross-entropy rel err " + std::to_string(lossErr)).c_str());
  const double negRef = ref.negEntropy.sum().item<double>() / count;
  QVERIFY(std::abs(got.negEntropy.item<double>() - negRef) <= tol * std::abs(negRef));
  QVERIFY(!got.negEntropy.requires_grad());
  const double eq = rel(fq.grad(), fq64.grad() * 3.0), ek = rel(fk.grad(), fk64.grad() * 3.0);
  QVERIFY2(eq < tol && ek < tol, ("gfq " + std::to_string(eq) + ", gfk " + std::to_string(ek)).c_str());
}

}  // namespace hh::test::distill_loss_cases
