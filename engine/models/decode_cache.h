// What a model carries between calls when it generates: per layer either a KV cache (softmax
// layers: the original model, hybrid plans, or converted layers run as the teacher) or the
// recurrent state of its linear attention (S, z: constant size whatever the position).
//   Pass a DecodeCache in ForwardOptions::cache: the model reads positions from cache.position
//   (GPT-2's learned positions, Llama's rotary tables), runs softmax layers against the cached
//   keys and linear layers in prefill (T > 1, chunked form from the state) or step (T = 1,
//   recurrent form) mode, and advances cache.position by T.
// Shapes: keys, values [B, H_kv, capacity, D] of which the first `length` positions are filled.
#pragma once
#include <ATen/core/Tensor.h>

#include <vector>

#include "engine/attention/linear_attention.h"

namespace hh::models {

// Keys and values of one softmax layer, kept in a buffer that grows by doubling (or to the size
// reserved up front), so appending a token copies only that token.
class KvCache {
 public:
  // k, v [B, H_kv, T, D] appended at the end.
  void append(const at::Tensor& k, const at::Tensor& v);
  // Capacity for `positions` tokens in total (no-op when already that large).
  void reserve(int64_t positions, const at::Tensor& like);
  at::Tensor keys() const;    // [B, H_kv, length, D] view
  at::Tensor values() const;  // [B, H_kv, length, D] view
  int64_t length() const { return length_; }
  int64_t capacity() const { return keys_.defined() ? keys_.size(2) : 0; }
  int64_t bytes() const;      // bytes held (the whole capacity)
  int64_t usedBytes() const;  // bytes of the filled positions

 private:
  at::Tensor keys_, values_;
  int64_t length_ = 0;
  int64_t reserved_ = 0;  // asked for before the first append
};

struct LayerCache {
  bool linear = false;           // recurrent state (true) or KV cache (false)
  KvCache kv;                    // softmax layers
  attn::RecurrentState state;    // linear layers
};

struct DecodeCache {
  std::vector<LayerCache> layers;  // [L]
  int64_t position = 0;            // tokens consumed so far (the next token's position)
  int64_t batch = 1;

  int64_t bytes() const;       // everything held: KV buffers (their capacity) and recurrent states
  int64_t usedBytes() const;   // the filled KV positions and the recurrent states
  int64_t kvBytes() const;     // the KV buffers alone
  int64_t stateBytes() const;  // the recurrent states alone
  // ||S||_F per layer and head: [L, H] float; rows of softmax layers are NaN. Batch row 0.
  at::Tensor stateNorms(int64_t heads) const;
  // The decay factor applied at the last token per layer and head (gated, decay rules): [L, H]
  // float, NaN where a layer has none.
  at::Tensor lastDecay(int64_t heads) const;
};

}  // namespace hh::models
