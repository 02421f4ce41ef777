// hh_bench_attention: softmax vs Hedgehog linear attention, causal, forward and forward+backward
// time and peak memory, against the machine's measured matmul rate, the plain LibTorch way of
// writing the same chunked loop (a Python-style loop over chunks with autograd), and, where
// LibTorch has it (2.0 and later), at::scaled_dot_product_attention (PyTorch's fused attention:
// flash or memory-efficient kernels on a GPU).
//   hh_bench_attention [--lengths 1024,2048,...] [--repeats N] [--softmax-max N] [--plain-max N] [--batch B]
//                      [--heads H] [--dim D] [--chunk C] [--device auto|cpu|cuda[:N]]
//                      [--dtype float32|bfloat16]
// Peak memory: on the CPU the process's peak RSS (VmHWM), reset before each measurement through
// /proc/self/clear_refs, minus the RSS before it (glibc's mmap threshold is pinned at 64 KiB so
// freed tensors go back to the OS and the reading follows live allocations); on a GPU the caching
// allocator's peak bytes since the reset, minus those allocated before it. GPU times are taken
// after synchronising the device.
// Built with HH_CUDA_KERNELS (engine/cuda, issue 27), fourteen more columns on CUDA: the fused CUDA
// kernels called directly (hh::cuda::hedgehogCudaCausal with each KernelSet: the sequential, the
// pipelined and the chunk-parallel forward), the generic chunked path (feature map +
// linearChunked) they replace, and the share of the matmul rate the pipelined and the chunked
// forwards reach (the FLOP count below); the
// "hedgehog" columns are the engine's dispatch, which takes those kernels where its
// FusedCudaPolicy says they pay (docs/gpu.md). A measurement that runs out of device memory is
// reported as such and the row goes on.
#include <torch/types.h>
#include <torch/version.h>

#include <malloc.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "app/bench/bench_options.h"
#include "engine/attention/feature_map.h"
#include "engine/attention/linear_attention.h"
#include "engine/attention/softmax_attention.h"
#include "engine/core/device.h"
#include "engine/core/process_memory.h"
#include "engine/core/runtime.h"
#if HH_CUDA_KERNELS
#include "engine/cuda/hedgehog_cuda_torch.h"
#endif

#ifndef HH_CUDA_KERNELS
#define HH_CUDA_KERNELS 0
#endif
#if TORCH_VERSION_MAJOR >= 2
#define HH_HAVE_SDPA 1
#else
#define HH_HAVE_SDPA 0
#endif

namespace {
using Clock = std::chrono::steady_clock;

using Options = hh::bench::AttentionOptions;

struct Measure {
  double seconds = 0.0;  // median
  double best = 0.0;     // fastest run
  double peakMiB = 0.0;  // peak memory growth during one run
  bool failed = false;   // ran out of memory (the row goes on with the other columns)
};

Measure timeAndPeak(const std::string& device, const std::function<void()>& fn, int repeats);

// Times `fn` on `device` (synchronised before and after) and reads its peak memory; a
// measurement that runs out of device memory is reported as such instead of ending the run.
Measure measure(const std::string& device, const std::function<void()>& fn, int repeats) {
  try {
    return timeAndPeak(device, fn, repeats);
  } catch (const c10::Error& e) {
    const std::string what = e.what();
    if (what.find("out of memory") == std::string::npos) throw;
    hh::synchronizeDevice(device);
    hh::releaseCachedDeviceMemory(device);
    Measure m;
    m.failed = true;
    return m;
  }
}

Measure timeAndPeak(const std::string& device, const std::function<void()>& fn, int repeats) {
  const bool cpu = device == "cpu";
  fn();  // warm-up
  hh::synchronizeDevice(device);
  std::vector<double> times;
  double peak = 0.0;
  for (int r = 0; r < repeats; ++r) {
    int64_t before = hh::residentBytes();
    if (cpu) {
      hh::resetPeakResident();
    } else {
      hh::resetDevicePeakMemory(device);
      before = hh::devicePeakMemoryBytes(device);  // what is live now
    }
    const auto t0 = Clock::now();
    fn();
    hh::synchronizeDevice(device);
    times.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
    const int64_t after = cpu ? hh::peakResidentBytes() : hh::devicePeakMemoryBytes(device);
    peak = std::max(peak, double(after - before) / (1024.0 * 1024.0));
  }
  std::sort(times.begin(), times.end());
  return {times[times.size() / 2], times.front(), peak};
}

// The peak matrix rate the device reaches in this dtype: the fastest of 10 n^3 products.
double matmulRate(const std::string& device, const torch::TensorOptions& options, int64_t n) {
  const auto a = torch::randn({n, n}, options), b = torch::randn({n, n}, options);
  const auto m = measure(device, [&] { torch::mm(a, b); }, 10);
  return 2.0 * n * n * n / m.best / 1e9;
}

// The plain way: a loop over chunks, autograd through everything.
torch::Tensor plainChunkedLoop(const torch::Tensor& fq, const torch::Tensor& fk, const torch::Tensor& v, int64_t c,
                               double eps) {
  // fq, fk [B,H,T,F]; v [B,H,T,D]
  const int64_t t = fq.size(2);
  auto s = torch::zeros({fq.size(0), fq.size(1), fq.size(3), v.size(3)}, fq.options());
  auto z = torch::zeros({fq.size(0), fq.size(1), fq.size(3), 1}, fq.options());
  std::vector<torch::Tensor> outs;
  for (int64_t t0 = 0; t0 < t; t0 += c) {
    const int64_t len = std::min(c, t - t0);
    const auto qc = fq.narrow(2, t0, len), kc = fk.narrow(2, t0, len), vc = v.narrow(2, t0, len);
    const auto a = torch::matmul(qc, kc.transpose(-1, -2)).tril();
    const auto num = torch::matmul(a, vc) + torch::matmul(qc, s);
    const auto den = a.sum(-1, true) + torch::matmul(qc, z) + eps;
    outs.push_back(num / den);
    s = s + torch::matmul(kc.transpose(-1, -2), vc);
    z = z + kc.sum(2).unsqueeze(-1);
  }
  return torch::cat(outs, 2);
}

// PyTorch's fused attention (causal), or an undefined tensor where LibTorch predates it.
torch::Tensor fusedAttention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v) {
#if HH_HAVE_SDPA
  return at::scaled_dot_product_attention(q, k, v, {}, 0.0, /*is_causal=*/true);
#else
  (void)q, (void)k, (void)v;
  return {};
#endif
}

