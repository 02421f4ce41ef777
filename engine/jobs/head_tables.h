// Per-head measurements as plain data: what the jobs write into run files and return in their
// results, and what the workbench's inspector shows. HeadMeasures::measureLayer (defined with the
// attention probe, engine/jobs/attention_probe.cpp) is the one place they are computed; this
// header needs no Torch.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace at {
class Tensor;
}
namespace hh::metrics {
struct RankedScores;
}

namespace hh::jobs {

// Per-layer x per-head values of one metric at one step (row-major [L, H]).
struct HeadTable {
  std::string name;  // kl, entropy_softmax, entropy_linear, monotonicity
  int layers = 0, heads = 0;
  std::vector<double> values;
};

// Per-head measurements of a model, [L, H] tables each, NaN where undefined.
struct HeadMeasures {
  HeadTable kl, entropySoftmax, entropyLinear, monotonicity;

  HeadMeasures() = default;
  HeadMeasures(int layers, int heads);  // every value NaN
  // The four in run-file order, named as probeTableNames() says.
  std::vector<const HeadTable*> tables() const;
  std::vector<HeadTable*> tables();
  // Layer `layer` from its attention weights: softmax p [B, H, T, T] gives entropySoftmax; with
  // linear weights a [B, H, T, T] (defined): kl, entropyLinear, and with scores q.k/sqrt(d)
  // [B, H, T, T] (defined) monotonicity. valid [B|1, 1, T, T]: the pairs that count.
  void measureLayer(int layer, const at::Tensor& p, const at::Tensor& a, const at::Tensor& scores,
                    const at::Tensor& valid);
  // As measureLayer, on heads firstHead .. firstHead + h - 1 of the layer only (p, a, scores
  // [B, h, T, T]): the inspector measures one head at a time to hold one [T, T] map, not H.
  void measureHeads(int layer, int firstHead, const at::Tensor& p, const at::Tensor& a, const at::Tensor& scores,
                    const at::Tensor& valid);
  // The linear half of measureLayer (kl, entropyLinear, monotonicity; entropySoftmax untouched)
  // against the layer's scores ranked once (metrics::RankedScores of its scores and valid), for
  // several linear attentions measured against one softmax.
  void measureLinear(int layer, const at::Tensor& p, const at::Tensor& a, const metrics::RankedScores& scores,
                     const at::Tensor& valid);
  // Mean KL over the heads of the layers measured with linear weights; NaN when there are none
  // or when one of them is not finite.
  double meanKl() const;

 private:
  // kl, entropyLinear and, with monotonicity [h] defined, monotonicity of heads firstHead ...
  void measureLinearHeads(int layer, int firstHead, const at::Tensor& p, const at::Tensor& a, const at::Tensor& valid,
                          const at::Tensor& monotonicity);
  double klSum_ = 0;
  int64_t klCount_ = 0;
};

// Attention maps of one (layer, head) on the probe text, pooled to size x size.
struct AttentionSnapshot {
  int layer = 0, head = 0, size = 0;
  std::vector<float> softmax;  // [size, size]
  std::vector<float> linear;   // [size, size]; empty when the layer is softmax
};

}  // namespace hh::jobs
