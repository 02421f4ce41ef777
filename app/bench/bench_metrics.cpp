// hh_bench_metrics: the evaluation's per-head metrics on the rows it measures (docs/performance.md):
// B x H x T causal rows, row i holding keys 0..i, the teacher's softmax weights p over random scores
// and a student's weights a (a softmax of the flipped rows). One thread (the engine's default on two
// cores), the allocator the CLI links.
//   std::sort      every row's valid keys packed as the ranking packs them (the float's order-
//                  preserving bits above the key's index), then std::sort (the ranking before radix)
//   radix          the same keys through metrics::radixSortByUpperHalf (the ranking now)
//   torch::sort    the plain PyTorch way: the same rows through torch::sort(dim -1, stable), the
//                  invalid keys set to +inf (a tensor sort cannot take rows of different lengths)
//   headSpearman   the whole metric: a ranked, ties averaged, and correlated with the scores' ranks
//                  (metrics::RankedScores, made once outside the timing)
//   headKl         KL(p || a) per head; "torch ops": the same formula as float64 Torch ops (the
//                  plain PyTorch way, and what the engine ran before its one-pass CPU sums)
//   headEntropy    the entropy of a per head; "torch ops": the same through xlogy in float64
//   floor          reading the weights once (a sum over them)
//   hh_bench_metrics [--batch B] [--heads H] [--length T] [--repeats R]    (defaults 8 8 256 5)
// Each is timed R times after one warm-up; the median and the fastest are printed, in ms and in ns
// per valid key.
#include <torch/types.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "app/bench/bench_args.h"
#include "engine/metrics/attention_metrics.h"
#include "engine/metrics/radix_sort.h"

