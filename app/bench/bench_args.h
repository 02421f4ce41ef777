// Command-line helpers the benchmark executables share: comma-separated lists, and one clear error
// line instead of std::terminate when a benchmark throws.
#pragma once
#include <cstdint>
#include <cstdio>
#include <exception>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace hh::bench {

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

// "512,2048" -> {512, 2048}
inline std::vector<int64_t> parseIntegers(const std::string& s) {
  std::vector<int64_t> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) out.push_back(parseInteger(item));
  return out;
}

// "demo,gpt2-small" -> {"demo", "gpt2-small"}
inline std::vector<std::string> parseNames(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) out.push_back(item);
  return out;
}

// Runs a benchmark's main; anything it throws (a bad number, a device that is not there, a file it
// cannot read) becomes "NAME: error: WHAT" on stderr and exit status 1.
template <class Main>
int reportErrors(const char* name, Main&& body) {
  try {
    return body();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: error: %s\n", name, e.what());
    return 1;
  }
}

}  // namespace hh::bench
