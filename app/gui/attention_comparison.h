// The workbench's first computation: one random attention head, softmax against a linear
// attention with a chosen feature map, as plain data for the widgets.
//   q, k ~ N(0, 1), shape [1, 1, T, D], from a generator seeded with `seed`;
//   softmax weights p = softmaxWeights(q, k, causal); linear weights a = linearWeights(phi(q),
//   phi(k)) (additive rule, quadratic form); scores s = q.k / sqrt(D);
//   metrics over valid pairs: KL(p || a), mean row entropy of each, Spearman(s, weights) of each,
//   and the binned monotonicity curves (mean weight per score bin ± std).
// The header is Torch-free so the view can include it; computeComparison runs on any thread
// (the window calls it on a worker) and reports failures in `error` instead of throwing.
#pragma once
#include <QString>
#include <QStringList>
#include <QVector>

#include <cstdint>
#include <vector>

namespace hh::gui {

struct ComparisonSettings {
  QString featureMap = QStringLiteral("hedgehog");  // a name from featureMapNames()
  int length = 64;                                  // T
  int headDim = 16;                                 // D
  bool causal = true;
  quint64 seed = 0;
  int bins = 24;                                    // monotonicity curve bins

  bool operator==(const ComparisonSettings& o) const {
    return featureMap == o.featureMap && length == o.length && headDim == o.headDim && causal == o.causal &&
           seed == o.seed && bins == o.bins;
  }
};

struct CurveData {
  QVector<double> x, mean, spread;  // bin centres, mean weight, standard deviation
};

struct ComparisonResult {
  ComparisonSettings settings;
  int length = 0;
  int featureDim = 0;
  // T x T, row-major (row = query), NaN where masked.
  std::vector<float> softmax, linear, difference, scores;
  CurveData softmaxCurve, linearCurve;
  double kl = 0, entropySoftmax = 0, entropyLinear = 0, spearmanSoftmax = 0, spearmanLinear = 0;
  double milliseconds = 0;  // computing time
  QString error;            // non-empty: nothing else is valid
};

// Feature map names the engine knows, in its order (e.g. "hedgehog", "t2r", "elu", ...).
QStringList featureMapNames();

ComparisonResult computeComparison(const ComparisonSettings& settings);

}  // namespace hh::gui
