// Command-line helpers the benchmark executables share: comma-separated lists.
#pragma once
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

namespace hh::bench {

// "512,2048" -> {512, 2048} (std::stoll throws on a non-number)
inline std::vector<int64_t> parseIntegers(const std::string& s) {
  std::vector<int64_t> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) out.push_back(std::stoll(item));
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

}  // namespace hh::bench
