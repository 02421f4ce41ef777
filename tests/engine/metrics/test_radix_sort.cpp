// engine.metrics.radix_sort: radixSortByUpperHalf against std::sort of the whole keys, on the keys
// the ranking builds (an order-preserving 32-bit value above an ascending index): lengths around
// the switch to radix (32) and up to 70,000, values with many ties, values that
// share their top bytes (so passes are skipped), values that differ only in their top byte (only
// the last pass runs), and all values equal (no pass runs); and that rankingKey orders as the
// floats do.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "engine/metrics/radix_sort.h"
#include "tests/support/hh_test.h"

namespace test_radix_sort {

namespace {

namespace m = hh::metrics;

// Keys as the ranking builds them: value bits above the key's index, indices ascending.
std::vector<uint64_t> keysOf(const std::vector<uint32_t>& values) {
  std::vector<uint64_t> keys;
  for (size_t j = 0; j < values.size(); ++j) keys.push_back((uint64_t(values[j]) << 32) | uint64_t(j));
  return keys;
}

// Sorts a copy both ways; an empty string when they agree, else where they first differ.
std::string compareWithStdSort(const std::vector<uint32_t>& values) {
  auto want = keysOf(values), got = want;
  std::sort(want.begin(), want.end());
  std::vector<uint64_t> scratch;
  m::radixSortByUpperHalf(got, scratch);
  if (got.size() != want.size()) return "length changed to " + std::to_string(got.size());
  for (size_t i = 0; i < got.size(); ++i)
    if (got[i] != want[i])
      return "n = " + std::to_string(values.size()) + ": position " + std::to_string(i) + " differs";
  return {};
}

// n values from `draw`, then compared; a failure names the case.
template <typename Draw>
void checkLengths(const char* what, const std::vector<size_t>& lengths, Draw draw) {
  for (const size_t n : lengths) {
    std::vector<uint32_t> values(n);
    for (auto& v : values) v = draw();
    const auto problem = compareWithStdSort(values);
    QVERIFY2(problem.empty(), (std::string(what) + ": " + problem).c_str());
  }
}

const std::vector<size_t> kLengths = {0, 1, 2, 3, 31, 32, 33, 47, 64, 255, 256, 257, 1000, 4097, 70000};

}  // namespace

class TestRadixSort : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void matchesStdSortOnRandomValues();
  void matchesStdSortWithTies();
  void skipsSharedDigits();
  void keepsEqualValuesInIndexOrder();
  void keysOrderAsTheirValues();
};

void TestRadixSort::matchesStdSortOnRandomValues() {
  std::mt19937 rng(7);
  checkLengths("uniform 32-bit values", kLengths, [&] { return static_cast<uint32_t>(rng()); });
}

void TestRadixSort::matchesStdSortWithTies() {
  // Eight distinct values: long runs of ties, whose indices must stay ascending.
  std::mt19937 rng(11);
  checkLengths("eight distinct values", kLengths,
               [&] { return 0x3f000000u + (static_cast<uint32_t>(rng()) % 8) * 0x10101u; });
}

void TestRadixSort::skipsSharedDigits() {
  std::mt19937 rng(13);
  // Only the lowest byte varies: three passes are skipped.
  checkLengths("low byte only", kLengths, [&] { return 0xbf800000u | (static_cast<uint32_t>(rng()) & 0xffu); });
  // Only the top byte varies: the first three passes are skipped, the last one sorts.
  checkLengths("top byte only", kLengths, [&] { return (static_cast<uint32_t>(rng()) & 0xffu) << 24; });
  // Order-preserving bits of positive floats in [0, 1] (the attention weights' case).
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  checkLengths("weights in [0, 1]", kLengths, [&] {
    const float f = unit(rng);
    uint32_t bits;
    std::memcpy(&bits, &f, sizeof bits);
    return bits | 0x80000000u;
  });
}

void TestRadixSort::keepsEqualValuesInIndexOrder() {
  // No pass runs: the keys come back as they went in, which is already std::sort's order.
  for (const size_t n : kLengths) {
    const auto problem = compareWithStdSort(std::vector<uint32_t>(n, 0x80000000u));
    QVERIFY2(problem.empty(), ("all equal: " + problem).c_str());
  }
  // Descending values with two of each: the radix order reverses them and keeps each pair's order.
  std::vector<uint32_t> values;
  for (uint32_t v = 500; v > 0; --v) values.insert(values.end(), 2, v << 20);
  auto keys = keysOf(values);
  std::vector<uint64_t> scratch;
  m::radixSortByUpperHalf(keys, scratch);
  for (size_t i = 0; i + 1 < keys.size(); i += 2) {
    QVERIFY2((keys[i] >> 32) == (keys[i + 1] >> 32), "pairs stay together");
    QVERIFY2((keys[i] & 0xffffffffu) + 1 == (keys[i + 1] & 0xffffffffu), "a pair keeps its index order");
  }
  QCOMPARE(keys.front() >> 32, uint64_t{1} << 20);
}

void TestRadixSort::keysOrderAsTheirValues() {
  // rankingKey: the upper halves order as the floats do, -0 and +0 equal (as == has them); the
  // index is the lower half.
  const std::vector<float> ascending = {-INFINITY, -3.0e38f, -2.5f, -1e-45f, 0.0f,
                                        1e-45f,    1e-30f,   0.5f,  1.0f,    INFINITY};
  for (size_t i = 0; i + 1 < ascending.size(); ++i)
    QVERIFY2((m::rankingKey(ascending[i], 0) >> 32) < (m::rankingKey(ascending[i + 1], 0) >> 32),
             ("key order at " + std::to_string(i)).c_str());
  QCOMPARE(m::rankingKey(-0.0f, 0) >> 32, m::rankingKey(0.0f, 0) >> 32);
  QCOMPARE(m::rankingKey(0.25f, 77) & 0xffffffffu, uint64_t{77});
}

HH_TEST_SUITE(TestRadixSort, "engine.metrics.radix_sort", &TestRadixSort::matchesStdSortOnRandomValues,
              &TestRadixSort::matchesStdSortWithTies, &TestRadixSort::skipsSharedDigits,
              &TestRadixSort::keepsEqualValuesInIndexOrder, &TestRadixSort::keysOrderAsTheirValues)

}  // namespace test_radix_sort

#if HH_HAVE_QTEST
#include "test_radix_sort.moc"
#endif
