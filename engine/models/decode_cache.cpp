#include "engine/models/decode_cache.h"

#include <torch/types.h>

#include <limits>

namespace hh::models {

void KvCache::reserve(int64_t positions, const torch::Tensor& like) {
  // like [B, H_kv, *, D]: gives batch, heads, head dim, dtype and device.
  if (positions <= capacity()) return;
  if (!keys_.defined() && !like.defined()) {
    reserved_ = std::max(reserved_, positions);
    return;
  }
  const auto& ref = keys_.defined() ? keys_ : like;
  auto grow = [&](const torch::Tensor& old) {
    auto fresh = torch::empty({ref.size(0), ref.size(1), positions, ref.size(3)}, ref.options());
    if (old.defined() && length_ > 0) fresh.narrow(2, 0, length_).copy_(old.narrow(2, 0, length_));
    return fresh;
  };
  keys_ = grow(keys_);
  values_ = grow(values_);
}

void KvCache::append(const torch::Tensor& k, const torch::Tensor& v) {
  // k, v [B, H_kv, T, D]
  const int64_t t = k.size(2);
  if (keys_.defined()) {
    TORCH_CHECK(k.size(0) == keys_.size(0) && k.size(1) == keys_.size(1) && k.size(3) == keys_.size(3),
                "KV cache: appended keys ", k.sizes(), " do not match the cache ", keys_.sizes());
  }
  if (length_ + t > capacity()) {
    const int64_t wanted = std::max({length_ + t, 2 * capacity(), reserved_, int64_t(64)});
    reserve(wanted, k);
  }
  keys_.narrow(2, length_, t).copy_(k);
  values_.narrow(2, length_, t).copy_(v);
  length_ += t;
}

torch::Tensor KvCache::keys() const { return keys_.defined() ? keys_.narrow(2, 0, length_) : torch::Tensor(); }
torch::Tensor KvCache::values() const { return values_.defined() ? values_.narrow(2, 0, length_) : torch::Tensor(); }

int64_t KvCache::bytes() const {
  int64_t n = 0;
  for (const auto& t : {keys_, values_})
    if (t.defined()) n += t.numel() * static_cast<int64_t>(t.element_size());
  return n;
}

int64_t KvCache::usedBytes() const {
  return keys_.defined() ? 2 * keys_.size(0) * keys_.size(1) * length_ * keys_.size(3) * int64_t(keys_.element_size()) : 0;
}

int64_t DecodeCache::usedBytes() const {
  int64_t n = stateBytes();
  for (const auto& l : layers) n += l.kv.usedBytes();
  return n;
}

int64_t DecodeCache::kvBytes() const {
  int64_t n = 0;
  for (const auto& l : layers) n += l.kv.bytes();
  return n;
}

int64_t DecodeCache::stateBytes() const {
  int64_t n = 0;
  for (const auto& l : layers)
    if (l.linear) n += l.state.bytes();
  return n;
}

int64_t DecodeCache::bytes() const { return kvBytes() + stateBytes(); }

torch::Tensor DecodeCache::stateNorms(int64_t heads) const {
  auto out = torch::full({static_cast<int64_t>(layers.size()), heads}, std::numeric_limits<float>::quiet_NaN());
  for (size_t l = 0; l < layers.size(); ++l) {
    const auto& s = layers[l].state.S;  // [B,H,F,D]
    if (!layers[l].linear || !s.defined()) continue;
    out[static_cast<int64_t>(l)].copy_(s[0].flatten(1).norm(2, 1).to(torch::kFloat).cpu());
  }
  return out;
}

torch::Tensor DecodeCache::lastDecay(int64_t heads) const {
  auto out = torch::full({static_cast<int64_t>(layers.size()), heads}, std::numeric_limits<float>::quiet_NaN());
  for (size_t l = 0; l < layers.size(); ++l) {
    const auto& d = layers[l].state.lastDecay;  // [B,H]
    if (!layers[l].linear || !d.defined()) continue;
    out[static_cast<int64_t>(l)].copy_(d[0].to(torch::kFloat).cpu());
  }
  return out;
}

}  // namespace hh::models
