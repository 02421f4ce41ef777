// Temporary folders and small files for the suites (no Torch: Torch-free suites include this).
#pragma once
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace hh::test {

// The folder the suites' temporary files go under: $TMPDIR when set, else /tmp. Not
// std::filesystem::temp_directory_path(): linked against a PyTorch wheel's LibTorch, whose
// libtorch_cpu.so exports copies of libstdc++ code (pytorch/pytorch#133437), every suite that
// called it crashed on the first GPU run (docs/gpu.md).
inline std::filesystem::path tempRoot() {
  const char* dir = std::getenv("TMPDIR");
  return dir && *dir ? std::filesystem::path(dir) : std::filesystem::path("/tmp");
}

// A fresh folder under the system temp dir, removed when the object goes away.
class TempDir {
 public:
  explicit TempDir(const std::string& tag) {
    namespace fs = std::filesystem;
    path_ = tempRoot() / ("hh_" + tag + "_" + std::to_string(::getpid()) + "_" + std::to_string(counter()++));
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

inline void writeJson(const std::string& path, const nlohmann::json& j) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << j.dump(2);
}

}  // namespace hh::test
