// Torch tensors in and out of safetensors files (see tensor_file.h).
#include "engine/models/tensor_file.h"

#include <ATen/ATen.h>

#include <algorithm>
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
  // Copied piece by piece, each piece's file pages dropped once copied: the copy is what stays,
  // and a large tensor (a 154 MB embedding) never has its file pages and its copy resident whole.
  constexpr size_t kPiece = size_t(16) << 20;
  auto* to = static_cast<uint8_t*>(out.data_ptr());
  for (size_t offset = 0; offset < info.size; offset += kPiece) {
    const size_t size = std::min(kPiece, size_t(info.size) - offset);
    std::memcpy(to + offset, file.bytes(name) + offset, size);
    file.dropPages(name, offset, size);
  }
  if (info.size > 0) file.dropPages(name);  // the pages that straddled two pieces
  if (sourceFloat || !targetFloat) return out.scalar_type() == as ? out : out.to(as);
  return out;  // integer data asked as a float type: kept as it is
}

int64_t readTensorInto(const io::SafetensorsFile& file, const std::string& name, at::Tensor into) {
  const io::TensorInfo& info = file.info(name);
  const at::ScalarType type = scalarTypeOf(info.dtype);
  TORCH_CHECK(io::isFloatDtype(info.dtype) && into.is_floating_point(), name, ": readTensorInto copies float data only");
  TORCH_CHECK(into.sizes().vec() == info.shape, name, ": readTensorInto into a tensor of another shape");
  auto countBad = [](const at::Tensor& t) { return t.numel() == 0 ? int64_t(0) : (~at::isfinite(t)).sum().item<int64_t>(); };
  const uint8_t* bytes = file.bytes(name);
  const bool aligned = reinterpret_cast<uintptr_t>(bytes) % c10::elementSize(type) == 0;
  if (info.shape.empty() || info.size == 0 || !aligned) {  // a scalar, nothing, or data the kernels may not read in place
    into.copy_(readTensor(file, name, into.scalar_type()));
    return countBad(into);
  }
  // A read-only view of the mapping: only ever read from (copy_ below).
  const auto source = at::from_blob(const_cast<uint8_t*>(bytes), info.shape, at::TensorOptions().dtype(type));
  constexpr int64_t kPiece = int64_t(4) << 20;  // the NaN check holds about 2.5x a run on top
  const int64_t rows = info.shape[0], rowBytes = int64_t(info.size) / rows;
  const int64_t step = std::max<int64_t>(1, kPiece / std::max<int64_t>(1, rowBytes));
  int64_t bad = 0;
  for (int64_t row = 0; row < rows; row += step) {
    const int64_t n = std::min(step, rows - row);
    auto to = into.narrow(0, row, n);
    to.copy_(source.narrow(0, row, n));
    bad += countBad(to);
    file.dropPages(name, size_t(row * rowBytes), size_t(n * rowBytes));
  }
  file.dropPages(name);  // the pages that straddled two runs
  return bad;
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
