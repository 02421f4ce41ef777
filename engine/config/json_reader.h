// The config parsers' field reader: reads the keys a parser knows, rejects wrong types (and floats
// that are not whole numbers in range for integer keys) with the key's name, and, at the end,
// every key it was not asked for.
#pragma once
#include <nlohmann/json.hpp>

#include <set>
#include <string>

namespace hh::jobs {

// JSON readers: `seen` collects the keys read so that checkUnknownKeys can name the others.
struct JsonReader {
  const nlohmann::json& json;
  std::string where;
  std::set<std::string> seen;
  template <typename T>
  void read(const char* key, T& out);
  void checkUnknownKeys() const;
};

}  // namespace hh::jobs
