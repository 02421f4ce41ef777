// Torch tensors in and out of safetensors files: the bridge between engine/io/safetensors.h, which
// reads and writes bytes, and the tensors the models, jobs and tools hold.
#pragma once
#include <ATen/core/Tensor.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "engine/io/safetensors.h"

namespace hh::models {

// Copies tensor `name` out of the mapping (CPU, contiguous). Float data (F16/BF16/F32/F64) is
// converted to `as`, which must be a floating type. Integer/bool data keeps its own type unless
// `as` is an integral type (e.g. kLong), in which case it is converted to it. Errors are
// io::FormatError naming the file that holds the tensor.
at::Tensor readTensor(const io::SafetensorsFile& file, const std::string& name, at::ScalarType as = at::kFloat);
at::Tensor readTensor(const io::ShardedSafetensors& file, const std::string& name, at::ScalarType as = at::kFloat);

// Copies float tensor `name` into `into` (same shape; any float dtype, any strides, e.g. the
// transpose of a parameter), converting the dtype, straight from the mapping: 4 MB of rows at a
// time, each run's file pages dropped once copied, so no copy of the whole tensor is made and its
// file pages are never resident whole. Returns how many of the copied values are NaN or infinite.
int64_t readTensorInto(const io::SafetensorsFile& file, const std::string& name, at::Tensor into);

// Writes F32/F16/BF16/F64/I64/I32 tensors (any device, any layout: copied to contiguous CPU
// memory first) with io::writeSafetensors.
void writeTensorFile(const std::string& path, const std::vector<std::pair<std::string, at::Tensor>>& tensors,
                     const std::map<std::string, std::string>& metadata = {});

}  // namespace hh::models
