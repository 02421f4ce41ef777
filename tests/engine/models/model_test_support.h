// Helpers shared by the model suites: relative-error comparison, writing a config + weights
// folder from tensors (temporary folders: tests/support/temp_dir.h).
#pragma once

#include <torch/types.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "engine/io/safetensors.h"
#include "engine/models/tensor_file.h"
#include "tests/support/temp_dir.h"

namespace hh::test {

// max |a - b| / max |b| (0 when both are zero).
inline double relativeError(const torch::Tensor& a, const torch::Tensor& b) {
  const auto ad = a.to(torch::kDouble), bd = b.to(torch::kDouble);
  const double scale = bd.abs().max().item<double>();
  const double err = (ad - bd).abs().max().item<double>();
  return scale > 0 ? err / scale : err;
}

inline void writeFolder(const std::string& dir, const nlohmann::json& config,
                        const std::vector<std::pair<std::string, torch::Tensor>>& tensors) {
  std::filesystem::create_directories(dir);
  writeJson(dir + "/config.json", config);
  hh::models::writeTensorFile(dir + "/model.safetensors", tensors);
}

}  // namespace hh::test
