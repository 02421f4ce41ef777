// Helpers the verbs share for their flags and output files (see commands.h).
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>

#include "app/cli/commands.h"
#include "engine/io/durable_file.h"

namespace hh::cli {

CLI::Validator finiteNumber(bool positive) {
  return CLI::Validator(
      [positive](std::string& text) -> std::string {
        char* end = nullptr;
        const double value = std::strtod(text.c_str(), &end);
        if (end == text.c_str() || *end != '\0' || !std::isfinite(value) || (positive && !(value > 0)))
          return std::string("must be a ") + (positive ? "positive " : "") + "finite number, got " + text;
        return {};
      },
      positive ? "POSITIVE" : "FINITE");
}

void refuseOutputInside(const std::string& output, const char* flag, const std::string& folder) {
  if (output.empty() || folder.empty()) return;
  std::error_code ec;
  const auto out = std::filesystem::weakly_canonical(output, ec);
  const auto dir = std::filesystem::weakly_canonical(folder, ec);
  if (ec) return;
  const auto rel = out.lexically_relative(dir);
  if (!rel.empty() && *rel.begin() != "..")
    throw std::invalid_argument(output + ": " + flag + " would write inside the model folder " + folder +
                                " (its own files would be replaced); choose a path outside it");
}

void writeOutput(const std::string& path, const std::string& text, const char* what) {
  try {
    io::writeFileAtomically(path, text);
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(path + ": cannot write the " + what + " (" + e.what() + ")");
  }
}

}  // namespace hh::cli
