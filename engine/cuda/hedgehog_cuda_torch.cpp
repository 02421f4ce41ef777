// Torch wrapper of the fused CUDA Hedgehog kernels (hedgehog_cuda_torch.h).
#include "engine/cuda/hedgehog_cuda_torch.h"

#include <ATen/ATen.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/autograd.h>

#include <algorithm>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "engine/cuda/hedgehog_cuda.h"
#include "engine/cuda/torch_rows.h"

namespace hh::cuda {
namespace {

[[noreturn]] void fail(const std::string& what) { throw std::invalid_argument("hedgehog CUDA kernel: " + what); }

DType dtypeOf(const at::Tensor& t) {
  if (t.scalar_type() == at::kFloat) return DType::F32;
  if (t.scalar_type() == at::kBFloat16) return DType::BF16;
  fail("float32 or bfloat16 tensors only, got " + std::string(c10::toString(t.scalar_type())));
}

Problem problemOf(const at::Tensor& q, double eps) {
  Problem p;
  p.batch = static_cast<int>(q.size(0));
  p.heads = static_cast<int>(q.size(1));
  p.length = q.dim() == 4 ? q.size(2) : 1;
  p.headDim = static_cast<int>(q.size(-1));
  p.dtype = dtypeOf(q);
  p.eps = static_cast<float>(eps);
  p.stream = c10::cuda::getCurrentCUDAStream(q.device().index()).stream();
  return p;
}

void check(const Status& s) {
  if (s.message) fail(s.message);
  if (s.cuda != cudaSuccess) throw std::runtime_error(std::string("hedgehog CUDA kernel: ") + cudaGetErrorString(s.cuda));
}

// Shapes, devices and dtypes of q, k, v ([B,H,T,D] when dims == 4, [B,H,D] when 3), W, b.
void checkInputs(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& w,
                 const at::Tensor& b, int64_t dims) {
  if (q.dim() != dims) fail("q must have " + std::to_string(dims) + " dims, got " + std::to_string(q.dim()));
  if (k.sizes() != q.sizes() || v.sizes() != q.sizes()) fail("q, k, v must have the same shape");
  if (!q.is_cuda() || k.device() != q.device() || v.device() != q.device() || w.device() != q.device() ||
      b.device() != q.device())
    fail("q, k, v, weight and bias must be on one CUDA device");
  if (k.scalar_type() != q.scalar_type() || v.scalar_type() != q.scalar_type()) fail("q, k, v must share a dtype");
  const int64_t h = q.size(1), d = q.size(-1);
  if (w.dim() != 3 || w.size(0) != h || w.size(1) != d || w.size(2) != d) fail("weight must be [H, D, D]");
  if (b.dim() != 2 || b.size(0) != h || b.size(1) != d) fail("bias must be [H, D]");
  if (!hedgehogCudaSupports(dtypeOf(q), static_cast<int>(d), q.device().index()))
    fail("unsupported head dim " + std::to_string(d) + " or device (needs D in {32, 64, 128}, sm_80 or newer)");
}

struct HedgehogCudaFunction : public torch::autograd::Function<HedgehogCudaFunction> {
  // q, k, v [B,H,T,D]; w [H,D,D], b [H,D] fp32 -> y [B,H,T,D]
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& qIn, const at::Tensor& kIn,
                            const at::Tensor& vIn, const at::Tensor& wIn, const at::Tensor& bIn, double eps,
                            int64_t kernelSet) {
    const auto kernels = static_cast<KernelSet>(kernelSet);
    const auto q = rowsContiguous(qIn), k = rowsContiguous(kIn), v = rowsContiguous(vIn);
    const auto w = wIn.contiguous(), b = bIn.contiguous();
    auto y = at::empty(q.sizes(), q.options().memory_format(at::MemoryFormat::Contiguous));
    auto den = at::empty({q.size(0), q.size(1), q.size(2)}, q.options().dtype(at::kFloat));
    ForwardArgs a{problemOf(q, eps), rowsOf(q), rowsOf(k), rowsOf(v), w.data_ptr<float>(), b.data_ptr<float>(),
                  rowsOf(y), den.data_ptr<float>()};
    a.pipelined = kernels != KernelSet::Measured;
    a.chunked = kernels == KernelSet::Chunked;
    a.segments = hedgehogCudaSegments(a.p, q.device().index(), a.chunked);
    if (a.chunked && !chunkedKernelsFit(q)) {
      a.chunked = false;  // its records would take more than half the free memory: the pipelined forward instead
      a.segments = hedgehogCudaSegments(a.p, q.device().index());
    }
    at::Tensor workspace;  // segment states (and the chunked forward's records), freed when the call returns
    if (a.segments > 1 || a.chunked) {
      workspace = at::empty({static_cast<int64_t>(hedgehogCudaForwardWorkspace(a.p, a.segments, a.chunked))},
                            q.options().dtype(at::kByte));
      a.workspace = workspace.data_ptr();
    }
    check(hedgehogCudaForward(a));
    ctx->save_for_backward({q, k, v, w, b, y, den});
    ctx->saved_data["eps"] = eps;
    ctx->saved_data["pipelined"] = a.pipelined;
    ctx->saved_data["chunked"] = kernels == KernelSet::Chunked;
    return y;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto &q = saved[0], &k = saved[1], &v = saved[2], &w = saved[3], &b = saved[4], &y = saved[5],
               &den = saved[6];
    const auto gy = rowsContiguous(grads[0].to(q.scalar_type()));
    const c10::cuda::CUDAGuard guard(q.device());
    auto gq = at::empty(q.sizes(), q.options().memory_format(at::MemoryFormat::Contiguous));
    auto gk = at::empty_like(gq), gv = at::empty_like(gq);
    auto gw = at::empty(w.sizes(), w.options()), gb = at::empty(b.sizes(), b.options());
    const Problem p = problemOf(q, ctx->saved_data["eps"].toDouble());
    // the chunked scans where asked for and their records fit, else the (pipelined) scans
    const bool chunked = ctx->saved_data["chunked"].toBool() && chunkedKernelsFit(q);
    const int segments = hedgehogCudaSegments(p, q.device().index(), chunked);
    auto workspace = at::empty({static_cast<int64_t>(hedgehogCudaBackwardWorkspace(p, segments, chunked))},
                               q.options().dtype(at::kByte));
    BackwardArgs a{p, rowsOf(q), rowsOf(k), rowsOf(v), w.data_ptr<float>(), b.data_ptr<float>(), rowsOf(y),
                   rowsOf(gy), den.data_ptr<float>(), rowsOf(gq), rowsOf(gk), rowsOf(gv), gw.data_ptr<float>(),
                   gb.data_ptr<float>(), workspace.data_ptr()};
    a.segments = segments;
    a.pipelined = ctx->saved_data["pipelined"].toBool();
    a.chunked = chunked;
    check(hedgehogCudaBackward(a));
    return {gq, gk, gv, gw, gb, at::Tensor(), at::Tensor()};  // none for eps and the kernel set
  }
};

}  // namespace

