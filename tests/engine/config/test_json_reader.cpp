// engine.config.json_reader: the config parsers' field reader (engine/config/json_reader.h) takes
// a number for an integer key only when it fits the member: an integer beyond an int, int64 or
// uint64 (or a negative one for uint64) is refused naming the key, as a float out of range is,
// instead of wrapping ("snapshot_size": 4294967312 was read as 16, "seed": -1 as 2^64 - 1); the
// ends of each range are read as they are.
#include <nlohmann/json.hpp>

#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "engine/config/distill_config.h"
#include "engine/config/json_reader.h"
#include "tests/support/hh_test.h"

namespace test_json_reader {

namespace {

namespace j = hh::jobs;
using J = nlohmann::json;

template <typename T>
T readOne(const J& value) {
  const J json{{"key", value}};
  j::JsonReader reader{json, "test config", {}};
  T out{};
  reader.read("key", out);
  return out;
}

}  // namespace

class TestJsonReader : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void integersOutOfRangeAreRefused() {
    const char* refused = "test config: \"key\" is not a whole number in range";
    HH_VERIFY_THROWS_WITH(readOne<int>(J(uint64_t(4294967312u))), refused);
    HH_VERIFY_THROWS_WITH(readOne<int>(J(int64_t(-4294967264))), refused);
    HH_VERIFY_THROWS_WITH(readOne<int>(J(int64_t(std::numeric_limits<int>::max()) + 1)), refused);
    HH_VERIFY_THROWS_WITH(readOne<int>(J(int64_t(std::numeric_limits<int>::min()) - 1)), refused);
    HH_VERIFY_THROWS_WITH(readOne<int64_t>(J(uint64_t(1) << 63)), refused);
    HH_VERIFY_THROWS_WITH(readOne<uint64_t>(J(int64_t(-1))), refused);
    HH_VERIFY_THROWS_WITH(readOne<uint64_t>(J(std::numeric_limits<int64_t>::min())), refused);
    HH_VERIFY_THROWS_WITH(readOne<std::vector<int64_t>>(J::array({0, uint64_t(1) << 63})), refused);
    HH_VERIFY_THROWS_WITH((readOne<std::vector<std::pair<int, int>>>(J::array({J::array({1, 4294967297u})}))), refused);
  }

  void theEndsOfEachRangeAreRead() {
    QCOMPARE(readOne<int>(J(std::numeric_limits<int>::max())), std::numeric_limits<int>::max());
    QCOMPARE(readOne<int>(J(std::numeric_limits<int>::min())), std::numeric_limits<int>::min());
    QCOMPARE(readOne<int64_t>(J(std::numeric_limits<int64_t>::max())), std::numeric_limits<int64_t>::max());
    QCOMPARE(readOne<int64_t>(J(std::numeric_limits<int64_t>::min())), std::numeric_limits<int64_t>::min());
    QCOMPARE(readOne<uint64_t>(J(std::numeric_limits<uint64_t>::max())), std::numeric_limits<uint64_t>::max());
    QCOMPARE(readOne<uint64_t>(J(0)), uint64_t(0));
    QCOMPARE(readOne<int>(J(-7)), -7);
    QCOMPARE(readOne<int>(J(7.0)), 7);  // a whole float, as before
    QVERIFY((readOne<std::vector<std::pair<int, int>>>(J::array({J::array({1, 2})})) ==
             std::vector<std::pair<int, int>>{{1, 2}}));
  }

  // The reviewer's inputs, as a project file spells them.
  void aConfigWithWrappingIntegersIsRefused() {
    HH_VERIFY_THROWS_WITH(j::distillConfigFromJson(J::parse(R"({"snapshot_size": 4294967312})")),
                          "\"snapshot_size\" is not a whole number in range (4294967312)");
    HH_VERIFY_THROWS_WITH(j::distillConfigFromJson(J::parse(R"({"curve_bins": -4294967264})")),
                          "\"curve_bins\" is not a whole number in range (-4294967264)");
    HH_VERIFY_THROWS_WITH(j::distillConfigFromJson(J::parse(R"({"seed": -3})")), "\"seed\" is not a whole number");
    HH_VERIFY_THROWS_WITH(j::distillConfigFromJson(J::parse(R"({"data": {"seed": -3}})")), "\"seed\"");
    QCOMPARE(j::distillConfigFromJson(J::parse(R"({"seed": 18446744073709551615})")).seed,
             std::numeric_limits<uint64_t>::max());
  }
};

HH_TEST_SUITE(TestJsonReader, "engine.config.json_reader", &TestJsonReader::integersOutOfRangeAreRefused,
              &TestJsonReader::theEndsOfEachRangeAreRead, &TestJsonReader::aConfigWithWrappingIntegersIsRefused)

}  // namespace test_json_reader

#if HH_HAVE_QTEST
#include "test_json_reader.moc"
#endif
