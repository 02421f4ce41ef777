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
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
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
  for (int i = 1; i < argc; i += 2) {
    const std::string key = argv[i];
    if (i + 1 >= argc) throw std::invalid_argument(key + " needs a value");
    const int64_t value = hh::bench::parseInteger(argv[i + 1]);
    if (value < 1) throw std::invalid_argument(key + " must be at least 1");
    int64_t* field = key == "--batch"     ? &a.batch
                     : key == "--heads"   ? &a.heads
                     : key == "--length"  ? &a.length
                     : key == "--repeats" ? &a.repeats
                                          : nullptr;
    if (!field) throw std::invalid_argument("unknown option " + key);
    *field = value;
  }
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

// One row's valid keys (0..validKeys-1) packed as the ranking packs them.
void packRow(const float* row, int64_t validKeys, std::vector<uint64_t>& keys) {
  keys.clear();
  for (int64_t j = 0; j < validKeys; ++j) {
    uint32_t bits;
    const float f = row[j] + 0.0f;
    std::memcpy(&bits, &f, sizeof bits);
    bits = (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
    keys.push_back((uint64_t(bits) << 32) | uint64_t(j));
  }
}

}  // namespace

int benchMain(int argc, char** argv) {
  const Args a = parseArgs(argc, argv);
  at::set_num_threads(1);
  torch::manual_seed(0);
  const int64_t T = a.length, rows = a.batch * a.heads * T;
  const auto causal = torch::ones({T, T}, torch::kBool).tril();                          // [T, T]
  const auto scores = torch::randn({a.batch, a.heads, T, T});                            // [B, H, T, T]
  const auto weights = scores.masked_fill(causal.logical_not(), -INFINITY).softmax(-1);  // [B, H, T, T]
  const auto flat = weights.reshape({rows, T}).contiguous();
  const float* data = flat.data_ptr<float>();
  const double keysRanked = double(a.batch * a.heads) * double(T * (T + 1) / 2);

  std::vector<uint64_t> keys, scratch;
  uint64_t checksum = 0;  // keeps the sorts from being optimised away, and shows both agree
  auto sortRows = [&](bool radix) {
    checksum = 0;
    for (int64_t r = 0; r < rows; ++r) {
      packRow(data + r * T, r % T + 1, keys);
      radix ? hh::metrics::radixSortByUpperHalf(keys, scratch) : std::sort(keys.begin(), keys.end());
      checksum += keys[keys.size() / 2] & 0xffffffffu;
    }
  };
  const auto ranked = hh::metrics::RankedScores(scores, causal);
  const auto padded = weights.masked_fill(causal.logical_not(), INFINITY);
  double floorSum = 0.0;

  std::printf("%lld rows (B=%lld H=%lld T=%lld, causal: %.0f keys), one thread, %lld repeats\n",
              static_cast<long long>(rows), static_cast<long long>(a.batch), static_cast<long long>(a.heads),
              static_cast<long long>(T), keysRanked, static_cast<long long>(a.repeats));
  std::printf("%-14s %12s %12s %18s\n", "", "median ms", "best ms", "ns per valid key");
  auto report = [&](const char* name, std::pair<double, double> ms) {
    std::printf("%-14s %12.2f %12.2f %18.2f\n", name, ms.first, ms.second, ms.first * 1e6 / keysRanked);
  };
  report("std::sort", timeMs(a.repeats, [&] { sortRows(false); }));
  const uint64_t sortedChecksum = checksum;
  report("radix", timeMs(a.repeats, [&] { sortRows(true); }));
  if (checksum != sortedChecksum) throw std::runtime_error("radix and std::sort disagree");
  report("torch::sort", timeMs(a.repeats, [&] { (void)std::get<0>(padded.sort(/*stable=*/true, -1, false)); }));
  report("headSpearman", timeMs(a.repeats, [&] { (void)hh::metrics::headSpearman(ranked, weights); }));
  const auto student = weights.flip(-1).softmax(-1);  // [B, H, T, T]
  const auto full = causal.expand({a.batch, a.heads, T, T});
  report("headKl", timeMs(a.repeats, [&] { (void)hh::metrics::headKl(weights, student, causal); }));
  report("  torch ops", timeMs(a.repeats, [&] {
           const auto p = weights.to(torch::kDouble), q = student.to(torch::kDouble);
           const auto terms = ((p + hh::metrics::kKlEpsilon).log() - (q + hh::metrics::kKlEpsilon).log()) * p;
           (void)terms.masked_fill(p == 0, 0.0)
               .masked_fill(full.logical_not(), 0.0)
               .sum(-1)
               .mean(std::vector<int64_t>{0, 2});
         }));
  report("headEntropy", timeMs(a.repeats, [&] { (void)hh::metrics::headEntropy(student, causal); }));
  report("  torch ops", timeMs(a.repeats, [&] {
           const auto q = student.to(torch::kDouble);
           (void)torch::xlogy(q, q).neg().masked_fill(full.logical_not(), 0.0).sum(-1).mean(std::vector<int64_t>{0, 2});
         }));
  report("floor", timeMs(a.repeats, [&] { floorSum += weights.sum().item<double>(); }));
  return floorSum > 0 ? 0 : 1;
}

int main(int argc, char** argv) {
  return hh::bench::reportErrors("hh_bench_metrics", [&] { return benchMain(argc, argv); });
}
