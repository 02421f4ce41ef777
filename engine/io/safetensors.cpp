// safetensors reader and pickle refusal (see safetensors.h).
#include "engine/io/safetensors.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <cstring>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors data is little-endian; this reader copies bytes as they are"
#endif

namespace hh::io {
namespace {

[[noreturn]] void fail(const std::string& path, const std::string& problem, const std::string& hint) {
  throw readError(path, problem, hint);
}

const char* const kCorruptHint = "the file is truncated or corrupt; re-download or re-export it";

struct DtypeSpec {
  const char* name;
  uint64_t bytes;
  bool floating;
};
constexpr DtypeSpec kDtypes[] = {
    {"F64", 8, true},  {"F32", 4, true}, {"F16", 2, true}, {"BF16", 2, true}, {"I64", 8, false},
    {"I32", 4, false}, {"I16", 2, false}, {"I8", 1, false}, {"U8", 1, false},  {"BOOL", 1, false},
};

const DtypeSpec* findDtype(const std::string& name) {
  for (const auto& d : kDtypes) {
    if (name == d.name) return &d;
  }
  return nullptr;
}

uint64_t readU64Le(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

// The entry's three keys, of the right JSON types.
void checkEntryKeys(const std::string& path, const std::string& where, const nlohmann::json& e) {
  if (!e.is_object()) fail(path, where + " is not a JSON object", kCorruptHint);
  for (const char* key : {"dtype", "shape", "data_offsets"}) {
    if (!e.contains(key)) fail(path, where + " has no \"" + key + "\"", kCorruptHint);
  }
  if (!e.at("dtype").is_string()) fail(path, where + ": \"dtype\" is not a string", kCorruptHint);
  if (!e.at("shape").is_array()) fail(path, where + ": \"shape\" is not an array", kCorruptHint);
  const auto& offsets = e.at("data_offsets");
  if (!offsets.is_array() || offsets.size() != 2) {
    fail(path, where + ": \"data_offsets\" is not an array [begin, end]", kCorruptHint);
  }
}

// The shape's dimensions into info.shape; returns the element count, refusing 64-bit overflow.
uint64_t readTensorShape(const std::string& path, const std::string& where, const nlohmann::json& shape,
                         TensorInfo& info) {
  uint64_t numel = 1;
  for (const auto& dim : shape) {
    if (!dim.is_number_integer()) fail(path, where + ": shape holds a non-integer", kCorruptHint);
    if (!dim.is_number_unsigned()) fail(path, where + ": shape holds a negative dimension", kCorruptHint);
    const uint64_t d = dim.get<uint64_t>();
    if (d > static_cast<uint64_t>(INT64_MAX) || __builtin_mul_overflow(numel, d, &numel)) {
      fail(path, where + ": shape overflows 64 bits", kCorruptHint);
    }
    info.shape.push_back(static_cast<int64_t>(d));
  }
  return numel;
}

TensorInfo parseEntry(const std::string& path, const std::string& name, const nlohmann::json& e) {
  const std::string where = "tensor '" + name + "'";
  checkEntryKeys(path, where, e);
  TensorInfo info;
  info.dtype = e.at("dtype").get<std::string>();
  const DtypeSpec* spec = findDtype(info.dtype);
  if (spec == nullptr) {
    fail(path, where + " has unknown or unsupported dtype '" + info.dtype + "'",
         "supported dtypes are F64, F32, F16, BF16, I64, I32, I16, I8, U8, BOOL; convert the "
         "checkpoint to one of them");
  }
  const uint64_t numel = readTensorShape(path, where, e.at("shape"), info);
  uint64_t expected = 0;
  if (__builtin_mul_overflow(numel, spec->bytes, &expected)) {
    fail(path, where + ": byte size overflows 64 bits", kCorruptHint);
  }
  const auto& offsets = e.at("data_offsets");
  for (const auto& o : offsets) {
    if (!o.is_number_unsigned()) fail(path, where + ": data_offsets must be non-negative integers", kCorruptHint);
  }
  const uint64_t begin = offsets[0].get<uint64_t>(), end = offsets[1].get<uint64_t>();
  if (end < begin) {
    fail(path, where + ": data_offsets end " + std::to_string(end) + " < begin " + std::to_string(begin),
         kCorruptHint);
  }
  if (end - begin != expected) {
    fail(path, where + ": size mismatch: data_offsets span " + std::to_string(end - begin) +
                   " bytes but dtype " + info.dtype + " x shape needs " + std::to_string(expected),
         kCorruptHint);
  }
  info.offset = begin;
  info.size = end - begin;
  return info;
}

void checkTiling(const std::string& path, const std::map<std::string, TensorInfo>& tensors,
                 uint64_t dataSize) {
  std::vector<std::pair<const std::string*, const TensorInfo*>> order;
  for (const auto& [name, info] : tensors) order.emplace_back(&name, &info);
  std::sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
    return std::make_pair(a.second->offset, a.second->size) < std::make_pair(b.second->offset, b.second->size);
  });
  uint64_t expected = 0;
  const std::string* previous = nullptr;
  for (const auto& [name, info] : order) {
    if (info->offset + info->size > dataSize) {
      fail(path, "tensor '" + *name + "' data_offsets [" + std::to_string(info->offset) + ", " +
                     std::to_string(info->offset + info->size) + "] run past the end of the data buffer (" +
                     std::to_string(dataSize) + " bytes)",
           "the file is probably truncated (an interrupted download or copy); re-download it");
    }
    if (info->offset < expected) {
      fail(path, "overlapping tensors '" + *previous + "' and '" + *name + "'", kCorruptHint);
    }
    if (info->offset > expected) {
      fail(path, "gap of " + std::to_string(info->offset - expected) + " bytes before tensor '" + *name +
                     "' (tensors must tile the data buffer contiguously)",
           kCorruptHint);
    }
    expected = info->offset + info->size;
    previous = name;
  }
  if (expected != dataSize) {
    fail(path, std::to_string(dataSize - expected) + " unused bytes after the last tensor", kCorruptHint);
  }
}

}  // namespace

