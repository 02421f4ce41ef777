// Torch tensors in and out of safetensors files (see tensor_file.h).
#include "engine/models/tensor_file.h"

#include <ATen/ATen.h>

#include <cstring>

namespace hh::models {
namespace {

struct DtypeName {
  const char* name;
  at::ScalarType type;
};
constexpr DtypeName kDtypes[] = {
    {"F64", at::kDouble}, {"F32", at::kFloat}, {"F16", at::kHalf}, {"BF16", at::kBFloat16}, {"I64", at::kLong},
    {"I32", at::kInt},    {"I16", at::kShort}, {"I8", at::kChar},  {"U8", at::kByte},       {"BOOL", at::kBool},
};

at::ScalarType scalarTypeOf(const std::string& dtype) {
  for (const auto& d : kDtypes)
    if (dtype == d.name) return d.type;
  throw std::logic_error("safetensors dtype " + dtype + " has no Torch type");  // the reader lets no other through
}

// The dtype name a tensor is written as; nullptr for types the writer does not take.
const char* writtenDtypeOf(at::ScalarType type) {
  switch (type) {
    case at::kFloat: return "F32";
    case at::kHalf: return "F16";
    case at::kBFloat16: return "BF16";
    case at::kDouble: return "F64";
    case at::kLong: return "I64";
    case at::kInt: return "I32";
    default: return nullptr;
  }
}

}  // namespace

at::Tensor readTensor(const io::SafetensorsFile& file, const std::string& name, at::ScalarType as) {
  const io::TensorInfo& info = file.info(name);
  const bool sourceFloat = io::isFloatDtype(info.dtype);
  const bool targetFloat = c10::isFloatingType(as);
  if (sourceFloat && !targetFloat)
    throw io::readError(file.path(),
                        "tensor '" + name + "' holds " + info.dtype + " data and cannot be read as " + std::string(c10::toString(as)),
                        "ask for a floating type (kFloat, kHalf, kBFloat16, kDouble)");
  auto out = at::empty(info.shape, at::TensorOptions().dtype(scalarTypeOf(info.dtype)));
  if (info.size > 0) {
    std::memcpy(out.data_ptr(), file.bytes(name), info.size);
    file.dropPages(name);  // the copy is what stays: a loaded model does not hold its file twice
  }
  if (sourceFloat || !targetFloat) return out.scalar_type() == as ? out : out.to(as);
  return out;  // integer data asked as a float type: kept as it is
}

at::Tensor readTensor(const io::ShardedSafetensors& file, const std::string& name, at::ScalarType as) {
  return readTensor(file.shardFor(name), name, as);
}

void writeTensorFile(const std::string& path, const std::vector<std::pair<std::string, at::Tensor>>& tensors,
                     const std::map<std::string, std::string>& metadata) {
  std::vector<at::Tensor> contiguous;  // keeps the bytes alive until written
  std::vector<io::TensorBytes> entries;
  contiguous.reserve(tensors.size());
  for (const auto& [name, t] : tensors) {
    if (!t.defined()) throw io::writeError(path, "tensor '" + name + "' is undefined");
    const char* dtype = writtenDtypeOf(t.scalar_type());
    if (dtype == nullptr)
      throw io::writeError(path, "tensor '" + name + "' has unsupported dtype " + std::string(c10::toString(t.scalar_type())) +
                                     " (supported: F32, F16, BF16, F64, I64, I32)");
    contiguous.push_back(t.detach().to(at::kCPU).contiguous());
    entries.push_back({name, dtype, contiguous.back().sizes().vec(), contiguous.back().data_ptr()});
  }
  io::writeSafetensors(path, entries, metadata);
}

}  // namespace hh::models
