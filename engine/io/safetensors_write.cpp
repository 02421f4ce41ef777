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

[[noreturn]] void failWrite(const std::string& path, const std::string& problem) { throw writeError(path, problem); }

bool writable(const std::string& dtype) {
  for (const char* name : {"F32", "F16", "BF16", "F64", "I64", "I32"})
    if (dtype == name) return true;
  return false;
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

void writeSafetensors(const std::string& path, const std::vector<TensorBytes>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) {
    auto& meta = header["__metadata__"];
    meta = nlohmann::ordered_json::object();
    for (const auto& [k, v] : metadata) meta[k] = v;
  }
  std::vector<uint64_t> sizes;  // bytes per tensor
  std::set<std::string> seen;
  uint64_t offset = 0;
  for (const auto& t : tensors) {
    if (t.name.empty() || t.name == "__metadata__") failWrite(path, "invalid tensor name '" + t.name + "'");
    if (!seen.insert(t.name).second) failWrite(path, "duplicate tensor name '" + t.name + "'");
    if (!writable(t.dtype))
      failWrite(path, "tensor '" + t.name + "' has unsupported dtype " + t.dtype + " (supported: F32, F16, BF16, F64, I64, I32)");
    uint64_t bytes = dtypeBytes(t.dtype);
    for (const int64_t d : t.shape) {
      if (d < 0) failWrite(path, "tensor '" + t.name + "' has a negative dimension");
      bytes *= static_cast<uint64_t>(d);
    }
    if (bytes > 0 && t.data == nullptr) failWrite(path, "tensor '" + t.name + "' has no data");
    auto& entry = header[t.name];
    entry["dtype"] = t.dtype;
    entry["shape"] = t.shape;
    entry["data_offsets"] = {offset, offset + bytes};
    offset += bytes;
    sizes.push_back(bytes);
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
  for (size_t i = 0; ok && i < tensors.size(); ++i)
    if (sizes[i] > 0) ok = std::fwrite(tensors[i].data, 1, sizes[i], tmp.f) == sizes[i];
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
