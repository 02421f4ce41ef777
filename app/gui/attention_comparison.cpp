// Softmax vs linear attention on one random head, through the engine (see attention_comparison.h).
#include "app/gui/attention_comparison.h"

#include <ATen/CPUGeneratorImpl.h>

#include <QElapsedTimer>

#include <exception>

#include "app/gui/tensor_bridge.h"
#include "engine/attention/attention_types.h"
#include "engine/attention/feature_map.h"
#include "engine/attention/linear_attention.h"
#include "engine/attention/softmax_attention.h"
#include "engine/metrics/attention_metrics.h"

namespace hh::gui {
namespace {

CurveData toCurve(const hh::metrics::MonotonicityCurve& c) {
  return CurveData{toQVector(c.binCenters), toQVector(c.mean), toQVector(c.stddev)};
}

}  // namespace

QStringList featureMapNames() {
  QStringList names;
  for (const auto kind : hh::attn::allFeatureMapKinds()) names << QString::fromStdString(hh::attn::toString(kind));
  return names;
}

ComparisonResult computeComparison(const ComparisonSettings& settings) {
  ComparisonResult result;
  result.settings = settings;
  QElapsedTimer timer;
  timer.start();
  try {
    torch::NoGradGuard noGrad;
    const int64_t t = settings.length, d = settings.headDim;
    if (t < 1 || d < 1) throw std::invalid_argument("length and head dim must be positive");

    // q, k: [1, 1, T, D] from a private generator (no global seed shared with other threads).
    auto generator = at::detail::createCPUGenerator(settings.seed);
    const torch::Tensor q = torch::randn({1, 1, t, d}, generator, torch::kFloat);
    const torch::Tensor k = torch::randn({1, 1, t, d}, generator, torch::kFloat);

    hh::attn::FeatureMapConfig fc;
    fc.kind = hh::attn::parseFeatureMapKind(settings.featureMap.toStdString());
    fc.heads = 1;
    fc.headDim = d;
    fc.seed = settings.seed;
    fc.cosformerMaxLength = std::max<int64_t>(fc.cosformerMaxLength, t + 1);
    hh::attn::FeatureMap featureMap(fc);
    hh::attn::RuleOptions ro;
    ro.causal = settings.causal;

    const torch::Tensor valid = hh::attn::validPairs(t, t, settings.causal);     // [1, 1, T, T] bool
    const torch::Tensor p = hh::attn::softmaxWeights(q, k, settings.causal);     // [1, 1, T, T]
    const torch::Tensor fq = featureMap->forward(q), fk = featureMap->forward(k);  // [1, 1, T, F]
    const torch::Tensor a = hh::attn::linearWeights(fq, fk, {}, ro);             // [1, 1, T, T]
    const torch::Tensor s = hh::attn::attentionScores(q, k);                     // [1, 1, T, T]

    result.length = int(t);
    result.featureDim = int(featureMap->featureDim());
    result.softmax = toMaskedMatrix(p, valid);
    result.linear = toMaskedMatrix(a, valid);
    result.difference = toMaskedMatrix(a.to(torch::kFloat) - p.to(torch::kFloat), valid);
    result.scores = toMaskedMatrix(s, valid);

    result.kl = toScalar(hh::metrics::headKl(p, a, valid));
    result.entropySoftmax = toScalar(hh::metrics::headEntropy(p, valid));
    result.entropyLinear = toScalar(hh::metrics::headEntropy(a, valid));
    result.spearmanSoftmax = toScalar(hh::metrics::headSpearman(s, p, valid));
    result.spearmanLinear = toScalar(hh::metrics::headSpearman(s, a, valid));
    result.softmaxCurve = toCurve(hh::metrics::monotonicityCurve(s, p, valid, settings.bins));
    result.linearCurve = toCurve(hh::metrics::monotonicityCurve(s, a, valid, settings.bins));
  } catch (const std::exception& e) {
    result = ComparisonResult{};
    result.settings = settings;
    result.error = QString::fromLocal8Bit(e.what()).section(QLatin1Char('\n'), 0, 2);
  }
  result.milliseconds = double(timer.nsecsElapsed()) / 1e6;
  return result;
}

}  // namespace hh::gui
