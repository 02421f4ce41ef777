#include "engine/jobs/attention_probe.h"

#include <torch/types.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "engine/attention/softmax_attention.h"
#include "engine/jobs/job_support.h"
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

// q.k / sqrt(D) in at least fp32 (bf16 captures would round the scores the metrics rank):
// q, k [B, H, T, D] -> [B, H, T, T].
torch::Tensor fp32Scores(const torch::Tensor& q, const torch::Tensor& k) {
  const auto type = q.scalar_type() == torch::kDouble ? torch::kDouble : torch::kFloat;
  return attn::attentionScores(q.to(type), k.to(type));
}

runs::CurveRow toRow(metrics::MonotonicityCurve curve) {
  return {std::move(curve.binCenters), std::move(curve.mean), std::move(curve.stddev), std::move(curve.count)};
}

runs::CurveRow emptyCurve(int bins) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  return {std::vector<double>(bins, nan), std::vector<double>(bins, nan), std::vector<double>(bins, nan),
          std::vector<int64_t>(bins, 0)};
}

// Per head: sum ||lin - soft||^2 / sum ||soft||^2 over the rows mask keeps. soft, lin [B,H,T,D];
// mask [B,T] or undefined. -> [H] float64
torch::Tensor relativeOutputError(const torch::Tensor& soft, const torch::Tensor& lin, const torch::Tensor& mask) {
  auto diff = (lin.to(torch::kDouble) - soft.to(torch::kDouble)).pow(2).sum(-1);  // [B,H,T]
  auto norm = soft.to(torch::kDouble).pow(2).sum(-1);
  if (mask.defined()) {
    const auto keep = mask.to(torch::kDouble).unsqueeze(1);  // [B,1,T]
    diff = diff * keep;
    norm = norm * keep;
  }
  return diff.sum(at::IntArrayRef{0, 2}) / norm.sum(at::IntArrayRef{0, 2}).clamp_min(1e-300);
}

// perHead [h] float64 into table's row `layer`, columns firstHead ...
void putHeads(HeadTable& table, int layer, int firstHead, const torch::Tensor& perHead) {
  const auto v = perHead.cpu();
  for (int h = 0; h < int(v.size(0)); ++h)
    table.values[static_cast<size_t>(layer * table.heads + firstHead + h)] = v[h].item<double>();
}

// The layer's tables: softmax entropy, then the model's own linear weights (a converted layer) and
// every candidate's for this layer, each against one ranking of the layer's scores.
// valid [B|1, 1, T, T]; keyMask [B, T] bool or undefined.
void measureTables(ProbeResult& result, const ProbeRequest& request, const models::LayerCapture& c,
                   const torch::Tensor& valid, const torch::Tensor& keyMask) {
  const int l = static_cast<int>(c.layer);
  result.heads.measureLayer(l, c.softmaxWeights, torch::Tensor(), torch::Tensor(), valid);
  const auto goesHere = [&](const auto& modules) { return !modules[static_cast<size_t>(l)].is_empty(); };
  const bool anyCandidate = std::any_of(request.candidates.begin(), request.candidates.end(), goesHere);
  if (!c.linearWeights.defined() && !anyCandidate) return;
  const metrics::RankedScores ranked(fp32Scores(c.queries, c.keys), valid);
  if (c.linearWeights.defined()) result.heads.measureLinear(l, c.softmaxWeights, c.linearWeights, ranked, valid);
  for (size_t m = 0; m < request.candidates.size(); ++m) {
    auto module = request.candidates[m][static_cast<size_t>(l)];  // a handle: weights() is not const
    if (module.is_empty()) continue;
    const auto a = module->weights(c.queries, c.keys, c.hidden, keyMask);  // [B, H, T, T]
    result.candidateHeads[m].measureLinear(l, c.softmaxWeights, a, ranked, valid);
  }
}

// The result before any layer has run: every table NaN, one set of measures per candidate.
ProbeResult emptyProbeResult(int L, int H, const ProbeRequest& request) {
  ProbeResult result;
  result.heads = HeadMeasures(L, H);
  const auto empty = [&](const char* name) { return HeadTable{name, L, H, std::vector<double>(size_t(L * H), kNaN)}; };
  result.previousToken = empty("previous_token");
  result.firstToken = empty("first_token");
  result.induction = empty("induction");
  result.outputError = empty("output_error");
  result.candidateHeads.assign(request.candidates.size(), HeadMeasures(L, H));
  return result;
}

