#include "engine/jobs/attention_probe.h"

#include <cmath>
#include <limits>

#include "engine/attention/softmax_attention.h"
#include "engine/metrics/attention_metrics.h"
#include "engine/runs/run_layout.h"

namespace hh::jobs {

const std::vector<std::string>& probeTableNames() {
  static const std::vector<std::string> names{"kl", "entropy_softmax", "entropy_linear", "monotonicity"};
  return names;
}

const std::vector<std::string>& probeCurveLabels() {
  static const std::vector<std::string> labels{"softmax", "linear"};
  return labels;
}

namespace {
runs::CurveRow toRow(metrics::MonotonicityCurve curve) {
  return {std::move(curve.binCenters), std::move(curve.mean), std::move(curve.stddev), std::move(curve.count)};
}

runs::CurveRow emptyCurve(int bins) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  return {std::vector<double>(bins, nan), std::vector<double>(bins, nan), std::vector<double>(bins, nan),
          std::vector<int64_t>(bins, 0)};
}

std::vector<float> toFloats(const torch::Tensor& t) {
  const auto c = t.to(torch::kFloat).contiguous().cpu();
  return std::vector<float>(c.data_ptr<float>(), c.data_ptr<float>() + c.numel());
}
}  // namespace

ProbeResult probeAttention(models::TransformerModel& model, const torch::Tensor& ids, const torch::Tensor& mask,
                           const ProbeRequest& request) {
  torch::NoGradGuard noGrad;
  const auto& config = model.config();
  const int L = static_cast<int>(config.layers), H = static_cast<int>(config.heads);
  models::CaptureRequest capture;
  capture.queriesKeys = request.tables || (request.curveBins > 0 && !request.snapshotPairs.empty());
  models::ForwardOptions options;
  options.capture = &capture;
  options.attentionMask = mask;
  options.teacher = true;  // measure each layer on the teacher's activations, as distillation does
  options.computeLogits = false;

  const double nan = std::numeric_limits<double>::quiet_NaN();
  ProbeResult result;
  for (const auto& name : probeTableNames())
    result.tables.push_back({name, L, H, std::vector<double>(static_cast<size_t>(L * H), nan)});
  double klSum = 0;
  int klCount = 0;
  const int64_t T = ids.size(1);
  // Each layer is reduced to its numbers as soon as it has run (one layer's maps alive at a time).
  capture.consume = [&](const models::LayerCapture& c) {
    const int l = static_cast<int>(c.layer);
    const auto valid = attn::validPairs(T, T, config.causal, mask.defined() ? mask.to(torch::kBool) : torch::Tensor(),
                                        ids.device());  // [B|1,1,T,T]
    if (request.tables) {
      auto put = [&](int table, const torch::Tensor& perHead) {  // perHead [H] float64
        const auto v = perHead.cpu();
        for (int h = 0; h < H; ++h) result.tables[table].values[static_cast<size_t>(l * H + h)] = v[h].item<double>();
      };
      put(1, metrics::headEntropy(c.softmaxWeights, valid));
      if (c.linearWeights.defined()) {
        const auto kl = metrics::headKl(c.softmaxWeights, c.linearWeights, valid);
        put(0, kl);
        put(2, metrics::headEntropy(c.linearWeights, valid));
        put(3, metrics::headSpearman(attn::attentionScores(c.queries, c.keys), c.linearWeights, valid));
        for (int h = 0; h < H; ++h) {
          const double v = kl[h].item<double>();
          if (std::isfinite(v)) klSum += v, ++klCount;
          else klSum = nan, ++klCount;
        }
      }
    }
    for (const auto& [pl, ph] : request.snapshotPairs) {
      if (pl != l || ph < 0 || ph >= H) continue;
      AttentionSnapshot snap;
      snap.layer = pl;
      snap.head = ph;
      snap.size = static_cast<int>(std::min<int64_t>(T, request.snapshotSize));
      snap.softmax = runs::poolMaps(toFloats(c.softmaxWeights[0][ph]), 1, static_cast<int>(T), snap.size);
      if (c.linearWeights.defined())
        snap.linear = runs::poolMaps(toFloats(c.linearWeights[0][ph]), 1, static_cast<int>(T), snap.size);
      result.snapshots.push_back(std::move(snap));
      if (request.curveBins > 0) {
        const auto scores = attn::attentionScores(c.queries.narrow(0, 0, 1).narrow(1, ph, 1),
                                                  c.keys.narrow(0, 0, 1).narrow(1, ph, 1))[0][0];  // [T, T]
        const auto pairValid = valid[0][0];                                                         // [T, T]
        result.curves.push_back(toRow(metrics::monotonicityCurve(scores, c.softmaxWeights[0][ph], pairValid, request.curveBins)));
        result.curves.push_back(c.linearWeights.defined()
                                    ? toRow(metrics::monotonicityCurve(scores, c.linearWeights[0][ph], pairValid, request.curveBins))
                                    : emptyCurve(request.curveBins));
      }
    }
  };
  model.forward(ids, options);
  result.meanKl = klCount > 0 ? klSum / klCount : nan;
  return result;
}

}  // namespace hh::jobs
