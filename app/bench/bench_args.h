// Command-line helpers the benchmark executables share: "--key value" options checked whole,
// comma-separated lists, and one clear error line instead of std::terminate (or a crash on an
// option left without its value) when a benchmark throws.
#pragma once
#include <cstdint>
#include <cstdio>
#include <exception>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace hh::bench {

// A bad command line (unknown option, missing value, a count below its minimum): reportErrors
// prints it with the usage and exits 2.
struct UsageError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

// "512" -> 512; anything else, trailing characters included, throws naming the text.
inline int64_t parseInteger(const std::string& s) {
  size_t used = 0;
  int64_t value = 0;
  try {
    value = std::stoll(s, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != s.size()) throw std::invalid_argument("not an integer: \"" + s + "\"");
  return value;
}

// "demo,gpt2-small" -> {"demo", "gpt2-small"}
inline std::vector<std::string> parseNames(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) out.push_back(item);
  return out;
}

// `--key`'s value as an integer in [min, max] ("--repeats must be at least 1 (got 0)"): a count of
// 0 left the benchmarks indexing an empty list of timings (SIGSEGV).
inline int64_t parseCount(const std::string& key, const std::string& value, int64_t min = 1,
                          int64_t max = std::numeric_limits<int>::max()) {
  int64_t n = 0;
  try {
    n = parseInteger(value);
  } catch (const std::invalid_argument& e) {
    throw UsageError(key + ": " + e.what());
  }
  if (n < min) throw UsageError(key + " must be at least " + std::to_string(min) + " (got " + value + ")");
  if (n > max) throw UsageError(key + " must be at most " + std::to_string(max) + " (got " + value + ")");
  return n;
}

// `--key`'s comma-separated list, not empty, each element as parseCount takes it.
inline std::vector<int64_t> parseCounts(const std::string& key, const std::string& value, int64_t min = 1) {
  std::vector<int64_t> out;
  std::stringstream ss(value);
  std::string item;
  while (std::getline(ss, item, ',')) out.push_back(parseCount(key, item, min, std::numeric_limits<int64_t>::max()));
  if (out.empty()) throw UsageError(key + " needs at least one value");
  return out;
}

// Walks "--key value" pairs: `take(key, value)` stores a known option and returns false for an
// unknown one. An unknown option, a stray word, or an option without its value (at the end, or
// followed by another option) throws UsageError; before, the loop stopped short of a last option
// without a value and ignored it.
template <class Take>
void parseOptions(int argc, char** argv, Take&& take) {
  for (int i = 1; i < argc; i += 2) {
    const std::string key = argv[i];
    if (key.rfind("--", 0) != 0) throw UsageError("unexpected argument \"" + key + "\"");
    if (i + 1 >= argc || std::string(argv[i + 1]).rfind("--", 0) == 0) throw UsageError(key + " needs a value");
    if (!take(key, std::string(argv[i + 1]))) throw UsageError("unknown option " + key);
  }
}

// Runs a benchmark's main; anything it throws (a bad number, a device that is not there, a file it
// cannot read) becomes "NAME: error: WHAT" on stderr and exit status 1; a UsageError exits 2, with
// `usage` on the next line.
template <class Main>
int reportErrors(const char* name, Main&& body, const char* usage = nullptr) {
  try {
    return body();
  } catch (const UsageError& e) {
    std::fprintf(stderr, "%s: error: %s\n", name, e.what());
    if (usage) std::fprintf(stderr, "usage: %s %s\n", name, usage);
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: error: %s\n", name, e.what());
    return 1;
  }
}

}  // namespace hh::bench
