// Measurements of a model's attention on a batch, shared by the jobs and the workbench:
// per-layer x per-head tables (KL(softmax || linear), entropy of both, monotonicity of the linear
// weights as Spearman's rho against q.k/sqrt(d)) and pooled snapshots for chosen (layer, head)
// pairs. Softmax layers have NaN in the linear columns (nothing to compare).
#pragma once
#include <torch/torch.h>

#include <vector>

#include "engine/jobs/job_observer.h"
#include "engine/models/transformer_model.h"
#include "engine/runs/run_writer.h"

namespace hh::jobs {

struct ProbeResult {
  std::vector<HeadTable> tables;           // kl, entropy_softmax, entropy_linear, monotonicity
  std::vector<AttentionSnapshot> snapshots;
  // With curveBins > 0: per snapshot pair (in the order of `snapshots`) the monotonicity curve of
  // the softmax weights, then of the linear weights (all-NaN on a softmax layer), over the first
  // sequence's causal pairs.
  std::vector<runs::CurveRow> curves;
  double meanKl = 0.0;                     // over converted layers' heads (NaN if none)
};

struct ProbeRequest {
  std::vector<std::pair<int, int>> snapshotPairs;  // (layer, head)
  int snapshotSize = 64;                           // S; maps are pooled to min(T, S)
  bool tables = true;
  int curveBins = 0;                               // 0 = no monotonicity curves
};

// ids [B, T], mask [B, T] or undefined. Runs without gradients; restores nothing (no state).
ProbeResult probeAttention(models::TransformerModel& model, const torch::Tensor& ids, const torch::Tensor& mask,
                           const ProbeRequest& request);

// The curve labels probeAttention's curves come in, per snapshot pair.
const std::vector<std::string>& probeCurveLabels();

// The table names in the order probeAttention returns them.
const std::vector<std::string>& probeTableNames();

}  // namespace hh::jobs