KernelSet requestedKernelSet() {
  static const KernelSet requested = [] {
    const char* env = std::getenv("HH_FUSED_CUDA_KERNELS");
    const std::string name = env ? env : "";
    return name == "pipelined" ? KernelSet::Pipelined : name == "chunked" ? KernelSet::Chunked : KernelSet::Measured;
  }();
  return requested;
}

bool hedgehogCudaAccepts(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
  if (!q.is_cuda() || (q.scalar_type() != at::kFloat && q.scalar_type() != at::kBFloat16)) return false;
  if (q.numel() == 0) return false;  // an empty batch or T = 0: the generic path returns the empty result
  if (k.scalar_type() != q.scalar_type() || v.scalar_type() != q.scalar_type()) return false;
  if (k.device() != q.device() || v.device() != q.device() || v.size(-1) != q.size(-1)) return false;
  return hedgehogCudaSupports(dtypeOf(q), static_cast<int>(q.size(-1)), q.device().index());
}

bool hedgehogCudaFillsDevice(const at::Tensor& q) {
  int multiprocessors = 0;
  if (cudaDeviceGetAttribute(&multiprocessors, cudaDevAttrMultiProcessorCount, q.device().index()) != cudaSuccess)
    return false;
  const int64_t blocks = q.size(0) * q.size(1) * hedgehogCudaBlocksPerHead(dtypeOf(q), static_cast<int>(q.size(-1)));
  return blocks >= multiprocessors;
}

