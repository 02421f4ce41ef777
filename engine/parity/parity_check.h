// Parity checker: every feature map x update rule x causality x form, on random inputs, against
// the fp64 brute force of engine/attention/reference.h. The same check the tests assert and that
// `hedgehog parity` prints.
// Error measure: relative = max_i |y_i - ref_i| / max_i |ref_i| over the whole output tensor.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "engine/config/attention_types.h"

namespace hh::parity {

struct ParityOptions {
  std::vector<int64_t> lengths = {37, 131};  // odd lengths that the chunk size does not divide
  int64_t batch = 2;
  int64_t heads = 2;
  int64_t headDim = 16;
  int64_t chunkSize = 16;
  std::vector<std::string> dtypes = {"float32", "float64", "bfloat16"};
  std::vector<attn::FeatureMapKind> featureMaps = attn::allFeatureMapKinds();
  std::vector<attn::UpdateRule> rules = attn::allUpdateRules();
  uint64_t seed = 1234;
  std::string device = "cpu";  // canonical (engine/core/device.h: cpu, cuda:N): where the forms run
};

struct ParityRow {
  std::string featureMap;  // "softmax" for the softmax row
  std::string rule;
  bool causal = true;
  std::string form;        // quadratic | chunked | recurrent | weights | layer (Hedgehog additive
                           // causal through LinearAttention: the fused kernels where they apply)
  std::string dtype;
  int64_t length = 0;
  double maxAbsError = 0.0;
  double relError = 0.0;
};

// Tolerance the tests assert per dtype (relative error): float64 1e-10, float32 1e-5,
// bfloat16 5e-2 (reported, bf16 is the storage precision of the inputs only).
double toleranceFor(const std::string& dtype);

// Runs the grid; onRow (if set) sees each row as it is computed.
std::vector<ParityRow> runParity(const ParityOptions& options,
                                 const std::function<void(const ParityRow&)>& onRow = {});

}  // namespace hh::parity
