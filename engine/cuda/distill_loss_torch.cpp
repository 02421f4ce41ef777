// Torch wrapper of the fused distillation-loss kernel (distill_loss_torch.h).
#include "engine/cuda/distill_loss_torch.h"

#include <ATen/ATen.h>
#include <torch/autograd.h>
#if !HH_CUDA_EMULATION
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

#include <optional>
#include <stdexcept>
#include <string>

#include "engine/cuda/distill_loss_cuda.h"
#include "engine/cuda/torch_rows.h"

namespace hh::cuda {
namespace {

constexpr double kLogFloor = 1e-10;  // as distillation_loss.cpp's

[[noreturn]] void failLoss(const std::string& what) {
  throw std::invalid_argument("fused distillation loss: " + what);
}

bool onKernelDevice(const at::Tensor& t) {
#if HH_CUDA_EMULATION
  return t.is_cpu();
#else
  return t.is_cuda();
#endif
}

// The device's index for the CUDA API (the emulation's one device is 0), and a guard that makes it current.
int deviceIndexOf(const at::Tensor& t) {
  return t.is_cuda() ? t.device().index() : 0;
}
#if HH_CUDA_EMULATION
struct DeviceGuard {
  explicit DeviceGuard(const at::Tensor&) {}
};
cudaStream_t streamOf(const at::Tensor&) {
  return nullptr;
}
#else
struct DeviceGuard {
  explicit DeviceGuard(const at::Tensor& t) : guard(t.device()) {}
  c10::cuda::CUDAGuard guard;
};
cudaStream_t streamOf(const at::Tensor& t) {
  return c10::cuda::getCurrentCUDAStream(t.device().index()).stream();
}
#endif

DType lossDtypeOf(const at::Tensor& t) {
  return t.scalar_type() == at::kBFloat16 ? DType::BF16 : DType::F32;
}

DistillLossProblem lossProblemOf(const at::Tensor& q, const at::Tensor& fq, double scale, bool causal) {
  DistillLossProblem p;
  p.batch = static_cast<int>(q.size(0));
  p.heads = static_cast<int>(q.size(1));
  p.length = q.size(2);
  p.headDim = static_cast<int>(q.size(3));
  p.features = static_cast<int>(fq.size(3));
  p.dtype = lossDtypeOf(q);
  p.causal = causal;
  p.scale = static_cast<float>(scale);
  p.floor = static_cast<float>(kLogFloor);
  p.stream = streamOf(q);
  return p;
}

void checkLoss(const Status& s) {
  if (s.message) failLoss(s.message);
  if (s.cuda != cudaSuccess)
    throw std::runtime_error(std::string("fused distillation loss: ") + cudaGetErrorString(s.cuda));
}

void checkLossInputs(const at::Tensor& q, const at::Tensor& k, const at::Tensor& fq, const at::Tensor& fk) {
  if (q.dim() != 4 || k.sizes() != q.sizes()) failLoss("q and k must be [B, H, T, D] of one shape");
  if (fq.dim() != 4 || fk.sizes() != fq.sizes() || fq.sizes().slice(0, 3) != q.sizes().slice(0, 3))
    failLoss("fq and fk must be [B, H, T, F] with q's B, H and T");
  if (k.device() != q.device() || fq.device() != q.device() || fk.device() != q.device())
    failLoss("q, k, fq and fk must be on one device");
  if (k.scalar_type() != q.scalar_type()) failLoss("q and k must share a dtype");
  if (!fusedDistillLossAccepts(q, fq))
    failLoss(
        "unsupported input (needs fp32 or bf16 on a GPU of sm_80 or newer, D in {32, 64, 128} and F = 2D; got D = " +
        std::to_string(q.size(-1)) + ", F = " + std::to_string(fq.size(-1)) + ")");
}

// fq, fk [B,H,T,F] and den [B,H,T] fp32 with autograd; q, k [B,H,T,D] constants
// -> {crossEntropy, negEntropy}, scalars (fusedDistillLoss).
class FusedSoftCrossEntropy : public torch::autograd::Function<FusedSoftCrossEntropy> {
 public:
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx, const at::Tensor& fq,
                                                const at::Tensor& fk, const at::Tensor& den, const at::Tensor& q,
                                                const at::Tensor& k, double scale, bool causal) {
    const DeviceGuard guard(q);
    const auto p = lossProblemOf(q, fq, scale, causal);
    auto rows = at::empty({4, q.size(0), q.size(1), q.size(2)}, q.options().dtype(at::kFloat));  // loss, coef, -H, lse
    DistillLossArgs a{p,
                      rowsOf(q),
                      rowsOf(k),
                      rowsOf(fq),
                      rowsOf(fk),
                      den.data_ptr<float>(),
                      rows[0].data_ptr<float>(),
                      rows[1].data_ptr<float>(),
                      rows[2].data_ptr<float>(),
                      rows[3].data_ptr<float>()};
    checkLoss(distillLossCudaForward(a));
    const double count = double(q.size(0)) * double(q.size(2));
    auto crossEntropy = rows[0].sum() / count, negEntropy = rows[2].sum() / count;
    ctx->save_for_backward({fq, fk, den, q, k, rows[1], rows[3]});
    ctx->saved_data["scale"] = scale;
    ctx->saved_data["causal"] = causal;
    ctx->mark_non_differentiable({negEntropy});
    return {crossEntropy, negEntropy};
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto &fq = saved[0], &fk = saved[1], &den = saved[2], &q = saved[3], &k = saved[4], &coef = saved[5],
               &lse = saved[6];
    const DeviceGuard guard(q);
    const double count = double(q.size(0)) * double(q.size(2));
    const auto g = grads[0].defined() ? grads[0].to(at::kFloat).reshape({1}).contiguous()
                                      : at::zeros({1}, q.options().dtype(at::kFloat));
    auto gfq = at::empty(fq.sizes(), fq.options().dtype(at::kFloat)), gfk = at::empty_like(gfq);
    DistillLossBackwardArgs a{
        lossProblemOf(q, fq, ctx->saved_data["scale"].toDouble(), ctx->saved_data["causal"].toBool()),
        rowsOf(q),
        rowsOf(k),
        rowsOf(fq),
        rowsOf(fk),
        den.data_ptr<float>(),
        lse.data_ptr<float>(),
        g.data_ptr<float>()};
    a.multiplier = static_cast<float>(1.0 / count);
    a.gfq = gfq.data_ptr<float>();
    a.gfk = gfk.data_ptr<float>();
    checkLoss(distillLossCudaBackward(a));
    const auto gden = coef / den * (g / count);  // d loss / d den_i = coef_i / den_i
    return {gfq.to(fq.scalar_type()),
            gfk.to(fk.scalar_type()),
            gden,
            at::Tensor(),
            at::Tensor(),
            at::Tensor(),
            at::Tensor()};
  }
};

}  // namespace