int64_t deviceBytesAvailable(const at::Tensor& q) {
  const c10::cuda::CUDAGuard guard(q.device());
  size_t free = 0, total = 0;
  if (cudaMemGetInfo(&free, &total) != cudaSuccess) return 0;
  const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(q.device().index());
  const auto all = static_cast<size_t>(c10::CachingDeviceAllocator::StatType::AGGREGATE);
  return static_cast<int64_t>(free) + stats.reserved_bytes[all].current - stats.allocated_bytes[all].current;
}

bool chunkedKernelsFit(const at::Tensor& q) {
  const Problem p = problemOf(q, 0.0);
  const int segments = hedgehogCudaSegments(p, q.device().index(), true);
  const size_t bytes = std::max(hedgehogCudaForwardWorkspace(p, segments, true),
                                hedgehogCudaBackwardWorkspace(p, segments, true));
  constexpr size_t kSmall = size_t(256) << 20;  // below this, not worth asking the driver each layer
  return bytes <= kSmall || bytes <= static_cast<size_t>(deviceBytesAvailable(q) / 2);
}

at::Tensor hedgehogCudaCausal(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& weight,
                              const at::Tensor& bias, int64_t chunkSize, double eps, KernelSet kernels) {
  if (chunkSize < 1) fail("chunk size must be positive");
  checkInputs(q, k, v, weight, bias, 4);
  if (q.size(2) < 1) fail("T must be at least 1");
  const c10::cuda::CUDAGuard guard(q.device());
  return HedgehogCudaFunction::apply(q, k, v, weight.to(at::kFloat), bias.to(at::kFloat), eps,
                                     static_cast<int64_t>(kernels));
}

at::Tensor hedgehogCudaStep(at::Tensor& S, at::Tensor& z, const at::Tensor& qIn, const at::Tensor& kIn,
                            const at::Tensor& vIn, const at::Tensor& weight, const at::Tensor& bias, double eps) {
  checkInputs(qIn, kIn, vIn, weight, bias, 3);
  const int64_t bsz = qIn.size(0), h = qIn.size(1), d = qIn.size(2);
  if (S.scalar_type() != at::kFloat || !S.is_contiguous() || S.device() != qIn.device() ||
      S.sizes() != at::IntArrayRef({bsz, h, 2 * d, d}))
    fail("S must be float32 contiguous [B, H, 2D, D] on q's device");
  if (z.scalar_type() != at::kFloat || !z.is_contiguous() || z.device() != qIn.device() ||
      z.sizes() != at::IntArrayRef({bsz, h, 2 * d}))
    fail("z must be float32 contiguous [B, H, 2D] on q's device");
  const c10::cuda::CUDAGuard guard(qIn.device());
  const auto q = rowsContiguous(qIn), k = rowsContiguous(kIn), v = rowsContiguous(vIn);
  const auto w = weight.detach().to(at::kFloat).contiguous(), b = bias.detach().to(at::kFloat).contiguous();
  auto y = at::empty({bsz, h, d}, q.options());
  StepArgs a{problemOf(q, eps), rowsOf(q), rowsOf(k), rowsOf(v), w.data_ptr<float>(), b.data_ptr<float>(),
             S.data_ptr<float>(), z.data_ptr<float>(), rowsOf(y)};
  check(hedgehogCudaStep(a));
  return y;
}

}  // namespace hh::cuda