std::string cell(const Measure& m) {
  if (m.failed) return "out of memory";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%8.2f ms %7.0f MiB", m.seconds * 1e3, m.peakMiB);
  return buf;
}

// One length's inputs and what every column of its row shares.
struct Row {
  Row(const Options& o, const std::string& device, hh::attn::LinearAttention& hedgehog, double rate, int64_t n)
      : o(o), device(device), hedgehog(hedgehog), rate(rate), n(n) {}
  const Options& o;
  const std::string& device;
  hh::attn::LinearAttention& hedgehog;
  double rate = 0.0;  // the matmul rate, GFLOP/s
  int64_t n = 0;
  torch::Tensor q, k, v, qg, kg, vg;  // [B, H, n, D]; the g ones require gradients
  double flops = 0.0, floorSec = 0.0;  // the chunked forward's FLOPs and their time at `rate`
};

Row makeRow(const Options& o, const std::string& device, hh::attn::LinearAttention& hedgehog, double rate, int64_t n,
            const torch::TensorOptions& options) {
  Row r(o, device, hedgehog, rate, n);
  torch::manual_seed(0);
  r.q = torch::randn({o.batch, o.heads, n, o.dim}, options) * 0.5;
  r.k = torch::randn({o.batch, o.heads, n, o.dim}, options) * 0.5;
  r.v = torch::randn({o.batch, o.heads, n, o.dim}, options);
  r.qg = r.q.clone().requires_grad_(true), r.kg = r.k.clone().requires_grad_(true);
  r.vg = r.v.clone().requires_grad_(true);
  // FLOPs of the chunked forward as computed: feature map (two D x D products per token, q and k)
  // + per chunk: scores C x C x F, scores x [V,1], chunk states F x E, carried-state product F x E.
  const double f = double(hedgehog->featureMap()->featureDim()), e = double(o.dim + 1);
  r.flops = double(o.batch) * o.heads * (4.0 * n * o.dim * o.dim + 2.0 * n * (o.chunk * f + o.chunk * e + 2.0 * f * e));
  r.floorSec = r.flops / (rate * 1e9);
  return r;
}

// "a / b" as "1.23x", or "-" where either did not run.
std::string ratio(bool ran, const Measure& a, const Measure& b) {
  char buf[32] = "-";
  if (ran && !a.failed && !b.failed) std::snprintf(buf, sizeof buf, "%.2fx", a.seconds / b.seconds);
  return std::string(buf);
}

