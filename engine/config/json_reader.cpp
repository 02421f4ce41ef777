// JsonReader (json_reader.h): the template and its instantiations for the key types the parsers read.
#include "engine/config/json_reader.h"

#include <cmath>
#include <limits>
#include <stdexcept>
#include <type_traits>

namespace hh::jobs {
namespace {

// nlohmann converts a number to an integer with a plain cast: a float out of the integer's range
// is undefined behaviour ("batch_size": 1e300, found by fuzz/fuzz_job_config), and an integer out
// of it wraps ("snapshot_size": 4294967312 read as 16, "seed": -1 as 2^64 - 1). An integer field
// (or list of them) takes a float only when it is whole, and any number only when it is in range.
template <typename I>
bool numbersFit(const nlohmann::json& v) {
  if (v.is_array()) {
    for (const auto& e : v)
      if (!numbersFit<I>(e)) return false;
    return true;
  }
  if (v.is_number_unsigned())  // a non-negative integer that JSON wrote
    return v.get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<I>::max());
  if (v.is_number_integer()) {  // a negative one (nlohmann keeps the others unsigned)
    const auto n = v.get<int64_t>();
    return n >= 0 ? static_cast<uint64_t>(n) <= static_cast<uint64_t>(std::numeric_limits<I>::max())
                  : std::is_signed_v<I> && n >= static_cast<int64_t>(std::numeric_limits<I>::min());
  }
  if (!v.is_number_float()) return true;  // another type: the conversion names it
  const double d = v.get<double>();
  const double end = std::ldexp(1.0, std::numeric_limits<I>::digits);  // 2^63, 2^64, 2^31
  return d == std::trunc(d) && d >= static_cast<double>(std::numeric_limits<I>::min()) && d < end;
}

template <typename T>
bool convertible(const nlohmann::json& v) {
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>)
    return numbersFit<T>(v);
  else if constexpr (std::is_same_v<T, std::vector<int64_t>>)
    return numbersFit<int64_t>(v);
  else if constexpr (std::is_same_v<T, std::vector<std::pair<int, int>>>)
    return numbersFit<int>(v);
  else
    return true;
}

}  // namespace

template <typename T>
void JsonReader::read(const char* key, T& out) {
  seen.insert(key);
  if (!json.contains(key) || json.at(key).is_null()) return;
  if (!convertible<T>(json.at(key)))
    throw std::invalid_argument(where + ": \"" + key + "\" is not a whole number in range (" + json.at(key).dump() +
                                ")");
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