namespace {
using Clock = std::chrono::steady_clock;

struct Args {
  int64_t batch = 8, heads = 8, length = 256, repeats = 5;
};

Args parseArgs(int argc, char** argv) {
  Args a;
  hh::bench::parseOptions(argc, argv, [&a](const std::string& key, const std::string& value) {
    int64_t* field = key == "--batch"     ? &a.batch
                     : key == "--heads"   ? &a.heads
                     : key == "--length"  ? &a.length
                     : key == "--repeats" ? &a.repeats
                                          : nullptr;
    if (field) *field = hh::bench::parseCount(key, value);
    return field != nullptr;
  });
  return a;
}

// Median and fastest of `repeats` runs of fn after one warm-up, in ms.
std::pair<double, double> timeMs(int64_t repeats, const std::function<void()>& fn) {
  fn();
  std::vector<double> ms;
  for (int64_t r = 0; r < repeats; ++r) {
    const auto t0 = Clock::now();
    fn();
    ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  return {ms[ms.size() / 2], ms.front()};
}

// Rows of `weights` [rows, T], row r holding keys 0 .. r % T, packed and sorted as the ranking
// does, by radix or by std::sort; returns a checksum of the middle keys (the two sorts must agree).
uint64_t sortRows(const torch::Tensor& weights, bool radix) {
  const int64_t rows = weights.size(0), T = weights.size(1);
  const float* data = weights.data_ptr<float>();
  std::vector<uint64_t> keys, scratch;
  uint64_t checksum = 0;
  for (int64_t r = 0; r < rows; ++r) {
    keys.clear();
    for (int64_t j = 0; j <= r % T; ++j) keys.push_back(hh::metrics::rankingKey(data[r * T + j], uint32_t(j)));
    radix ? hh::metrics::radixSortByUpperHalf(keys, scratch) : std::sort(keys.begin(), keys.end());
    checksum += keys[keys.size() / 2] & 0xffffffffu;
  }
  return checksum;
}

using Report = std::function<void(const char*, std::pair<double, double>)>;

// The sorts and Spearman. scores, weights [B, H, T, T], causal [T, T].
void timeRanking(const Args& a, const torch::Tensor& scores, const torch::Tensor& weights, const torch::Tensor& causal,
                 const Report& report) {
  const auto flat = weights.reshape({-1, a.length}).contiguous();  // [B H T, T]
  uint64_t bySort = 0, byRadix = 0;
  report("std::sort", timeMs(a.repeats, [&] { bySort = sortRows(flat, false); }));
  report("radix", timeMs(a.repeats, [&] { byRadix = sortRows(flat, true); }));
  if (bySort != byRadix) throw std::runtime_error("radix and std::sort disagree");
  const auto padded = weights.masked_fill(causal.logical_not(), INFINITY);
  report("torch::sort", timeMs(a.repeats, [&] { (void)std::get<0>(padded.sort(/*stable=*/true, -1, false)); }));
  const auto ranked = hh::metrics::RankedScores(scores, causal);
  report("headSpearman", timeMs(a.repeats, [&] { (void)hh::metrics::headSpearman(ranked, weights); }));
}

// KL and entropy, each beside the same formula as float64 Torch ops. p, q [B, H, T, T], causal [T, T].
void timeRowSums(const Args& a, const torch::Tensor& p, const torch::Tensor& q, const torch::Tensor& causal,
                 const Report& report) {
  const auto invalid = causal.logical_not().expand(p.sizes());
  const std::vector<int64_t> batchAndRows = {0, 2};
  report("headKl", timeMs(a.repeats, [&] { (void)hh::metrics::headKl(p, q, causal); }));
  report("  torch ops", timeMs(a.repeats, [&] {
           const auto p64 = p.to(torch::kDouble), q64 = q.to(torch::kDouble);
           const auto terms = ((p64 + hh::metrics::kKlEpsilon).log() - (q64 + hh::metrics::kKlEpsilon).log()) * p64;
           (void)terms.masked_fill(p64 == 0, 0.0).masked_fill(invalid, 0.0).sum(-1).mean(batchAndRows);
         }));
  report("headEntropy", timeMs(a.repeats, [&] { (void)hh::metrics::headEntropy(q, causal); }));
  report("  torch ops", timeMs(a.repeats, [&] {
           const auto q64 = q.to(torch::kDouble);
           (void)torch::xlogy(q64, q64).neg().masked_fill(invalid, 0.0).sum(-1).mean(batchAndRows);
         }));
}

}  // namespace

int benchMain(int argc, char** argv) {
  const Args a = parseArgs(argc, argv);
  at::set_num_threads(1);
  torch::manual_seed(0);
  const int64_t T = a.length;
  const auto causal = torch::ones({T, T}, torch::kBool).tril();                          // [T, T]
  const auto scores = torch::randn({a.batch, a.heads, T, T});                            // [B, H, T, T]
  const auto weights = scores.masked_fill(causal.logical_not(), -INFINITY).softmax(-1);  // [B, H, T, T]
  const auto student = weights.flip(-1).softmax(-1);                                     // [B, H, T, T]
  const double validKeys = double(a.batch * a.heads) * double(T * (T + 1) / 2);

  std::printf("%lld rows (B=%lld H=%lld T=%lld, causal: %.0f keys), one thread, %lld repeats\n",
              static_cast<long long>(a.batch * a.heads * T), static_cast<long long>(a.batch),
              static_cast<long long>(a.heads), static_cast<long long>(T), validKeys, static_cast<long long>(a.repeats));
  std::printf("%-14s %12s %12s %18s\n", "", "median ms", "best ms", "ns per valid key");
  const Report report = [&](const char* name, std::pair<double, double> ms) {
    std::printf("%-14s %12.2f %12.2f %18.2f\n", name, ms.first, ms.second, ms.first * 1e6 / validKeys);
  };
  timeRanking(a, scores, weights, causal, report);
  timeRowSums(a, weights, student, causal, report);
  double floorSum = 0.0;
  report("floor", timeMs(a.repeats, [&] { floorSum += weights.sum().item<double>(); }));
  return floorSum > 0 ? 0 : 1;
}

int main(int argc, char** argv) {
  return hh::bench::reportErrors(
      "hh_bench_metrics", [&] { return benchMain(argc, argv); }, "[--batch B] [--heads H] [--length T] [--repeats R]");
}
