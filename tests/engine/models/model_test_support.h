// Helpers shared by the model suites: temporary folders, relative-error comparison, writing a
// config + weights folder from tensors.
#pragma once
#include <torch/torch.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "engine/io/safetensors.h"

namespace hh::test {

// A fresh folder under the system temp dir, removed when the object goes away.
class TempDir {
 public:
  explicit TempDir(const std::string& tag) {
    namespace fs = std::filesystem;
    path_ = fs::temp_directory_path() / ("hh_" + tag + "_" + std::to_string(::getpid()) + "_" + std::to_string(counter()++));
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string path() const { return path_.string(); }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  static int& counter() {
    static int n = 0;
    return n;
  }
  std::filesystem::path path_;
};

// max |a - b| / max |b| (0 when both are zero).
inline double relativeError(const torch::Tensor& a, const torch::Tensor& b) {
  const auto ad = a.to(torch::kDouble), bd = b.to(torch::kDouble);
  const double scale = bd.abs().max().item<double>();
  const double err = (ad - bd).abs().max().item<double>();
  return scale > 0 ? err / scale : err;
}

inline void writeJson(const std::string& path, const nlohmann::json& j) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << j.dump(2);
}

inline void writeFolder(const std::string& dir, const nlohmann::json& config,
                        const std::vector<std::pair<std::string, torch::Tensor>>& tensors) {
  std::filesystem::create_directories(dir);
  writeJson(dir + "/config.json", config);
  io::writeSafetensors(dir + "/model.safetensors", tensors);
}

}  // namespace hh::test
