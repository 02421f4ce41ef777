// hh_bench_attention: softmax vs Hedgehog linear attention, causal, forward and forward+backward
// time and peak memory, against the machine's measured matmul rate and the plain LibTorch way of
// writing the same chunked loop (a Python-style loop over chunks with autograd).
//   hh_bench_attention [--lengths 1024,2048,...] [--repeats N] [--softmax-max N] [--heads H] [--dim D]
// Peak memory: the process's peak RSS (VmHWM), reset before each measurement through
// /proc/self/clear_refs, minus the RSS before it; glibc's mmap threshold is pinned at 64 KiB so
// freed tensors go back to the OS and the reading follows live allocations.
#include <torch/types.h>

#include <malloc.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "engine/attention/feature_map.h"
#include "engine/attention/linear_attention.h"
#include "engine/attention/softmax_attention.h"
#include "app/bench/bench_args.h"
#include "engine/core/process_memory.h"
#include "engine/core/runtime.h"

namespace {
using Clock = std::chrono::steady_clock;

struct Measure {
  double seconds = 0.0;  // median
  double best = 0.0;     // fastest run
  double peakMiB = 0.0;  // peak RSS growth during one run
};

Measure measure(const std::function<void()>& fn, int repeats) {
  fn();  // warm-up
  std::vector<double> times;
  double peak = 0.0;
  for (int r = 0; r < repeats; ++r) {
    const int64_t before = hh::residentBytes();
    hh::resetPeakResident();
    const auto t0 = Clock::now();
    fn();
    times.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
    peak = std::max(peak, double(hh::peakResidentBytes() - before) / (1024.0 * 1024.0));
  }
  std::sort(times.begin(), times.end());
  return {times[times.size() / 2], times.front(), peak};
}

double matmulRate(int64_t n) {
  const auto a = torch::randn({n, n}), b = torch::randn({n, n});
  // The peak the machine reaches: the fastest of 10 runs (timings on a shared VM jitter).
  const auto m = measure([&] { torch::mm(a, b); }, 10);
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

std::string cell(const Measure& m) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%8.1f ms %7.0f MiB", m.seconds * 1e3, m.peakMiB);
  return buf;
}
}  // namespace

int main(int argc, char** argv) {
  std::vector<int64_t> lengths = {1024, 2048, 4096, 8192, 16384};
  int repeats = 3;
  int64_t softmaxMax = 8192, heads = 12, dim = 64, chunk = 64;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string key = argv[i], val = argv[i + 1];
    if (key == "--lengths") lengths = hh::bench::parseIntegers(val);
    else if (key == "--repeats") repeats = std::stoi(val);
    else if (key == "--softmax-max") softmaxMax = std::stoll(val);
    else if (key == "--heads") heads = std::stoll(val);
    else if (key == "--dim") dim = std::stoll(val);
    else if (key == "--chunk") chunk = std::stoll(val);
    else {
      std::fprintf(stderr, "unknown option %s\n", key.c_str());
      return 2;
    }
  }
  mallopt(M_MMAP_THRESHOLD, 64 * 1024);
  const auto rt = hh::initRuntime();
  const double rate = matmulRate(1024);
  std::printf("# hh_bench_attention: B=1 H=%lld D=%lld causal, chunk %lld, torch %s, %d threads\n", (long long)heads,
              (long long)dim, (long long)chunk, rt.torchVersion.c_str(), rt.intraOpThreads);
  std::printf("# matmul rate (1024^3 fp32, best of 10): %.1f GFLOP/s\n", rate);
  std::printf("# times: median of the repeats (peak RSS growth); fwd/floor compares the fastest hedgehog forward with "
              "the floor at the best matmul rate\n");

  hh::attn::LinearAttentionConfig cfg;
  cfg.featureMap.heads = heads;
  cfg.featureMap.headDim = dim;
  cfg.rule.chunkSize = chunk;
  hh::attn::LinearAttention hedgehog(cfg);
  const int64_t f = hedgehog->featureMap()->featureDim(), e = dim + 1;

  std::printf("\n| n | softmax fwd | softmax fwd+bwd | hedgehog fwd | hedgehog fwd+bwd | plain loop fwd | plain loop fwd+bwd "
              "| hedgehog GFLOP | floor | fwd/floor | softmax/hedgehog fwd | fwd+bwd |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (const int64_t n : lengths) {
    torch::manual_seed(0);
    const auto q = torch::randn({1, heads, n, dim}) * 0.5, k = torch::randn({1, heads, n, dim}) * 0.5,
               v = torch::randn({1, heads, n, dim});
    const auto qg = q.clone().requires_grad_(true), kg = k.clone().requires_grad_(true), vg = v.clone().requires_grad_(true);
    auto fmap = hedgehog->featureMap();

    Measure smF, smFB;
    const bool runSoftmax = n <= softmaxMax;
    if (runSoftmax) {
      const int reps = n >= 8192 ? 1 : repeats;
      smF = measure([&] { at::NoGradGuard g; hh::attn::softmaxAttention(q, k, v, true); }, reps);
      smFB = measure([&] { hh::attn::softmaxAttention(qg, kg, vg, true).sum().backward(); }, reps);
    }
    const auto hhF = measure([&] { at::NoGradGuard g; hedgehog->forward(q, k, v); }, repeats);
    const auto hhFB = measure([&] { hedgehog->forward(qg, kg, vg).sum().backward(); }, repeats);
    const auto plF = measure([&] {
      at::NoGradGuard g;
      plainChunkedLoop(fmap->forward(q), fmap->forward(k), v, chunk, cfg.rule.eps);
    }, repeats);
    const auto plFB = measure([&] {
      plainChunkedLoop(fmap->forward(qg), fmap->forward(kg), vg, chunk, cfg.rule.eps).sum().backward();
    }, repeats);

    // FLOPs of the chunked forward as computed: feature map (two D x D products per token, q and k)
    // + per chunk: scores C x C x F, scores x [V,1], chunk states F x E, carried-state product F x E.
    const double flops = heads * (4.0 * n * dim * dim + 2.0 * n * (chunk * f + chunk * e + 2.0 * f * e));
    const double floorSec = flops / (rate * 1e9);
    char smCol[64] = "skipped (memory)", smFbCol[64] = "skipped (memory)", ratioF[32] = "-", ratioFB[32] = "-";
    if (runSoftmax) {
      std::snprintf(smCol, sizeof smCol, "%s", cell(smF).c_str());
      std::snprintf(smFbCol, sizeof smFbCol, "%s", cell(smFB).c_str());
      std::snprintf(ratioF, sizeof ratioF, "%.1fx", smF.seconds / hhF.seconds);
      std::snprintf(ratioFB, sizeof ratioFB, "%.1fx", smFB.seconds / hhFB.seconds);
    }
    std::printf("| %lld | %s | %s | %s | %s | %s | %s | %.2f | %.1f ms | %.2fx | %s | %s |\n", (long long)n, smCol, smFbCol,
                cell(hhF).c_str(), cell(hhFB).c_str(), cell(plF).c_str(), cell(plFB).c_str(), flops / 1e9,
                floorSec * 1e3, hhF.best / floorSec, ratioF, ratioFB);
    std::fflush(stdout);
  }
  return 0;
}
