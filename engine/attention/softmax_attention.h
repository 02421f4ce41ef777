// Softmax attention, the teacher every linear form is compared against.
//   q, k   : [B, H, T, D]   (k may have Tk != Tq for cross attention; causal needs Tk == Tq)
//   v      : [B, H, Tk, Dv]
//   keyMask: optional bool [B, Tk], true = real token (padding is false); broadcast over H and Tq
#pragma once
#include <ATen/core/Tensor.h>

namespace hh::attn {

// Scaled scores q.k / sqrt(D): [B, H, Tq, Tk] (no mask applied).
at::Tensor attentionScores(const at::Tensor& q, const at::Tensor& k);

// softmax(q k^T / sqrt(D) + mask): [B, H, Tq, Tk]; computed in at least fp32.
at::Tensor softmaxWeights(const at::Tensor& q, const at::Tensor& k, bool causal,
                             const at::Tensor& keyMask = {});

// softmaxWeights(...) @ v: [B, H, Tq, Dv]. On CUDA tensors without a key mask (LibTorch 2 and
// later), PyTorch's fused scaled_dot_product_attention computes it instead, never holding the
// weights.
at::Tensor softmaxAttention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool causal,
                               const at::Tensor& keyMask = {});

// softmaxAttention computed a block of query rows at a time, for inference on long texts: about
// `blockBytes` of fp32 scores alive ([B, H, rows, keys]) instead of [B, H, Tq, Tk] and its
// masked, softmaxed and cleaned copies; causal blocks read only the keys their rows can see.
// Equals softmaxAttention to rounding (the same per-row arithmetic); when one block would hold
// every row it is softmaxAttention. fp32 and bf16 CPU tensors without a key mask or a gradient go
// to fusedSoftmaxAttentionCpu instead (64 rows at a time, one [64, Tk] buffer per thread).
at::Tensor softmaxAttentionInBlocks(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool causal,
                                       const at::Tensor& keyMask = {}, int64_t blockBytes = int64_t(8) << 20);

// Decoding against a KV cache: the last T of the N cached positions are the queries' own, so
// query t (absolute position N - T + t) sees keys 0 .. N - T + t. Grouped heads: query heads
// j*g .. (j+1)*g - 1 share cached head j (g = H / H_kv), without copying the cache.
//   q [B, H, T, D]; keys, values [B, H_kv, N, D] (views of a cache); scores = q.k * scale.
// Returns [B, H, T, D]; scores and softmax in at least fp32.
at::Tensor cachedSoftmaxAttention(const at::Tensor& q, const at::Tensor& keys, const at::Tensor& values,
                                     double scale);

// The bool mask of (query, key) pairs that take part: [1 or B, 1, Tq, Tk].
at::Tensor validPairs(int64_t tq, int64_t tk, bool causal, const at::Tensor& keyMask = {},
                         at::Device device = at::kCPU);

}  // namespace hh::attn