bool fusedDistillLossAccepts(const at::Tensor& q, const at::Tensor& fq) {
  if (q.dim() != 4 || fq.dim() != 4 || !onKernelDevice(q)) return false;
  if (q.scalar_type() != at::kFloat && q.scalar_type() != at::kBFloat16) return false;
  return distillLossCudaSupports(lossDtypeOf(q), static_cast<int>(q.size(3)), static_cast<int>(fq.size(3)),
                                 deviceIndexOf(q));
}

FusedDistillLoss fusedDistillLoss(const at::Tensor& q, const at::Tensor& k, const at::Tensor& fq, const at::Tensor& fk,
                                  double scale, double eps, bool causal) {
  checkLossInputs(q, k, fq, fk);
  const auto type = q.scalar_type();
  const auto fqK = rowsContiguous(fq.to(type)), fkK = rowsContiguous(fk.to(type));
  // den_i = sum_{j <= i} fq_i . fk_j + eps = fq_i . cumsum(fk)_i + eps: its gradient flows by autograd
  const auto fkSums = causal ? fkK.to(at::kFloat).cumsum(2) : fkK.to(at::kFloat).sum(2, true);
  const auto den = ((fqK.to(at::kFloat) * fkSums).sum(-1) + eps).contiguous();  // [B,H,T]
  const auto out = FusedSoftCrossEntropy::apply(fqK, fkK, den, rowsContiguous(q.detach()),
                                                rowsContiguous(k.detach()), scale, causal);
  return {out[0], out[1]};
}

}  // namespace hh::cuda