// The layer's previous-token, first-token and induction scores per head.
void measurePatterns(ProbeResult& result, const models::LayerCapture& c, const torch::Tensor& ids) {
  const auto patterns = metrics::headPatterns(c.softmaxWeights, ids);
  const int l = static_cast<int>(c.layer);
  putHeads(result.previousToken, l, 0, patterns.previousToken);
  putHeads(result.firstToken, l, 0, patterns.firstToken);
  putHeads(result.induction, l, 0, patterns.induction);
}

// The snapshots (and monotonicity curves) asked for in this layer. valid [B|1, 1, T, T].
void takeSnapshots(ProbeResult& result, const ProbeRequest& request, const models::LayerCapture& c,
                   const torch::Tensor& valid) {
  const int64_t T = c.softmaxWeights.size(-1);
  const int heads = static_cast<int>(c.softmaxWeights.size(1));
  for (const auto& [pl, ph] : request.snapshotPairs) {
    if (pl != c.layer || ph < 0 || ph >= heads) continue;
    AttentionSnapshot snap;
    snap.layer = pl;
    snap.head = ph;
    snap.size = static_cast<int>(std::min<int64_t>(T, request.snapshotSize));
    snap.softmax = runs::poolMaps(toFloats(c.softmaxWeights[0][ph]), 1, static_cast<int>(T), snap.size);
    if (c.linearWeights.defined())
      snap.linear = runs::poolMaps(toFloats(c.linearWeights[0][ph]), 1, static_cast<int>(T), snap.size);
    result.snapshots.push_back(std::move(snap));
    if (request.curveBins <= 0) continue;
    const auto scores = fp32Scores(c.queries.narrow(0, 0, 1).narrow(1, ph, 1),
                                   c.keys.narrow(0, 0, 1).narrow(1, ph, 1))[0][0];  // [T, T]
    const auto pairValid = valid[0][0];                                             // [T, T]
    const auto curve = [&](const torch::Tensor& weights) {
      return toRow(metrics::monotonicityCurve(scores, weights[0][ph], pairValid, request.curveBins));
    };
    result.curves.push_back(curve(c.softmaxWeights));
    result.curves.push_back(c.linearWeights.defined() ? curve(c.linearWeights) : emptyCurve(request.curveBins));
  }
}
}  // namespace

HeadMeasures::HeadMeasures(int layers, int heads) {
  const auto& names = probeTableNames();
  auto all = tables();
  for (size_t i = 0; i < all.size(); ++i)
    *all[i] = {names[i], layers, heads, std::vector<double>(static_cast<size_t>(layers * heads), kNaN)};
}

std::vector<const HeadTable*> HeadMeasures::tables() const { return {&kl, &entropySoftmax, &entropyLinear, &monotonicity}; }
std::vector<HeadTable*> HeadMeasures::tables() { return {&kl, &entropySoftmax, &entropyLinear, &monotonicity}; }

void HeadMeasures::measureLayer(int layer, const torch::Tensor& p, const torch::Tensor& a, const torch::Tensor& scores,
                                const torch::Tensor& valid) {
  measureHeads(layer, 0, p, a, scores, valid);
}

void HeadMeasures::measureHeads(int layer, int firstHead, const torch::Tensor& p, const torch::Tensor& a,
                                const torch::Tensor& scores, const torch::Tensor& valid) {
  TORCH_CHECK(firstHead >= 0 && firstHead + p.size(1) <= entropySoftmax.heads, "measureHeads: heads ", firstHead, " + ",
              p.size(1), " of ", entropySoftmax.heads);
  putHeads(entropySoftmax, layer, firstHead, metrics::headEntropy(p, valid));
  if (!a.defined()) return;
  measureLinearHeads(layer, firstHead, p, a, valid,
                     scores.defined() ? metrics::headSpearman(scores, a, valid) : torch::Tensor());
}

