// app.cli.bench_options: the command lines of hh_bench_attention and hh_bench_decode
// (app/bench/bench_options.h), parsed as the benchmarks parse them. `--repeats 0` and `--steps 0`
// crashed them (SIGSEGV on an empty list of timings); an option without its value at the end of
// the line, or followed by another option, was ignored. Now each of those, a count below 1, a
// number with trailing characters, an empty list and an unknown option is a UsageError, which
// reportErrors turns into one error line, the usage, and exit status 2. Good command lines parse
// to what they say.
#include <cstdint>
#include <string>
#include <vector>

#include "app/bench/bench_options.h"
#include "tests/support/hh_test.h"

namespace test_bench_options {

namespace {

namespace b = hh::bench;

// Runs `parse` on `words` as a command line after the program's name.
template <class Parse>
auto parseLine(Parse parse, std::vector<std::string> words) {
  words.insert(words.begin(), "hh_bench");
  std::vector<char*> argv;
  for (auto& w : words) argv.push_back(w.data());
  return parse(int(argv.size()), argv.data());
}

// The message of the UsageError `parse` throws on `words` ("" when it throws none).
template <class Parse>
std::string usageError(Parse parse, const std::vector<std::string>& words) {
  try {
    parseLine(parse, words);
  } catch (const b::UsageError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

class TestBenchOptions : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void goodLinesParse() {
    const auto a = parseLine(b::parseAttentionOptions, {"--lengths", "64,128", "--repeats", "2", "--softmax-max", "0",
                                                        "--heads", "2", "--dim", "8", "--dtype", "bfloat16"});
    QCOMPARE(a.lengths, (std::vector<int64_t>{64, 128}));
    QCOMPARE(a.repeats, 2);
    QCOMPARE(a.softmaxMax, int64_t(0));  // 0: no softmax column, a choice, not a mistake
    QCOMPARE(a.heads, int64_t(2));
    QCOMPARE(a.dtype, std::string("bfloat16"));
    QCOMPARE(parseLine(b::parseAttentionOptions, {}).repeats, 3);
    const auto d = parseLine(b::parseDecodeOptions, {"--positions", "16", "--steps", "1", "--shapes", "demo"});
    QCOMPARE(d.positions, std::vector<int64_t>{16});
    QCOMPARE(d.steps, 1);
    QCOMPARE(d.shapes, std::vector<std::string>{"demo"});
  }

  void countsBelowOneAreRefused() {
    QCOMPARE(usageError(b::parseAttentionOptions, {"--repeats", "0"}),
             std::string("--repeats must be at least 1 (got 0)"));
    QCOMPARE(usageError(b::parseDecodeOptions, {"--steps", "0"}), std::string("--steps must be at least 1 (got 0)"));
    QCOMPARE(usageError(b::parseDecodeOptions, {"--steps", "-4"}), std::string("--steps must be at least 1 (got -4)"));
    QCOMPARE(usageError(b::parseAttentionOptions, {"--lengths", "1024,0"}),
             std::string("--lengths must be at least 1 (got 0)"));
    QCOMPARE(usageError(b::parseDecodeOptions, {"--positions", ""}),
             std::string("--positions needs at least one value"));
    QCOMPARE(usageError(b::parseDecodeOptions, {"--batch", "0"}), std::string("--batch must be at least 1 (got 0)"));
    QCOMPARE(usageError(b::parseAttentionOptions, {"--repeats", "99999999999"}),
             std::string("--repeats must be at most 2147483647 (got 99999999999)"));
    QCOMPARE(usageError(b::parseDecodeOptions, {"--steps", "5x"}), std::string("--steps: not an integer: \"5x\""));
  }

  void missingValuesAndUnknownOptionsAreRefused() {
    QCOMPARE(usageError(b::parseAttentionOptions, {"--lengths", "64", "--repeats"}),
             std::string("--repeats needs a value"));
    QCOMPARE(usageError(b::parseDecodeOptions, {"--steps", "--positions", "16"}), std::string("--steps needs a value"));
    QCOMPARE(usageError(b::parseAttentionOptions, {"--repaets", "3"}), std::string("unknown option --repaets"));
    QCOMPARE(usageError(b::parseDecodeOptions, {"--steps", "2", "extra"}),
             std::string("unexpected argument \"extra\""));
    QCOMPARE(usageError(b::parseDecodeOptions, {"--dtype", "int8"}),
             std::string("--dtype must be float32 or bfloat16 (got int8)"));
  }

  // A UsageError exits 2 (any other error 1), and the benchmark's main never runs on.
  void usageErrorsExitTwo() {
    QCOMPARE(b::reportErrors(
                 "hh_bench_test",
                 [] {
                   return parseLine(b::parseDecodeOptions, {"--steps", "0"}).steps;
                 },
                 b::kDecodeUsage),
             2);
    QCOMPARE(b::reportErrors("hh_bench_test", []() -> int { throw std::runtime_error("no GPU"); }), 1);
    QCOMPARE(b::reportErrors("hh_bench_test", [] { return 0; }), 0);
  }
};

HH_TEST_SUITE(TestBenchOptions, "app.cli.bench_options", &TestBenchOptions::goodLinesParse,
              &TestBenchOptions::countsBelowOneAreRefused, &TestBenchOptions::missingValuesAndUnknownOptionsAreRefused,
              &TestBenchOptions::usageErrorsExitTwo)

}  // namespace test_bench_options

#if HH_HAVE_QTEST
#include "test_bench_options.moc"
#endif