void printPreamble(const Options& o, const std::string& device, const hh::RuntimeInfo& rt, double rate) {
  std::printf("# hh_bench_attention: B=%lld H=%lld D=%lld causal, chunk %lld, %s, %s, torch %s, %d threads\n",
              (long long)o.batch, (long long)o.heads, (long long)o.dim, (long long)o.chunk, o.dtype.c_str(),
              hh::deviceLabel(device).c_str(), rt.torchVersion.c_str(), rt.intraOpThreads);
  std::printf("# matmul rate (%s, best of 10): %.1f GFLOP/s\n", o.dtype.c_str(), rate);
  std::printf("# times: median of the repeats (peak memory growth); fwd/floor compares the fastest hedgehog forward "
              "with the floor at the best matmul rate; fused: at::scaled_dot_product_attention%s\n",
              HH_HAVE_SDPA ? "" : " (not in this LibTorch)");
  std::printf("\n| n | softmax fwd | softmax fwd+bwd | fused fwd | fused fwd+bwd | hedgehog fwd | hedgehog fwd+bwd "
              "| plain loop fwd | plain loop fwd+bwd | hedgehog GFLOP | floor | fwd/floor | softmax/hedgehog fwd | fwd+bwd "
              "| fused/hedgehog fwd | fwd+bwd |%s\n",
              HH_CUDA_KERNELS ? " cuda kernel fwd | fwd+bwd | generic fwd | fwd+bwd | kernel/generic fwd | fwd+bwd |"
                                " pipelined kernel fwd | fwd+bwd | pipelined/kernel fwd | pipelined fwd, % of rate |"
                                " chunked kernel fwd | fwd+bwd | chunked/kernel fwd | chunked fwd, % of rate |"
                              : "");
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|%s\n",
              HH_CUDA_KERNELS ? "---|---|---|---|---|---|---|---|---|---|---|---|---|---|" : "");
}

// The first sixteen cells: softmax, PyTorch's fused attention, the engine's Hedgehog, the plain
// loop, the FLOP floor and the ratios between them.
std::string baseCells(const Row& r) {
  const Options& o = r.o;
  const auto& q = r.q, &k = r.k, &v = r.v, &qg = r.qg, &kg = r.kg, &vg = r.vg;
  auto fmap = r.hedgehog->featureMap();
  const int reps = r.n >= 8192 && r.device == "cpu" ? 1 : o.repeats;
  Measure smF, smFB, fuF, fuFB, plF, plFB;
  const bool runSoftmax = r.n <= o.softmaxMax, runPlain = r.n <= o.plainMax;
  if (runSoftmax) {
    smF = measure(r.device, [&] { at::NoGradGuard g; hh::attn::softmaxAttention(q, k, v, true); }, reps);
    smFB = measure(r.device, [&] { hh::attn::softmaxAttention(qg, kg, vg, true).sum().backward(); }, reps);
  }
  if (HH_HAVE_SDPA) {
    fuF = measure(r.device, [&] { at::NoGradGuard g; fusedAttention(q, k, v); }, reps);
    fuFB = measure(r.device, [&] { fusedAttention(qg, kg, vg).sum().backward(); }, reps);
  }
  const auto hhF = measure(r.device, [&] { at::NoGradGuard g; r.hedgehog->forward(q, k, v); }, o.repeats);
  const auto hhFB = measure(r.device, [&] { r.hedgehog->forward(qg, kg, vg).sum().backward(); }, o.repeats);
  const double eps = r.hedgehog->config().rule.eps;
  if (runPlain) {
    plF = measure(r.device, [&] {
      at::NoGradGuard g;
      plainChunkedLoop(fmap->forward(q), fmap->forward(k), v, o.chunk, eps);
    }, o.repeats);
    plFB = measure(r.device, [&] {
      plainChunkedLoop(fmap->forward(qg), fmap->forward(kg), vg, o.chunk, eps).sum().backward();
    }, o.repeats);
  }
  const std::string skipped = "skipped (--softmax-max)", skippedPlain = "skipped (--plain-max)",
                    absent = "n/a (torch < 2)";
  char buf[1024];
  std::snprintf(buf, sizeof buf,
                "| %lld | %s | %s | %s | %s | %s | %s | %s | %s | %.2f | %.4f ms | %.2fx | %s | %s | %s | %s |",
                (long long)r.n, (runSoftmax ? cell(smF) : skipped).c_str(), (runSoftmax ? cell(smFB) : skipped).c_str(),
                (HH_HAVE_SDPA ? cell(fuF) : absent).c_str(), (HH_HAVE_SDPA ? cell(fuFB) : absent).c_str(),
                cell(hhF).c_str(), cell(hhFB).c_str(), (runPlain ? cell(plF) : skippedPlain).c_str(),
                (runPlain ? cell(plFB) : skippedPlain).c_str(), r.flops / 1e9, r.floorSec * 1e3, hhF.best / r.floorSec,
                ratio(runSoftmax, smF, hhF).c_str(), ratio(runSoftmax, smFB, hhFB).c_str(),
                ratio(HH_HAVE_SDPA, fuF, hhF).c_str(), ratio(HH_HAVE_SDPA, fuFB, hhFB).c_str());
  return buf;
}

