// The fused CUDA kernels' cases against the engine's generic path in fp64 on the CPU, shared by
// the suite that runs them on a GPU (test_hedgehog_cuda.cpp) and the one that runs them under the
// host emulation of CUDA (test_hedgehog_cuda_emulated.cpp, HH_CUDA_EMULATION; the kernels compiled
// as C++, tests/support/cuda_emulation). Every output is filled with NaN before the raw kernel
// call, so an element a kernel forgets to write fails the comparison.
#pragma once
#ifndef HH_CUDA_EMULATION
#define HH_CUDA_EMULATION 0
#endif
#include <ATen/ATen.h>
#include <torch/types.h>
#if !HH_CUDA_EMULATION
#include <c10/cuda/CUDAStream.h>
#endif

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/attention/feature_map.h"
#include "engine/attention/linear_attention.h"
#include "engine/cuda/hedgehog_cuda.h"
#include "tests/support/hh_test.h"

namespace hh::test::cuda_cases {
using hh::cuda::Rows;

// Where the kernels' tensors live: the GPU, or host memory under the emulation.
inline torch::Device kernelDevice() { return HH_CUDA_EMULATION ? torch::Device(torch::kCPU) : torch::Device(torch::kCUDA); }
inline cudaStream_t kernelStream() {
#if HH_CUDA_EMULATION
  return nullptr;
#else
  return c10::cuda::getCurrentCUDAStream().stream();
#endif
}

inline Rows rowsOf(const at::Tensor& t) {
  Rows r;
  r.data = t.data_ptr();
  r.sb = t.stride(0);
  r.sh = t.stride(1);
  r.st = t.dim() == 4 ? t.stride(2) : 0;
  return r;
}

// max abs error / max(max abs reference, floor)
inline double rel(const at::Tensor& got, const at::Tensor& ref, double floor = 1e-300) {
  return (got.detach().cpu().to(torch::kDouble) - ref).abs().max().item<double>() /
         std::max(ref.abs().max().item<double>(), floor);
}

struct Grads {
  at::Tensor y, gq, gk, gv, gw, gb;
};

// Which kernels a case runs: the ones measured on the H100 (the default), the pipelined forward and
// backward scans (ForwardArgs::pipelined, BackwardArgs::pipelined), or the chunk-parallel forward
// and backward scans (ForwardArgs::chunked, BackwardArgs::chunked).
enum class Kernels { Measured, Pipelined, Chunked };
inline const char* nameOf(Kernels k) {
  return k == Kernels::Measured ? "" : k == Kernels::Pipelined ? " pipelined" : " chunked";
}

// CPU reference through the engine's generic path (fp64 unless asked), gradients by autograd.
inline Grads reference(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& w,
                const at::Tensor& b, const at::Tensor& gy, double eps, torch::ScalarType dtype = torch::kDouble) {
  hh::attn::FeatureMapConfig fc;
  fc.heads = q.size(1);
  fc.headDim = q.size(3);
  hh::attn::FeatureMap map(fc);
  map->to(dtype);
  {
    at::NoGradGuard g;
    map->weight().copy_(w.cpu());
    map->bias().copy_(b.cpu());
  }
  auto as64 = [&](const at::Tensor& t) { return t.detach().cpu().to(dtype).requires_grad_(true); };
  auto q64 = as64(q), k64 = as64(k), v64 = as64(v);
  hh::attn::RuleOptions rule;
  rule.eps = eps;
  const auto y = hh::attn::linearChunked(map->forward(q64), map->forward(k64), v64, {}, rule);
  y.backward(gy.detach().cpu().to(dtype));
  return {y.detach(), q64.grad(), k64.grad(), v64.grad(), map->weight().grad(), map->bias().grad()};
}

inline void check(const hh::cuda::Status& s) {
  if (!s.ok()) throw std::runtime_error(s.message ? s.message : cudaGetErrorString(s.cuda));
  const cudaError_t e = cudaDeviceSynchronize();
  if (e != cudaSuccess) throw std::runtime_error(cudaGetErrorString(e));
}

// The raw kernels (hedgehog_cuda.h) on NaN-filled outputs: forward then backward.
inline Grads runKernels(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& w,
                        const at::Tensor& b, const at::Tensor& gy, double eps, int segments, Kernels kernels) {
  hh::cuda::Problem p;
  p.batch = static_cast<int>(q.size(0));
  p.heads = static_cast<int>(q.size(1));
  p.length = q.size(2);
  p.headDim = static_cast<int>(q.size(3));
  p.dtype = q.scalar_type() == torch::kBFloat16 ? hh::cuda::DType::BF16 : hh::cuda::DType::F32;
  p.eps = static_cast<float>(eps);
  p.stream = kernelStream();
  const auto nan = [](at::IntArrayRef sizes, const at::TensorOptions& o) { return at::full(sizes, NAN, o); };
  Grads out;
  out.y = nan(q.sizes(), q.options());
  auto den = nan({q.size(0), q.size(1), q.size(2)}, q.options().dtype(torch::kFloat));
  hh::cuda::ForwardArgs forward{p, rowsOf(q), rowsOf(k), rowsOf(v), w.data_ptr<float>(), b.data_ptr<float>(),
                                rowsOf(out.y), den.data_ptr<float>()};
  forward.segments = segments;
  forward.pipelined = kernels != Kernels::Measured;
  forward.chunked = kernels == Kernels::Chunked;
  at::Tensor segmentStates;  // NaN bytes: the first pass must write every state it hands on
  if (segments > 1 || forward.chunked) {
    segmentStates = at::full({static_cast<int64_t>(hh::cuda::hedgehogCudaForwardWorkspace(p, segments, forward.chunked))},
                             255, q.options().dtype(torch::kByte));
    forward.workspace = segmentStates.data_ptr();
  }
  check(hh::cuda::hedgehogCudaForward(forward));
  out.gq = nan(q.sizes(), q.options());
  out.gk = nan(q.sizes(), q.options());
  out.gv = nan(q.sizes(), q.options());
  out.gw = nan(w.sizes(), w.options());
  out.gb = nan(b.sizes(), b.options());
  auto work = at::full(
      {static_cast<int64_t>(hh::cuda::hedgehogCudaBackwardWorkspace(p, segments, forward.chunked))}, 255,
      q.options().dtype(torch::kByte));  // NaN bytes
  hh::cuda::BackwardArgs backward{p, rowsOf(q), rowsOf(k), rowsOf(v), w.data_ptr<float>(), b.data_ptr<float>(),
                                  rowsOf(out.y), rowsOf(gy), den.data_ptr<float>(), rowsOf(out.gq),
                                  rowsOf(out.gk), rowsOf(out.gv), out.gw.data_ptr<float>(),
                                  out.gb.data_ptr<float>(), work.data_ptr()};
  backward.segments = segments;  // the scans split as the forward did
  backward.pipelined = kernels != Kernels::Measured;
  backward.chunked = forward.chunked;
  check(hh::cuda::hedgehogCudaBackward(backward));
  return out;
}

struct Case {
  int64_t b, h, t, d;
  int segments = 1;  // the forward's split of each sequence (hedgehogCudaSegments)
  bool unaligned = false;  // rows that do not start on 16 bytes
  Kernels kernels = Kernels::Measured;
};

// The kernels' chunks for T rows in this dtype.
inline int chunksOf(int64_t t, torch::ScalarType dtype) {
  const int c = hh::cuda::hedgehogCudaChunk(dtype == torch::kBFloat16 ? hh::cuda::DType::BF16 : hh::cuda::DType::F32);
  return static_cast<int>((t + c - 1) / c);
}

// The segment counts worth checking at T rows: one, and where there are several chunks two and
// one per chunk.
inline std::vector<int> segmentCounts(int64_t t, torch::ScalarType dtype) {
  const int chunks = chunksOf(t, dtype);
  if (chunks < 2) return {1};
  if (chunks == 2) return {1, 2};
  return {1, 2, chunks};
}

// A trained-looking map: W = I + noise, b small; inputs scaled so u stays well inside the clamp,
// except with `pastClamp`: query row 5 and key row 9 scaled by 80, so that most of their u run
// past +-30 (where the gradient is 0) while the other rows stay well conditioned.
inline void compareCase(const Case& c, torch::ScalarType dtype, bool stridedInputs, bool pastClamp = false) {
  torch::manual_seed(c.t * 131 + c.d);
  const auto dev = torch::TensorOptions().device(kernelDevice()).dtype(torch::kFloat);
  const auto w = (torch::eye(c.d).unsqueeze(0).repeat({c.h, 1, 1}) + torch::randn({c.h, c.d, c.d}) * (0.3 / std::sqrt(double(c.d)))).to(dev);
  const auto bias = (torch::randn({c.h, c.d}) * 0.1).to(dev);
  auto make = [&](double scale, int64_t bigRow) {
    auto x = stridedInputs ? (torch::randn({c.b, c.t, c.h, c.d}) * scale).transpose(1, 2)  // [B,H,T,D] view
                           : torch::randn({c.b, c.h, c.t, c.d}) * scale;
    if (pastClamp && bigRow < c.t) x.narrow(2, bigRow, 1).mul_(80.0);
    x = x.to(kernelDevice()).to(dtype);
    if (!c.unaligned) return x;
    // The same values one element into rows of D + 1: no row starts on 16 bytes (the kernels'
    // element-by-element loads instead of their vector loads).
    auto wide = torch::zeros({c.b, c.h, c.t, c.d + 1}, x.options());
    wide.narrow(3, 1, c.d).copy_(x);
    return wide.narrow(3, 1, c.d);
  };
  const auto q = make(0.5, 5), k = make(0.5, 9), v = make(1.0, -1), gy = make(1.0, -1);
  const double eps = 1e-6;
  const auto got = runKernels(q, k, v, w, bias, gy, eps, c.segments, c.kernels);
  const auto ref = reference(q, k, v, w, bias, gy, eps);
  // gq, gk, gW, gb go through G_ij = gnum_i.v_j + gden_i = gy_i.(v_j - y_i) / den_i, a
  // cancellation: at T = 1 the true values are ~eps (y_0 = v_0) and only rounding is left, and in
  // bf16 the error scales with |gy||v|, not with the result. There (bf16, or T = 1) their error
  // is measured against at least max |gv|, in the same units here (W ~ I, inputs O(1)).
  const bool bf = dtype == torch::kBFloat16;
  const double floor = bf || c.t == 1 ? ref.gv.abs().max().item<double>() : 1e-300;
  // fp32: 1e-4 for everything (gW and gb too: they sum B*T rows in fp32, in per-split partials
  // of at most 1024 rows, added in a fixed order; a host emulation of the kernels measured ~1e-6
  // at T <= 130). bf16: 2e-2 for y; the gradients go through two more bf16-rounded operands
  // (gy/den and the recomputed features), 5e-2 (the emulation: <= 1.3e-2).
  double tolY = bf ? 2e-2 : 1e-4, tolX = bf ? 5e-2 : 1e-4, tolW = bf ? 5e-2 : 1e-4;
  if (pastClamp && !bf) {
    // Rows scaled by 80 put features near e^30 beside O(1) ones: the gradients are ill-conditioned,
    // and the engine's own generic path in fp32 misses fp64 by more than 1e-4 here (on the H100
    // run, 2026-11-26: gW 1.5e-4 generic, 1.05e-4 kernel). The kernel must then be no worse than
    // twice that generic fp32 error, measured on the same inputs.
    const auto f32 = reference(q, k, v, w, bias, gy, eps, torch::kFloat);
    tolX = std::max({tolX, 2 * rel(f32.gq, ref.gq), 2 * rel(f32.gk, ref.gk)});
    tolW = std::max({tolW, 2 * rel(f32.gw, ref.gw), 2 * rel(f32.gb, ref.gb)});
  }
  const std::string where = "B=" + std::to_string(c.b) + " H=" + std::to_string(c.h) + " T=" + std::to_string(c.t) +
                            " D=" + std::to_string(c.d) + (bf ? " bf16" : " fp32") + " segments=" +
                            std::to_string(c.segments) + nameOf(c.kernels) + ": ";
  const struct {
    const char* name;
    const at::Tensor &a, &r;
    double tol, floor;
  } rows[] = {{"y", got.y, ref.y, tolY, 1e-300},  {"gq", got.gq, ref.gq, tolX, floor}, {"gk", got.gk, ref.gk, tolX, floor},
              {"gv", got.gv, ref.gv, tolX, 1e-300}, {"gW", got.gw, ref.gw, tolW, floor}, {"gb", got.gb, ref.gb, tolW, floor}};
  for (const auto& r : rows) {
    const double e = rel(r.a, r.r, r.floor);  // NaN (an unwritten element) fails too
    QVERIFY2(e < r.tol, (where + r.name + " rel " + std::to_string(e)).c_str());
  }
}

// HH_CUDA_TEST_QUICK=1 (scripts/cuda_sanitize.sh: the sanitizers run 10-100x slower): three
// lengths instead of six, still one partial chunk and more than one chunk. The emulation runs
// every CUDA thread as a fiber on one core: lengths up to 130 (five fp32 chunks, three bf16).
inline std::vector<int64_t> lengths() {
  const char* quick = std::getenv("HH_CUDA_TEST_QUICK");
  if (HH_CUDA_EMULATION || (quick && std::string(quick) == "1")) return {1, 63, 64, 65, 130};
  return {1, 63, 64, 65, 1000, 4097};
}

// The suites' shared cases: B=2 H=2, D = 32, 64 and 128, every length of lengths() with one, two
// and one-per-chunk segments (strided inputs at T = 65), with one set of kernels.
inline void compareLengths(torch::ScalarType dtype, Kernels kernels = Kernels::Measured) {
  for (const int64_t d : {32, 64, 128})
    for (const int64_t t : lengths())
      for (const int segments : segmentCounts(t, dtype))
        compareCase({2, 2, t, d, segments, false, kernels}, dtype, t == 65);
}

// Every set of kernels: the measured, the pipelined and the chunked.
constexpr Kernels kAllKernels[] = {Kernels::Measured, Kernels::Pipelined, Kernels::Chunked};

// Rows whose u run past the clamp: their gradient is 0 there, as in the engine's map.
inline void compareClamped() {
  for (const Kernels kernels : kAllKernels) {
    compareCase({2, 1, 40, 64, 1, false, kernels}, torch::kFloat, false, true);
    compareCase({1, 2, 70, 128, 1, false, kernels}, torch::kFloat, true, true);
    compareCase({1, 2, 40, 128, 1, false, kernels}, torch::kBFloat16, false, true);
  }
}

// A NaN in one query element (a diverged row) stays NaN as on the CPU: y is NaN exactly where the
// fp64 reference's is (head 0 from row 5 on: its feature, and its key in every later denominator),
// and head 0's gradients carry NaN while head 1 stays finite. fminf/fmaxf in the clamp had turned
// the NaN into finite features, hiding the divergence from the job's checks.
inline void compareNanRows() {
  for (const Kernels kernels : kAllKernels) {
    torch::manual_seed(17);
    const int64_t b = 1, h = 2, t = 40, d = 64;
    const auto dev = torch::TensorOptions().device(kernelDevice()).dtype(torch::kFloat);
    const auto w = (torch::eye(d).unsqueeze(0).repeat({h, 1, 1}) + torch::randn({h, d, d}) * 0.03).to(dev);
    const auto bias = (torch::randn({h, d}) * 0.1).to(dev);
    auto q = torch::randn({b, h, t, d}) * 0.5;
    q[0][0][5][3] = NAN;
    const auto k = (torch::randn({b, h, t, d}) * 0.5).to(dev), v = torch::randn({b, h, t, d}).to(dev),
               gy = torch::randn({b, h, t, d}).to(dev);
    q = q.to(dev);
    const auto got = runKernels(q, k, v, w, bias, gy, 1e-6, 1, kernels);
    const auto ref = reference(q, k, v, w, bias, gy, 1e-6);
    const std::string where = std::string("NaN row") + nameOf(kernels) + ": ";
    QVERIFY2(ref.y.isnan().any().item<bool>(), (where + "the reference has no NaN").c_str());
    QVERIFY2(torch::equal(got.y.isnan().cpu(), ref.y.isnan()), (where + "y's NaN pattern differs").c_str());
    QVERIFY2(got.gq.select(1, 0).isnan().any().item<bool>(), (where + "head 0's gq has no NaN").c_str());
    for (const auto& g : {got.y, got.gq, got.gk, got.gv, got.gw.unsqueeze(0), got.gb.unsqueeze(0)})
      QVERIFY2(torch::isfinite(g.select(1, 1)).all().item<bool>(), (where + "NaN reached head 1").c_str());
  }
}

// Rows that do not start on 16 bytes take the element-by-element loads.
inline void compareUnaligned() {
  for (const auto dtype : {torch::kFloat, torch::kBFloat16})
    for (const Kernels kernels : kAllKernels) {
      compareCase({1, 2, 130, 64, 1, true, kernels}, dtype, false);
      compareCase({1, 2, 130, 128, 2, true, kernels}, dtype, false);
    }
}

// 12 decode steps against linearStep in fp64: D = 128 at batch 1, 7, 64 (fp32) and 7 (bf16); D = 32
// at batch 3 (fp32, bf16).
inline void compareSteps() {
  struct StepCase {
    int64_t batch, d;
    torch::ScalarType dtype;
  };
  for (const StepCase& sc : {StepCase{1, 128, torch::kFloat}, StepCase{7, 128, torch::kFloat},
                             StepCase{64, 128, torch::kFloat}, StepCase{7, 128, torch::kBFloat16},
                             StepCase{3, 32, torch::kFloat}, StepCase{3, 32, torch::kBFloat16}}) {
    const int64_t batch = sc.batch, h = 3, d = sc.d;
    const auto dtype = sc.dtype;
    torch::manual_seed(batch);
    hh::attn::FeatureMapConfig fc;
    fc.heads = h;
    fc.headDim = d;
    hh::attn::FeatureMap map(fc);
    map->to(torch::kDouble);
    at::NoGradGuard g;
    map->weight().add_(torch::randn({h, d, d}, torch::kDouble) * 0.02);
    map->bias().add_(torch::randn({h, d}, torch::kDouble) * 0.1);
    const auto w = map->weight().to(kernelDevice(), torch::kFloat), b = map->bias().to(kernelDevice(), torch::kFloat);
    hh::attn::RuleOptions rule;
    auto refState = hh::attn::initialState(batch, h, 2 * d, d, rule, torch::kDouble);
    auto S = torch::zeros({batch, h, 2 * d, d}, torch::TensorOptions().device(kernelDevice()));
    auto z = torch::zeros({batch, h, 2 * d}, torch::TensorOptions().device(kernelDevice()));
    const bool bf = dtype == torch::kBFloat16;
    for (int step = 0; step < 12; ++step) {
      auto x = [&](double s) { return (torch::randn({batch, h, d}) * s).to(dtype); };
      const auto q = x(0.5), k = x(0.5), v = x(1.0);
      auto y = torch::full({batch, h, d}, NAN, torch::TensorOptions().device(kernelDevice()).dtype(dtype));
      hh::cuda::Problem p;
      p.batch = static_cast<int>(batch);
      p.heads = static_cast<int>(h);
      p.length = 1;
      p.headDim = static_cast<int>(d);
      p.dtype = bf ? hh::cuda::DType::BF16 : hh::cuda::DType::F32;
      p.eps = static_cast<float>(rule.eps);
      p.stream = kernelStream();
      const auto qc = q.to(kernelDevice()), kc = k.to(kernelDevice()), vc = v.to(kernelDevice());
      check(hh::cuda::hedgehogCudaStep({p, rowsOf(qc), rowsOf(kc), rowsOf(vc), w.data_ptr<float>(),
                                        b.data_ptr<float>(), S.data_ptr<float>(), z.data_ptr<float>(), rowsOf(y)}));
      auto f = [&](const at::Tensor& t) { return map->forward(t.to(torch::kDouble).unsqueeze(2)).select(2, 0); };
      const auto ref = hh::attn::linearStep(refState, f(q), f(k), v.to(torch::kDouble), {}, rule);
      const double e = rel(y, ref), tol = bf ? 2e-2 : 1e-4;
      QVERIFY2(e < tol, ("batch " + std::to_string(batch) + " step " + std::to_string(step) + " rel " +
                         std::to_string(e)).c_str());
    }
    QVERIFY(rel(S, refState.S) < (bf ? 2e-2 : 1e-4));
    QVERIFY(rel(z, refState.z) < (bf ? 2e-2 : 1e-4));
  }
}

}  // namespace hh::test::cuda_cases
