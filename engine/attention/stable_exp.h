// exp(t x) features that cannot overflow, for the exp_t map under a normalised rule (additive or
// gated, no window). Unshifted, exp(t q) and exp(t k) leave fp32's range once t x passes 88; a
// trained recall model put 2q at 84.5 and its normaliser overflowed (docs/experiments.md).
//
// With c_f a constant per feature, shared by every key of a sequence, and b_i one per query:
//   phi(q_i)_f = exp(t q_if + c_f - b_i),   b_i = max over the keys j that query i sees and f of t q_if + t k_jf
//   phi(k_j)_f = exp(t k_jf - c_f),         c_f = max_j t k_jf
// each product phi(q_i)_f phi(k_j)_f = exp(t q_if + t k_jf) exp(-b_i): c_f cancels inside it, and
// exp(-b_i) scales query i's numerator and normaliser alike. The output is the unshifted map's up
// to the normaliser's epsilon, the gradient too (the shifts are constants, detached). Key features
// lie in (0, 1]; every product a query sees is at most 1 and its largest is exactly 1, so the
// normaliser is at least 1 and its epsilon (1e-6) stays negligible.
//
// Whole sequences take c over all their keys, so in a causal sequence a query's features carry
// exp(c_f - max_{j <= i} t k_jf): if a feature's keys rise by more than 88 in t x along one
// sequence, the earliest queries' features overflow, where the unshifted map has overflowed
// already once t q + t k passes 88.
//
// Decoding keeps c (the running maximum) in RecurrentState::keyShift: when a key raises c_f by d,
// row f of S and z is multiplied by exp(-d) first, so every key in the state shares the new c_f.
#pragma once
#include <torch/types.h>

#include "engine/config/attention_types.h"

namespace hh::attn {

struct RecurrentState;

// Whether the layer computes exp_t's features this way (exp_t, additive or gated, no window).
bool usesShiftedExp(const LinearAttentionConfig& config);

struct ShiftedFeatures {
  torch::Tensor fq, fk;  // [B,H,T,F], F = D
};

// Whole sequences: q, k [B,H,T,D], causal or not; keyMask bool [B,T] (true = real token) or undefined. Padded
// keys take no part in c and get zero features.
ShiftedFeatures shiftedExpFeatures(const torch::Tensor& q, const torch::Tensor& k, double t, bool causal,
                                   const torch::Tensor& keyMask = {});

// Decoding: q, k [B,H,T,D] continue `state` (T = 1 for a step, the prompt for a prefill). Raises
// state.keyShift [B,H,F] to cover the new keys, rescales S and z to match, and returns features
// on the shared shift.
ShiftedFeatures shiftedExpFeatures(RecurrentState& state, const torch::Tensor& q, const torch::Tensor& k, double t);

}  // namespace hh::attn
