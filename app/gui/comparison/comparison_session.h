// The feature-map comparison as plain data for the widgets: softmax attention of one head
// against the linear attention of several feature maps.
//   The head: either random, q, k ~ N(0, 1) of shape [1, 1, T, D] from a generator seeded with
//   `seed`, or one (layer, head) of a loaded model on the inspector's text (model_session.h).
//   softmax weights p = softmaxWeights(q, k, causal); per map: linear weights
//   a = linearWeights(phi(q), phi(k)) (additive rule, quadratic form); scores s = q.k / sqrt(D);
//   metrics over valid pairs: KL(p || a), mean row entropy, Spearman(s, weights), and the binned
//   monotonicity curves (mean weight per score bin +- std).
// "trained" names the loaded model layer's own weights: its distilled feature map under its own
// rule, window and gates (LinearAttention::weights); the others are the additive rule's weights
// from a map at its initialisation (identity W for Hedgehog and T2R).
// The header is Torch-free so the views can include it; the computations run on any thread (the
// window calls them on a worker) and report failures in `error` instead of throwing.
#pragma once
#include <QString>
#include <QStringList>
#include <QVector>

#include <cstdint>
#include <vector>

namespace hh::gui {

struct ComparisonSettings {
  QStringList featureMaps{QStringLiteral("hedgehog"), QStringLiteral("t2r"), QStringLiteral("elu")};
  bool modelHead = false;  // false: a random head (length, headDim, seed); true: (layer, head) of the model
  int layer = 0, head = 0;
  int length = 64;         // T (random head)
  int headDim = 16;        // D (random head)
  bool causal = true;      // random head (a model head follows the model)
  quint64 seed = 0;        // random q, k and Performer's projection
  int bins = 24;           // monotonicity curve bins

  bool operator==(const ComparisonSettings& o) const {
    return featureMaps == o.featureMaps && modelHead == o.modelHead && layer == o.layer && head == o.head &&
           length == o.length && headDim == o.headDim && causal == o.causal && seed == o.seed && bins == o.bins;
  }
};

// The 99th percentiles below are computed with the result (on the worker), so the view does not
// sort T x T values on the GUI thread; kTopUnknown (a result made by hand): the view's maps span
// their [min, max] instead.
constexpr double kTopUnknown = -1.0;

struct CurveData {
  QVector<double> x, mean, spread;  // bin centres, mean weight, standard deviation
};

// One feature map against softmax.
struct MapComparison {
  QString name;
  int featureDim = 0;
  std::vector<float> weights, difference;  // T x T row-major, NaN where masked; difference = a - p
  CurveData curve;
  double kl = 0, entropy = 0, spearman = 0;
  double differenceTop = kTopUnknown;  // 99th percentile of |difference| (the difference map's scale)
};

struct ComparisonResult {
  ComparisonSettings settings;
  QString source;          // "random head, T = 64, D = 16, seed 0" or "layer 1, head 2 of <model>"
  QStringList tokens;      // token labels of a model head (empty for a random one)
  int length = 0, headDim = 0;
  bool causal = true;
  // T x T, row-major (row = query), NaN where masked.
  std::vector<float> softmax, scores;
  CurveData softmaxCurve;
  double entropySoftmax = 0, spearmanSoftmax = 0;
  std::vector<MapComparison> maps;  // in settings.featureMaps order
  double weightsTop = kTopUnknown;  // 99th percentile of softmax's and all maps' weights together
  double milliseconds = 0;  // computing time
  QString error;            // non-empty: nothing else is valid
};

// Feature map names the engine knows, in its order (e.g. "hedgehog", "t2r", "elu", ...).
QStringList featureMapNames();

// A random head (settings.modelHead is ignored).
ComparisonResult computeComparison(const ComparisonSettings& settings);

}  // namespace hh::gui