void HeadMeasures::measureLinear(int layer, const torch::Tensor& p, const torch::Tensor& a,
                                 const metrics::RankedScores& scores, const torch::Tensor& valid) {
  TORCH_CHECK(p.size(1) == entropySoftmax.heads, "measureLinear: ", p.size(1), " heads, the tables ",
              entropySoftmax.heads);
  measureLinearHeads(layer, 0, p, a, valid, metrics::headSpearman(scores, a));
}

void HeadMeasures::measureLinearHeads(int layer, int firstHead, const torch::Tensor& p, const torch::Tensor& a,
                                      const torch::Tensor& valid, const torch::Tensor& monotonicityPerHead) {
  const auto klPerHead = metrics::headKl(p, a, valid).cpu();
  putHeads(kl, layer, firstHead, klPerHead);
  putHeads(entropyLinear, layer, firstHead, metrics::headEntropy(a, valid));
  if (monotonicityPerHead.defined()) putHeads(monotonicity, layer, firstHead, monotonicityPerHead);
  for (int h = 0; h < int(klPerHead.size(0)); ++h) {
    const double v = klPerHead[h].item<double>();
    klSum_ = std::isfinite(v) ? klSum_ + v : kNaN;
    ++klCount_;
  }
}

double HeadMeasures::meanKl() const { return klCount_ > 0 ? klSum_ / double(klCount_) : kNaN; }

ProbeResult probeAttention(models::TransformerModel& model, const torch::Tensor& ids, const torch::Tensor& mask,
                           const ProbeRequest& request) {
  at::NoGradGuard noGrad;
  const auto& config = model.config();
  const int L = static_cast<int>(config.layers), H = static_cast<int>(config.heads);
  for (const auto& modules : request.candidates)
    TORCH_CHECK(static_cast<int>(modules.size()) == L, "probeAttention: a candidate has ", modules.size(),
                " layers, the model ", L);
  models::CaptureRequest capture;
  capture.queriesKeys = request.tables || (request.curveBins > 0 && !request.snapshotPairs.empty());
  capture.outputs = request.outputs;
  models::ForwardOptions options;
  options.capture = &capture;
  options.attentionMask = mask;
  options.teacher = true;  // measure each layer on the teacher's activations, as distillation does
  options.computeLogits = false;

  ProbeResult result = emptyProbeResult(L, H, request);
  const auto keyMask = mask.defined() ? mask.to(torch::kBool) : torch::Tensor();
  const int64_t T = ids.size(1);
  // Each layer is reduced to its numbers as soon as it has run (one layer's maps alive at a time).
  capture.consume = [&](const models::LayerCapture& c) {
    auto valid = attn::validPairs(T, T, config.causal, keyMask, ids.device());  // [B|1,1,T,T]
    // A padding position's query row is no row of the text: left out like a row with no key.
    if (keyMask.defined()) valid = valid & keyMask.to(ids.device()).view({keyMask.size(0), 1, T, 1});
    if (request.patterns) measurePatterns(result, c, ids);
    if (request.outputs && c.linearOutput.defined())
      putHeads(result.outputError, static_cast<int>(c.layer), 0,
               relativeOutputError(c.softmaxOutput, c.linearOutput, mask));
    if (request.tables) measureTables(result, request, c, valid, keyMask);
    takeSnapshots(result, request, c, valid);
  };
  model.forward(ids, options);
  return result;
}

void appendSnapshots(runs::RunWriter& writer, int64_t step, const std::vector<AttentionSnapshot>& snapshots) {
  const auto& layout = writer.layout().snapshots;
  if (snapshots.size() != layout.pairs.size()) return;
  std::vector<float> softmaxMaps, linearMaps;  // [P, S, S] each
  const size_t cell = static_cast<size_t>(layout.storedSize()) * layout.storedSize();
  for (const auto& s : snapshots) {
    softmaxMaps.insert(softmaxMaps.end(), s.softmax.begin(), s.softmax.end());
    if (s.linear.empty()) linearMaps.insert(linearMaps.end(), cell, std::numeric_limits<float>::quiet_NaN());
    else linearMaps.insert(linearMaps.end(), s.linear.begin(), s.linear.end());
  }
  writer.appendSnapshot(step, softmaxMaps, linearMaps);
}

}  // namespace hh::jobs
