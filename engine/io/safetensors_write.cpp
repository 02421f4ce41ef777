// safetensors writer (see safetensors.h): header padded with spaces to 8-byte alignment of the
// data buffer, tensors in the given order, written to a temporary file, fsynced and renamed into place.
#include <nlohmann/json.hpp>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <set>

#include <unistd.h>

#include "engine/io/durable_file.h"
#include "engine/io/safetensors.h"

namespace hh::io {
namespace {

[[noreturn]] void failWrite(const std::string& path, const std::string& problem) {
  throw FormatError("cannot write safetensors file '" + path + "': " + problem);
}

const char* dtypeName(torch::ScalarType t) {
  switch (t) {
    case torch::kFloat: return "F32";
    case torch::kHalf: return "F16";
    case torch::kBFloat16: return "BF16";
    case torch::kDouble: return "F64";
    case torch::kLong: return "I64";
    case torch::kInt: return "I32";
    default: return nullptr;
  }
}

// Closes the FILE* and removes the temporary file unless released.
struct TempFile {
  std::string path;
  std::FILE* f = nullptr;
  bool keep = false;
  ~TempFile() {
    if (f != nullptr) std::fclose(f);
    if (!keep) {
      std::error_code ec;
      std::filesystem::remove(path, ec);
    }
  }
};

}  // namespace

void writeSafetensors(const std::string& path,
                      const std::vector<std::pair<std::string, torch::Tensor>>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) {
    auto& meta = header["__metadata__"];
    meta = nlohmann::ordered_json::object();
    for (const auto& [k, v] : metadata) meta[k] = v;
  }
  std::vector<torch::Tensor> data;
  std::set<std::string> seen;
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    if (name.empty() || name == "__metadata__") failWrite(path, "invalid tensor name '" + name + "'");
    if (!seen.insert(name).second) failWrite(path, "duplicate tensor name '" + name + "'");
    if (!t.defined()) failWrite(path, "tensor '" + name + "' is undefined");
    const char* dtype = dtypeName(t.scalar_type());
    if (dtype == nullptr) {
      failWrite(path, "tensor '" + name + "' has unsupported dtype " + std::string(c10::toString(t.scalar_type())) +
                          " (supported: F32, F16, BF16, F64, I64, I32)");
    }
    auto c = t.detach().to(torch::kCPU).contiguous();
    const uint64_t bytes = static_cast<uint64_t>(c.numel()) * c.element_size();
    auto& entry = header[name];
    entry["dtype"] = dtype;
    entry["shape"] = c.sizes().vec();
    entry["data_offsets"] = {offset, offset + bytes};
    offset += bytes;
    data.push_back(std::move(c));
  }
  std::string text = header.dump();
  text.append((8 - (8 + text.size()) % 8) % 8, ' ');

  TempFile tmp;
  tmp.path = path + ".tmp";
  tmp.f = std::fopen(tmp.path.c_str(), "wb");
  if (tmp.f == nullptr) failWrite(path, std::string("cannot create '") + tmp.path + "': " + std::strerror(errno));
  uint8_t lengthBytes[8];
  for (int i = 0; i < 8; ++i) lengthBytes[i] = static_cast<uint8_t>(static_cast<uint64_t>(text.size()) >> (8 * i));
  bool ok = std::fwrite(lengthBytes, 1, 8, tmp.f) == 8 &&
            std::fwrite(text.data(), 1, text.size(), tmp.f) == text.size();
  for (size_t i = 0; ok && i < data.size(); ++i) {
    const size_t bytes = static_cast<size_t>(data[i].numel()) * data[i].element_size();
    if (bytes > 0) ok = std::fwrite(data[i].data_ptr(), 1, bytes, tmp.f) == bytes;
  }
  if (!ok) failWrite(path, std::string("write error: ") + std::strerror(errno));
  // On disk before the rename: a kill or power cut after it must not expose an empty or torn file.
  if (std::fflush(tmp.f) != 0 || ::fsync(fileno(tmp.f)) != 0) failWrite(path, std::string("sync error: ") + std::strerror(errno));
  const int closed = std::fclose(tmp.f);
  tmp.f = nullptr;
  if (closed != 0) failWrite(path, std::string("close error: ") + std::strerror(errno));
  std::error_code ec;
  std::filesystem::rename(tmp.path, path, ec);
  if (ec) failWrite(path, "cannot rename '" + tmp.path + "' into place: " + ec.message());
  tmp.keep = true;
  try {
    syncDirectory(std::filesystem::path(path).parent_path().string());
  } catch (const std::exception& e) {
    failWrite(path, e.what());
  }
}

}  // namespace hh::io
