// Sorting the 64-bit keys the metrics rank a row with (attention_metrics.cpp): a value's
// order-preserving 32 bits above the key's index. From kRadixMinKeys keys on, a least-significant-
// digit radix sort on the upper half: four stable passes of 8 bits, a pass skipped where every key
// has the same digit there (attention weights in [0, 1] share their top bits). Below that,
// std::sort, which is faster on a handful of keys. The radix passes are stable, so keys whose upper
// halves tie keep their input order: with the indices ascending on input, both give the order
// std::sort gives the whole keys (engine.metrics.radix_sort). 3.1x faster than std::sort on causal
// rows of up to 256 keys, 5.1x on up to 1024 (hh_bench_metrics; docs/performance.md, "Ranking by
// radix, KL and entropy in one pass").
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <vector>

namespace hh::metrics {

// The key of value `value` at key index `index`: the float's bits made order-preserving (-0 taken
// as +0, as == does) above the index. Keys sort as their values do, ties by index.
inline uint64_t rankingKey(float value, uint32_t index) {
  const float f = value + 0.0f;
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  bits = (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
  return (uint64_t(bits) << 32) | uint64_t(index);
}

// From this many keys on, radixSortByUpperHalf sorts by radix (measured crossover: about 32).
inline constexpr size_t kRadixMinKeys = 32;

// Sorts keys by their upper 32 bits, keeping the order of ties (input indices ascending in the
// lower halves: the same order as std::sort of the whole keys). Fewer than 2^32 keys; scratch is
// resized as needed and holds nothing on return.
inline void radixSortByUpperHalf(std::vector<uint64_t>& keys, std::vector<uint64_t>& scratch) {
  const size_t n = keys.size();
  if (n < kRadixMinKeys) {
    std::sort(keys.begin(), keys.end());
    return;
  }
  std::array<std::array<uint32_t, 256>, 4> counts{};  // per byte of the upper half: keys per digit
  for (const uint64_t key : keys)
    for (int d = 0; d < 4; ++d) ++counts[d][(key >> (32 + 8 * d)) & 0xffu];
  scratch.resize(n);
  uint64_t* from = keys.data();
  uint64_t* to = scratch.data();
  for (int d = 0; d < 4; ++d) {
    const int shift = 32 + 8 * d;
    auto& count = counts[d];
    if (count[(from[0] >> shift) & 0xffu] == n) continue;  // one digit for all: order unchanged
    uint32_t offset = 0;
    for (auto& c : count) {  // counts -> where each digit's keys start
      const uint32_t keysOfDigit = c;
      c = offset;
      offset += keysOfDigit;
    }
    for (size_t i = 0; i < n; ++i) to[count[(from[i] >> shift) & 0xffu]++] = from[i];
    std::swap(from, to);
  }
  if (from != keys.data()) std::memcpy(keys.data(), from, n * sizeof(uint64_t));
}

}  // namespace hh::metrics
