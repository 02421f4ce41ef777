// Small pieces the model families share: activations by their Hugging Face names, RMSNorm in
// fp32, rotary position embeddings (half-split, as Hugging Face Llama weights expect), and the
// reshape between [B, T, C] and per-head [B, H, T, D].
#pragma once
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>

#include <string>

#include "engine/config/model_config.h"

namespace hh::models {

// gelu_new / gelu_pytorch_tanh / gelu_fast: tanh approximation; gelu: exact erf; relu; silu/swish.
torch::Tensor activate(const torch::Tensor& x, const std::string& name);

// x / sqrt(mean(x^2) + eps) computed in fp32 (fp64 for fp64 x), cast back to x's dtype, then * weight
// (cast to x's dtype too: the result has x's dtype).
// x [..., C], weight [C].
torch::Tensor rmsNorm(const torch::Tensor& x, const torch::Tensor& weight, double eps);

// Layer norm computed in fp32 (fp64 for fp64 x) whatever the dtypes of x and the norm's weights,
// cast back to x's dtype. x [..., C].
torch::Tensor layerNorm(const torch::nn::LayerNorm& norm, const torch::Tensor& x);

// Rotary tables for positions [offset, offset + T): cos, sin [T, D], with the inverse
// frequencies theta^(-2i/D) (adjusted by linear or llama3 scaling), each repeated for both halves;
// computed in fp32 as Hugging Face does, in fp64 for an fp64 model (dtype: the model's).
struct RopeTables {
  torch::Tensor cos, sin;
};
RopeTables ropeTables(const ModelConfig& config, int64_t length, int64_t offset, torch::Device device,
                      torch::ScalarType dtype = torch::kFloat);
// The same for the positions [T] (int64, on the tables' device) with the inverse frequencies
// already there (ropeInverseFrequencies in the tables' dtype): device work only, no host copy.
RopeTables ropeTables(const torch::Tensor& positions, const torch::Tensor& inverseFrequencies);
// x [B, H, T, D]: x * cos + rotate_half(x) * sin, rotate_half(x) = [-x2, x1] (halves of D).
torch::Tensor applyRope(const torch::Tensor& x, const RopeTables& tables);
// The inverse frequencies [D/2], float64 (exposed for tests).
torch::Tensor ropeInverseFrequencies(const ModelConfig& config);

// x [..., in] @ weight [out, in]^T + bias [out] (bias may be undefined). A single row (decoding
// one token) goes through matrix-vector BLAS, which streams W once; the matrix product would first
// copy (pack) all of W for one row. Works with autograd either way. Weights of another dtype than
// x (fp32 master weights under bf16 activations) are cast to x's, differentiably; the result has
// x's dtype.
torch::Tensor projectRows(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias = {});
// An nn::Linear through projectRows (LoRA writes its effective weight into linear->weight).
torch::Tensor applyLinear(const torch::nn::Linear& linear, const torch::Tensor& x);

// The initialisation of a model trained from scratch (GPT-2's): every matrix N(0, 0.02), every
// vector zero, except the norms' parameters (those whose name contains normKey), which keep
// their ones and zeros. The draws come from the thread's generator for initial values
// (engine/attention/initial_values.h), so a job's model depends on its seed only.
void initialiseFromScratch(torch::nn::Module& model, const std::string& normKey);

// [B, T, H*D] -> [B, H, T, D] and back.
torch::Tensor splitHeads(const torch::Tensor& x, int64_t heads);
torch::Tensor mergeHeads(const torch::Tensor& x);

}  // namespace hh::models
