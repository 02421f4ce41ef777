// Measurements of a model's attention on a batch, shared by the jobs, `hedgehog inspect` and the
// workbench's inspector: per-layer x per-head tables (HeadMeasures: KL(softmax || linear),
// entropy of both, monotonicity of the linear weights as Spearman's rho against q.k/sqrt(d)) and
// pooled snapshots for chosen (layer, head) pairs. Softmax layers have NaN in the linear columns
// (nothing to compare). The metrics themselves are engine/metrics/attention_metrics.h.
#pragma once
#include <ATen/core/Tensor.h>

#include <vector>

#include "engine/jobs/head_tables.h"
#include "engine/jobs/job_observer.h"
#include "engine/models/transformer_model.h"
#include "engine/runs/run_writer.h"

namespace hh::jobs {

struct ProbeResult {
  HeadMeasures heads;                      // with ProbeRequest::tables
  // With ProbeRequest::patterns, the softmax heads' patterns (metrics::headPatterns), [L, H]
  // each: previous_token, first_token, induction.
  HeadTable previousToken, firstToken, induction;
  // With ProbeRequest::outputs, per head of a converted layer the relative error of its attention
  // output, sum ||y_linear - y_softmax||^2 / sum ||y_softmax||^2 over the real query rows
  // ("output_error", NaN for softmax layers).
  HeadTable outputError;
  // With ProbeRequest::candidates, per candidate in its order: kl, entropyLinear and monotonicity
  // of its linear attention against the model's softmax (entropySoftmax NaN: it is in `heads`).
  std::vector<HeadMeasures> candidateHeads;
  std::vector<AttentionSnapshot> snapshots;
  // With curveBins > 0: per snapshot pair (in the order of `snapshots`) the monotonicity curve of
  // the softmax weights, then of the linear weights (all-NaN on a softmax layer), over the first
  // sequence's causal pairs.
  std::vector<runs::CurveRow> curves;
};

struct ProbeRequest {
  std::vector<std::pair<int, int>> snapshotPairs;  // (layer, head)
  int snapshotSize = 64;                           // S; maps are pooled to min(T, S)
  bool tables = true;
  int curveBins = 0;                               // 0 = no monotonicity curves
  bool patterns = false;                           // previous-token, first-token, induction scores
  bool outputs = false;                            // outputError
  // With tables: linear attentions to measure beside the model's own, each a module per layer
  // (an empty holder where it does not go), on the same q and k (the model runs as the teacher):
  // one forward, one softmax and one ranking of the scores per layer serve them all.
  std::vector<std::vector<attn::LinearAttention>> candidates;
};

// ids [B, T], mask [B, T] or undefined. Runs without gradients; restores nothing (no state).
ProbeResult probeAttention(models::TransformerModel& model, const at::Tensor& ids, const at::Tensor& mask,
                           const ProbeRequest& request);

// The curve labels probeAttention's curves come in, per snapshot pair.
const std::vector<std::string>& probeCurveLabels();

// The table names in the order probeAttention returns them.
const std::vector<std::string>& probeTableNames();

// Appends `snapshots` (the layout's pairs, in its order; a softmax layer's linear map empty) as
// one snapshot row of the run file; nothing when some pair is missing.
void appendSnapshots(runs::RunWriter& writer, int64_t step, const std::vector<AttentionSnapshot>& snapshots);

}  // namespace hh::jobs
