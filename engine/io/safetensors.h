// safetensors checkpoints (DESIGN.md, "Checkpoints"): read (memory-mapped, optionally sharded
// through a `*.safetensors.index.json`) and write. Layout: u64 little-endian N, N bytes of JSON
//   {"__metadata__": {str: str}?, "NAME": {"dtype", "shape", "data_offsets": [begin, end]}, ...}
// then the data buffer; offsets are relative to the start of that buffer (after the 8 + N bytes).
// Headers need not be padded, so tensor data may sit at any byte address: reads always memcpy
// into freshly allocated (aligned) tensors, never reinterpret pointers into the mapping.
// Opening validates the whole header (types, dtypes, shape overflow, sizes, bounds, and that the
// tensors tile the buffer contiguously); every problem is a FormatError naming the file.
// Pickle checkpoints (.bin/.pt/.pth/.ckpt/.pkl) are never loaded: refusePickle explains how to
// convert them.
#pragma once
#include <torch/torch.h>

#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "engine/io/mapped_file.h"

namespace hh::io {

class FormatError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct TensorInfo {
  std::string dtype;           // "F32", "F16", "BF16", "F64", "I64", "I32", "I16", "I8", "U8", "BOOL"
  std::vector<int64_t> shape;
  uint64_t offset = 0;         // byte offset from the start of the data buffer
  uint64_t size = 0;           // bytes
};

// Largest header accepted (the reference implementation uses the same bound).
constexpr uint64_t kMaxSafetensorsHeaderBytes = 100'000'000;

// Throws FormatError if `path` names a pickle checkpoint (by extension).
void refusePickle(const std::string& path);

class SafetensorsFile {
 public:
  static SafetensorsFile open(const std::string& path);

  const std::string& path() const { return file_.path(); }
  std::vector<std::string> names() const;  // sorted
  bool contains(const std::string& name) const { return tensors_.count(name) != 0; }
  const TensorInfo& info(const std::string& name) const;
  // Copies the tensor out of the mapping (CPU, contiguous). Float data (F16/BF16/F32/F64) is
  // converted to `as`, which must be a floating type. Integer/bool data keeps its own type unless
  // `as` is an integral type (e.g. kLong), in which case it is converted to it.
  torch::Tensor tensor(const std::string& name, torch::ScalarType as = torch::kFloat) const;
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  uint64_t dataStart() const { return dataStart_; }  // 8 + header length

 private:
  SafetensorsFile() = default;

  MappedFile file_;
  uint64_t dataStart_ = 0;
  std::map<std::string, TensorInfo> tensors_;
  std::map<std::string, std::string> metadata_;
};

// A model as one `model.safetensors` or as shards listed by `model.safetensors.index.json`
// ({"metadata": ..., "weight_map": {name: "shard-file"}}, shards beside the index).
class ShardedSafetensors {
 public:
  static ShardedSafetensors open(const std::string& path);

  const std::string& path() const { return path_; }
  std::vector<std::string> names() const;  // sorted
  bool contains(const std::string& name) const { return shardOf_.count(name) != 0; }
  const TensorInfo& info(const std::string& name) const;
  torch::Tensor tensor(const std::string& name, torch::ScalarType as = torch::kFloat) const;
  // The index's "metadata" (non-string values as JSON text), or the single file's metadata.
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  size_t shardCount() const { return shards_.size(); }

 private:
  ShardedSafetensors() = default;
  const SafetensorsFile& shardFor(const std::string& name) const;

  std::string path_;
  std::vector<SafetensorsFile> shards_;
  std::map<std::string, size_t> shardOf_;
  std::map<std::string, std::string> metadata_;
};

// Writes F32/F16/BF16/F64/I64/I32 tensors in the given order, contiguous offsets, header padded
// with spaces so that 8 + N is a multiple of 8. Written to `path + ".tmp"`, then renamed.
void writeSafetensors(const std::string& path,
                      const std::vector<std::pair<std::string, torch::Tensor>>& tensors,
                      const std::map<std::string, std::string>& metadata = {});

}  // namespace hh::io
