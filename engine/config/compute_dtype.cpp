#include "engine/config/compute_dtype.h"

#include <algorithm>
#include <stdexcept>

namespace hh::jobs {

const std::vector<std::string>& computeDtypeNames() {
  static const std::vector<std::string> names{"float32", "bfloat16", "float64"};
  return names;
}

void checkComputeDtype(const std::string& name, const std::string& where) {
  const auto& names = computeDtypeNames();
  if (std::find(names.begin(), names.end(), name) == names.end())
    throw std::invalid_argument(where + ": dtype must be float32, bfloat16 or float64, got \"" + name + "\"");
}

}  // namespace hh::jobs