FormatError readError(const std::string& path, const std::string& problem, const std::string& hint) {
  return FormatError("safetensors file '" + path + "': " + problem + ". Hint: " + hint);
}

FormatError writeError(const std::string& path, const std::string& problem) {
  return FormatError("cannot write safetensors file '" + path + "': " + problem);
}

uint64_t dtypeBytes(const std::string& dtype) {
  const DtypeSpec* spec = findDtype(dtype);
  return spec == nullptr ? 0 : spec->bytes;
}

bool isFloatDtype(const std::string& dtype) {
  const DtypeSpec* spec = findDtype(dtype);
  return spec != nullptr && spec->floating;
}

void refusePickle(const std::string& path) {
  std::string lower = path;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  for (const char* ext : {".bin", ".pt", ".pth", ".ckpt", ".pkl"}) {
    const size_t n = std::strlen(ext);
    if (lower.size() >= n && lower.compare(lower.size() - n, n, ext) == 0) {
      throw FormatError(
          "'" + path + "' is a Python pickle checkpoint: pickles can run arbitrary code, so this "
          "program never loads them. Hint: convert it once to safetensors in Python with "
          "`import torch; from safetensors.torch import save_file; "
          "save_file(torch.load(p, weights_only=True), 'model.safetensors')` (weights_only=True "
          "keeps torch.load from running code; shared tensors may need .clone() first)");
    }
  }
}

SafetensorsFile SafetensorsFile::open(const std::string& path) {
  refusePickle(path);
  SafetensorsFile f;
  try {
    f.file_ = MappedFile(path);
  } catch (const std::runtime_error& e) {
    fail(path, e.what(), "check that the path exists and is readable");
  }
  const uint64_t fileSize = f.file_.size();
  if (fileSize < 8) {
    fail(path, "file is " + std::to_string(fileSize) + " bytes, shorter than the 8-byte header length",
         "this is not a safetensors file, or it is empty/truncated");
  }
  const uint64_t n = readU64Le(f.file_.data());
  if (n > kMaxSafetensorsHeaderBytes) {
    fail(path, "header length " + std::to_string(n) + " exceeds the 100 MB limit",
         "this is probably not a safetensors file (wrong format or corrupt first 8 bytes)");
  }
  if (n > fileSize - 8) {
    fail(path, "header length " + std::to_string(n) + " runs past the end of the file (" +
                   std::to_string(fileSize) + " bytes)",
         kCorruptHint);
  }
  f.dataStart_ = 8 + n;
  const char* text = reinterpret_cast<const char*>(f.file_.data() + 8);
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(text, text + n);
  } catch (const nlohmann::json::exception& e) {
    fail(path, std::string("header is not valid JSON (") + e.what() + ")", kCorruptHint);
  }
  if (!header.is_object()) fail(path, "header is not a JSON object", kCorruptHint);
  for (const auto& [key, value] : header.items()) {
    if (key == "__metadata__") {
      if (!value.is_object()) fail(path, "\"__metadata__\" is not an object", kCorruptHint);
      for (const auto& [mk, mv] : value.items()) {
        if (!mv.is_string()) fail(path, "metadata value '" + mk + "' is not a string", kCorruptHint);
        f.metadata_[mk] = mv.get<std::string>();
      }
      continue;
    }
    f.tensors_[key] = parseEntry(path, key, value);
  }
  checkTiling(path, f.tensors_, fileSize - f.dataStart_);
  return f;
}

std::vector<std::string> SafetensorsFile::names() const {
  std::vector<std::string> out;
  out.reserve(tensors_.size());
  for (const auto& kv : tensors_) out.push_back(kv.first);
  return out;  // std::map iterates in sorted order
}

const TensorInfo& SafetensorsFile::info(const std::string& name) const {
  const auto it = tensors_.find(name);
  if (it == tensors_.end()) {
    fail(path(), "no tensor named '" + name + "'",
         "call names() to list the " + std::to_string(tensors_.size()) + " tensors it holds");
  }
  return it->second;
}

const uint8_t* SafetensorsFile::bytes(const std::string& name) const {
  return file_.data() + dataStart_ + info(name).offset;
}

}  // namespace hh::io
