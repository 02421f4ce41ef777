// safetensors writer (see safetensors.h): header padded with spaces to 8-byte alignment of the
// data buffer, tensors in the given order, written through an AtomicFile (durable_file.h).
#include <nlohmann/json.hpp>

#include <set>

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

// The header (`__metadata__` first, then the tensors in order), padded with spaces so that the
// data starts 8-byte aligned, and each tensor's size in bytes.
std::string headerFor(const std::string& path, const std::vector<TensorBytes>& tensors,
                      const std::map<std::string, std::string>& metadata, std::vector<uint64_t>& sizes) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) {
    auto& meta = header["__metadata__"];
    meta = nlohmann::ordered_json::object();
    for (const auto& [k, v] : metadata) meta[k] = v;
  }
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
  return text;
}

}  // namespace

void writeSafetensors(const std::string& path, const std::vector<TensorBytes>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  std::vector<uint64_t> sizes;
  const std::string header = headerFor(path, tensors, metadata, sizes);
  uint8_t lengthBytes[8];  // little-endian
  for (int i = 0; i < 8; ++i) lengthBytes[i] = static_cast<uint8_t>(static_cast<uint64_t>(header.size()) >> (8 * i));
  try {
    AtomicFile file(path);  // a kill or power cut at any point leaves the old file or the new one
    file.write(lengthBytes, 8);
    file.write(header.data(), header.size());
    for (size_t i = 0; i < tensors.size(); ++i) file.write(tensors[i].data, sizes[i]);
    file.commit();
  } catch (const std::runtime_error& e) {
    failWrite(path, e.what());
  }
}

}  // namespace hh::io
