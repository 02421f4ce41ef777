// safetensors checkpoints (docs/design.md, "Checkpoints, tokenizers, data"): read (memory-mapped,
// optionally sharded through a `*.safetensors.index.json`) and write. Layout: u64 little-endian N, N bytes of JSON
//   {"__metadata__": {str: str}?, "NAME": {"dtype", "shape", "data_offsets": [begin, end]}, ...}
// then the data buffer; offsets are relative to the start of that buffer (after the 8 + N bytes).
// Headers need not be padded, so tensor data may sit at any byte address: bytes() points into the
// mapping as it is; readers memcpy out of it (engine/models/tensor_file.h makes Torch tensors),
// never reinterpret it as typed data.
// Opening validates the whole header (types, dtypes, shape overflow, sizes, bounds, and that the
// tensors tile the buffer contiguously); every problem is a FormatError naming the file.
// Pickle checkpoints (.bin/.pt/.pth/.ckpt/.pkl) are never loaded: refusePickle explains how to
// convert them. No Torch here: tensors go in and out as bytes with a dtype name and a shape.
#pragma once
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

// The errors of the reader ("safetensors file 'PATH': PROBLEM. Hint: HINT") and of the writer
// ("cannot write safetensors file 'PATH': PROBLEM"), for code that reads or writes through them.
FormatError readError(const std::string& path, const std::string& problem, const std::string& hint);
FormatError writeError(const std::string& path, const std::string& problem);

// Bytes per element of a dtype name ("F32" -> 4, "BF16" -> 2), 0 for a name not listed above.
uint64_t dtypeBytes(const std::string& dtype);
// Whether a dtype name is a floating type (F64, F32, F16, BF16).
bool isFloatDtype(const std::string& dtype);

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
  // The tensor's info(name).size bytes inside the mapping (little-endian, at any alignment); valid
  // while this object lives.
  const uint8_t* bytes(const std::string& name) const;
  // The mapped pages of tensor `name` leave resident memory (MappedFile::dropPages): call after
  // copying it out.
  void dropPages(const std::string& name) const { file_.dropPages(bytes(name), info(name).size); }
  // The same for bytes [offset, offset + size) of tensor `name` (a copy made piece by piece).
  void dropPages(const std::string& name, size_t offset, size_t size) const { file_.dropPages(bytes(name) + offset, size); }
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
  const uint8_t* bytes(const std::string& name) const { return shardFor(name).bytes(name); }
  // The file that holds `name` (its path names it in errors).
  const SafetensorsFile& shardFor(const std::string& name) const;
  // The index's "metadata" (non-string values as JSON text), or the single file's metadata.
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  size_t shardCount() const { return shards_.size(); }

 private:
  ShardedSafetensors() = default;

  std::string path_;
  std::vector<SafetensorsFile> shards_;
  std::map<std::string, size_t> shardOf_;
  std::map<std::string, std::string> metadata_;
};

// A tensor to write: `data` holds product(shape) elements of `dtype`, contiguous, little-endian.
struct TensorBytes {
  std::string name;
  std::string dtype;             // F32, F16, BF16, F64, I64 or I32
  std::vector<int64_t> shape;
  const void* data = nullptr;
};

// Writes the tensors in the given order, contiguous offsets, header padded with spaces so that
// 8 + N is a multiple of 8. Written through an AtomicFile (durable_file.h): readers see the old
// file or the new one, never a torn one.
void writeSafetensors(const std::string& path, const std::vector<TensorBytes>& tensors,
                      const std::map<std::string, std::string>& metadata = {});

}  // namespace hh::io
