// Softmax vs linear attention of several feature maps on one head, through the engine (see
// comparison_session.h and head_comparison.h).
#include "app/gui/comparison/comparison_session.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/types.h>

#include <QElapsedTimer>

#include <exception>
#include <stdexcept>

#include "app/gui/comparison/head_comparison.h"
#include "app/gui/common/session_tensors.h"
#include "engine/config/attention_types.h"
#include "engine/attention/linear_attention.h"
#include "engine/attention/softmax_attention.h"
#include "engine/attention/stable_exp.h"
#include "engine/metrics/attention_metrics.h"

namespace hh::gui {
namespace {

CurveData toCurve(const hh::metrics::MonotonicityCurve& c) {
  return CurveData{toQVector(c.binCenters), toQVector(c.mean), toQVector(c.stddev)};
}

// The kTopPercentile-th percentile of the finite valid entries of several [1, 1, T, T] matrices
// taken together (0 when there are none); computed here, on the worker, for the view's scales.
constexpr double kTopPercentile = 0.99;
double topPercentile(const std::vector<torch::Tensor>& matrices, const torch::Tensor& valid) {
  std::vector<torch::Tensor> entries;
  for (const auto& m : matrices) {
    const torch::Tensor v = m.to(torch::kFloat).masked_select(valid);  // [valid pairs]
    entries.push_back(v.masked_select(torch::isfinite(v)));
  }
  const torch::Tensor all = torch::cat(entries);  // [all finite entries]
  if (all.numel() == 0) return 0.0;
  const int64_t k = int64_t(kTopPercentile * double(all.numel() - 1)) + 1;  // 1-based
  return std::get<0>(all.kthvalue(k)).item<double>();
}

// phi(q), phi(k) of one head [1, 1, T, F] for a map name, the map at its initialisation.
// exp_t's features are the shifted ones its layers compute (stable_exp.h): same weights, no overflow.
std::pair<torch::Tensor, torch::Tensor> features(const QString& name, const torch::Tensor& q, const torch::Tensor& k,
                                                 bool causal, quint64 seed, int& featureDim) {
  const int64_t t = q.size(2), d = q.size(3);
  auto shiftedExp = [&](double expT) {
    featureDim = int(d);
    const auto f = hh::attn::shiftedExpFeatures(q, k, expT, causal);
    return std::pair{f.fq, f.fk};
  };
  hh::attn::FeatureMapConfig fc;
  fc.kind = hh::attn::parseFeatureMapKind(name.toStdString());
  fc.heads = 1;
  fc.headDim = d;
  fc.seed = seed;
  fc.cosformerMaxLength = std::max<int64_t>(fc.cosformerMaxLength, t + 1);
  if (fc.kind == hh::attn::FeatureMapKind::ExpT) return shiftedExp(fc.expT);
  hh::attn::FeatureMap map(fc);
  featureDim = int(map->featureDim());
  return {map->forward(q), map->forward(k)};
}

// One head's linear weights [1, 1, T, T] under the map `name`: the additive rule's quadratic
// form from the map at its initialisation, or, for "trained", the model layer's own.
torch::Tensor mapWeights(const QString& name, const torch::Tensor& q, const torch::Tensor& k, bool causal, quint64 seed,
                         const TrainedWeights* trained, int& featureDim) {
  if (name == QLatin1String("trained")) {
    if (trained == nullptr || !trained->weights.defined())
      throw std::invalid_argument("\"trained\" needs a converted model's head");
    featureDim = trained->featureDim;
    return trained->weights.to(torch::kFloat);
  }
  const auto [fq, fk] = features(name, q, k, causal, seed, featureDim);  // [1, 1, T, F]
  hh::attn::RuleOptions ro;
  ro.causal = causal;
  return hh::attn::linearWeights(fq, fk, {}, ro).to(torch::kFloat);
}

}  // namespace

QStringList featureMapNames() {
  QStringList names;
  for (const auto kind : hh::attn::untrainedComparisonKinds()) names << QString::fromStdString(hh::attn::toString(kind));
  return names;
}

void compareHead(const torch::Tensor& qIn, const torch::Tensor& kIn, bool causal, const ComparisonSettings& settings,
                 const TrainedWeights* trained, ComparisonResult& result) {
  at::NoGradGuard noGrad;
  TORCH_CHECK(qIn.dim() == 4 && qIn.size(0) == 1 && qIn.size(1) == 1, "compareHead: q must be [1, 1, T, D]");
  const torch::Tensor q = qIn.to(torch::kFloat), k = kIn.to(torch::kFloat);  // [1, 1, T, D]
  const int64_t t = q.size(2);
  const torch::Tensor valid = hh::attn::validPairs(t, t, causal);  // [1, 1, T, T] bool
  const torch::Tensor p = hh::attn::softmaxWeights(q, k, causal);  // [1, 1, T, T]
  const torch::Tensor s = hh::attn::attentionScores(q, k);         // [1, 1, T, T]
  const hh::metrics::RankedScores ranked(s, valid);                // for every map's Spearman
  result.length = int(t);
  result.headDim = int(q.size(3));
  result.causal = causal;
  result.softmax = toMaskedMatrix(p, valid);
  result.scores = toMaskedMatrix(s, valid);
  result.entropySoftmax = toScalar(hh::metrics::headEntropy(p, valid));
  result.spearmanSoftmax = toScalar(hh::metrics::headSpearman(ranked, p));
  result.softmaxCurve = toCurve(hh::metrics::monotonicityCurve(s, p, valid, settings.bins));
  result.maps.clear();
  std::vector<torch::Tensor> weights{p};  // softmax's and each map's, for one colour scale
  for (const QString& name : settings.featureMaps) {
    MapComparison m;
    m.name = name;
    const torch::Tensor a = mapWeights(name, q, k, causal, settings.seed, trained, m.featureDim);  // [1, 1, T, T]
    m.weights = toMaskedMatrix(a, valid);
    m.difference = toMaskedMatrix(a - p.to(torch::kFloat), valid);
    m.differenceTop = topPercentile({(a - p.to(torch::kFloat)).abs()}, valid);
    weights.push_back(a);
    m.kl = toScalar(hh::metrics::headKl(p, a, valid));
    m.entropy = toScalar(hh::metrics::headEntropy(a, valid));
    m.spearman = toScalar(hh::metrics::headSpearman(ranked, a));
    m.curve = toCurve(hh::metrics::monotonicityCurve(s, a, valid, settings.bins));
    result.maps.push_back(std::move(m));
  }
  result.weightsTop = topPercentile(weights, valid);
}

ComparisonResult computeComparison(const ComparisonSettings& settings) {
  ComparisonResult result;
  result.settings = settings;
  QElapsedTimer timer;
  timer.start();
  try {
    const int64_t t = settings.length, d = settings.headDim;
    if (t < 1 || d < 1) throw std::invalid_argument("length and head dim must be positive");
    // q, k: [1, 1, T, D] from a private generator (no global seed shared with other threads).
    auto generator = at::detail::createCPUGenerator(settings.seed);
    const torch::Tensor q = torch::randn({1, 1, t, d}, generator, torch::kFloat);
    const torch::Tensor k = torch::randn({1, 1, t, d}, generator, torch::kFloat);
    ComparisonSettings random = settings;
    random.featureMaps.removeAll(QStringLiteral("trained"));  // a random head has no trained map
    compareHead(q, k, settings.causal, random, nullptr, result);
    result.source = QStringLiteral("random head, T = %1, D = %2, seed %3").arg(t).arg(d).arg(settings.seed);
  } catch (const std::exception& e) {
    result = ComparisonResult{};
    result.settings = settings;
    result.error = QString::fromLocal8Bit(e.what()).section(QLatin1Char('\n'), 0, 2);
  }
  result.milliseconds = double(timer.nsecsElapsed()) / 1e6;
  return result;
}

}  // namespace hh::gui