#if HH_CUDA_KERNELS
// The fourteen cells of the fused CUDA kernels: each kernel set called directly against the
// generic path they replace (n/a where the kernels do not take these inputs).
std::string kernelCells(const Row& r) {
  const auto& q = r.q, &k = r.k, &v = r.v, &qg = r.qg, &kg = r.kg, &vg = r.vg;
  if (!hh::cuda::hedgehogCudaAccepts(q, k, v))
    return " n/a | n/a | n/a | n/a | - | - | n/a | n/a | - | - | n/a | n/a | - | - |";
  auto fmap = r.hedgehog->featureMap();
  const auto w = fmap->weight(), b = fmap->bias();
  const auto& rule = r.hedgehog->config().rule;
  const int reps = r.o.repeats;
  using hh::cuda::KernelSet;
  const auto run = [&](const torch::Tensor& x, const torch::Tensor& y, const torch::Tensor& z,
                       KernelSet kernels = KernelSet::Measured) {
    return hh::cuda::hedgehogCudaCausal(x, y, z, w, b, r.o.chunk, rule.eps, kernels);
  };
  const auto generic = [&](const torch::Tensor& x, const torch::Tensor& y, const torch::Tensor& z) {
    return hh::attn::linearChunked(fmap->forward(x), fmap->forward(y), z, {}, rule);
  };
  const auto ckF = measure(r.device, [&] { at::NoGradGuard g; run(q, k, v); }, reps);
  const auto ckFB = measure(r.device, [&] { run(qg, kg, vg).sum().backward(); }, reps);
  const auto geF = measure(r.device, [&] { at::NoGradGuard g; generic(q, k, v); }, reps);
  const auto geFB = measure(r.device, [&] { generic(qg, kg, vg).sum().backward(); }, reps);
  const auto piF = measure(r.device, [&] { at::NoGradGuard g; run(q, k, v, KernelSet::Pipelined); }, reps);
  const auto piFB = measure(r.device, [&] { run(qg, kg, vg, KernelSet::Pipelined).sum().backward(); }, reps);
  Measure chF, chFB;  // where the records do not fit, hedgehogCudaCausal would run the pipelined kernels
  const bool chunkedFits = hh::cuda::chunkedKernelsFit(q);
  if (chunkedFits) {
    chF = measure(r.device, [&] { at::NoGradGuard g; run(q, k, v, KernelSet::Chunked); }, reps);
    chFB = measure(r.device, [&] { run(qg, kg, vg, KernelSet::Chunked).sum().backward(); }, reps);
  }
  const std::string noRoom = "skipped (records > half the free memory)";
  const auto share = [&](const Measure& m) {
    char buf[32] = "-";
    if (!m.failed) std::snprintf(buf, sizeof buf, "%.1f %%", 100.0 * r.floorSec / m.seconds);
    return std::string(buf);
  };
  std::string cells;
  for (const std::string& c : {cell(ckF), cell(ckFB), cell(geF), cell(geFB), ratio(true, ckF, geF),
                               ratio(true, ckFB, geFB), cell(piF), cell(piFB), ratio(true, piF, ckF), share(piF),
                               chunkedFits ? cell(chF) : noRoom, chunkedFits ? cell(chFB) : noRoom,
                               ratio(chunkedFits, chF, ckF), chunkedFits ? share(chF) : std::string("-")})
    cells += " " + c + " |";
  return cells;
}
#else
std::string kernelCells(const Row&) { return ""; }
#endif

}  // namespace

int benchMain(int argc, char** argv) {
  const Options o = hh::bench::parseAttentionOptions(argc, argv);
  mallopt(M_MMAP_THRESHOLD, 64 * 1024);
  const auto rt = hh::initRuntime();
  const std::string device = hh::resolveDevice(o.device);
  const auto options = torch::TensorOptions()
                           .device(torch::Device(device))
                           .dtype(o.dtype == "bfloat16" ? torch::kBFloat16 : torch::kFloat);
  const double rate = matmulRate(device, options, device == "cpu" ? 1024 : 8192);
  printPreamble(o, device, rt, rate);
  hh::attn::LinearAttentionConfig cfg;
  cfg.featureMap.heads = o.heads;
  cfg.featureMap.headDim = o.dim;
  cfg.rule.chunkSize = o.chunk;
  hh::attn::LinearAttention hedgehog(cfg);
  hedgehog->to(options.device(), options.dtype().toScalarType());
  for (const int64_t n : o.lengths) {
    const Row row = makeRow(o, device, hedgehog, rate, n, options);
    const std::string base = baseCells(row);
    std::printf("%s%s\n", base.c_str(), kernelCells(row).c_str());
    std::fflush(stdout);
  }
  return 0;
}

int main(int argc, char** argv) {
  return hh::bench::reportErrors(
      "hh_bench_attention", [&] { return benchMain(argc, argv); }, hh::bench::kAttentionUsage);
}
