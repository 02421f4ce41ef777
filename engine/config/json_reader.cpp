// JsonReader (json_reader.h): the template and its instantiations for the key types the parsers read.
#include "engine/config/json_reader.h"

#include <cmath>
#include <limits>
#include <stdexcept>
#include <type_traits>

namespace hh::jobs {
namespace {

// nlohmann converts a float to an integer with a plain cast, which is undefined behaviour when the
// value is out of the integer's range ("batch_size": 1e300, found by fuzz/fuzz_job_config). An
// integer field (or list of them) takes a float only when it is whole and in range.
template <typename I>
bool floatsFit(const nlohmann::json& v) {
  if (v.is_array()) {
    for (const auto& e : v)
      if (!floatsFit<I>(e)) return false;
    return true;
  }
  if (!v.is_number_float()) return true;
  const double d = v.get<double>();
  const double end = std::ldexp(1.0, std::numeric_limits<I>::digits);  // 2^63, 2^64, 2^31
  return d == std::trunc(d) && d >= static_cast<double>(std::numeric_limits<I>::min()) && d < end;
}

template <typename T>
bool convertible(const nlohmann::json& v) {
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) return floatsFit<T>(v);
  else if constexpr (std::is_same_v<T, std::vector<int64_t>>) return floatsFit<int64_t>(v);
  else if constexpr (std::is_same_v<T, std::vector<std::pair<int, int>>>) return floatsFit<int>(v);
  else return true;
}

}  // namespace

template <typename T>
void JsonReader::read(const char* key, T& out) {
  seen.insert(key);
  if (!json.contains(key) || json.at(key).is_null()) return;
  if (!convertible<T>(json.at(key)))
    throw std::invalid_argument(where + ": \"" + key + "\" is not a whole number in range (" + json.at(key).dump() + ")");
  try {
    out = json.at(key).get<T>();
  } catch (const nlohmann::json::exception&) {
    throw std::invalid_argument(where + ": \"" + key + "\" has the wrong type (" + json.at(key).dump() + ")");
  }
}
template void JsonReader::read(const char*, std::string&);
template void JsonReader::read(const char*, int64_t&);
template void JsonReader::read(const char*, uint64_t&);
template void JsonReader::read(const char*, int&);
template void JsonReader::read(const char*, double&);
template void JsonReader::read(const char*, bool&);
template void JsonReader::read(const char*, std::vector<int64_t>&);
template void JsonReader::read(const char*, std::vector<std::pair<int, int>>&);
template void JsonReader::read(const char*, std::vector<std::string>&);

void JsonReader::checkUnknownKeys() const {
  if (!json.is_object()) throw std::invalid_argument(where + ": must be a JSON object");
  for (const auto& item : json.items())
    if (!seen.count(item.key())) throw std::invalid_argument(where + ": unknown key \"" + item.key() + "\"");
}

}  // namespace hh::jobs
