// Stage 1 of the Hedgehog conversion: freeze the model, put the chosen feature map into the
// layers the plan names, and train only the feature maps (and rule gates) so that each converted
// layer's linear attention weights match its softmax weights (paper eq. 4):
//   loss = sum_layers sum_heads mean_rows  sum_j p_ij * -log(a_ij + 1e-10)        (soft_ce)
//       or                                  sum_j p_ij * (log p_ij - log a_ij)    (kl)
//   (+ output_mse * mean ||y_linear - y_softmax||^2 when set)
// computed on the teacher's activations (converted layers propagate softmax during stage 1).
// AdamW, evaluation on held-out sequences every `evalEvery` steps with early stopping, per-head
// tables, snapshots on a fixed probe text and feature-map weights into the run file
// (engine/runs), adapters saved beside it. NaN/inf stops the job and keeps the last good
// weights; cancel stops within a step; resume continues from the run folder's checkpoint.
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "engine/jobs/job_observer.h"
#include "engine/models/transformer_model.h"

namespace hh::dist {
class Communicator;
}

namespace hh::jobs {

struct DataConfig {
  std::string corpus = "brown";       // "brown" or a path (.txt, .jsonl, folder of .txt)
  int64_t sequenceLength = 128;
  double validationFraction = 0.1;
  int64_t maxTrainSequences = 0;      // 0 = all
  int64_t maxValidationSequences = 64;
  uint64_t seed = 0;
};

nlohmann::json toJson(const DataConfig& config);
DataConfig dataConfigFromJson(const nlohmann::json& json, const std::string& where);

struct DistillConfig {
  std::string modelDir;               // teacher folder (config.json + safetensors + tokenizer)
  std::string runDir;                 // where run.h5, adapters.safetensors, checkpoint go
  std::string featureMap = "hedgehog";
  std::string rule = "additive";
  std::vector<int64_t> layers;        // converted layers; empty = all
  std::string loss = "soft_ce";       // soft_ce | kl
  double outputMse = 0.0;             // weight of the optional output MSE term
  double lr = 1e-2;
  double weightDecay = 0.0;
  int64_t steps = 300;                // maximum optimizer steps
  int64_t batchSize = 8;
  int64_t evalEvery = 25;
  int64_t evalBatches = 4;
  int64_t patience = 4;               // evaluations without improvement before stopping (0 = never)
  int64_t snapshotEvery = 25;
  std::vector<std::pair<int, int>> snapshotPairs;  // empty = head 0 of up to 4 converted layers
  int snapshotSize = 64;
  int curveBins = 32;                 // monotonicity curves of the snapshot pairs (0 = none)
  int64_t probeRows = 0;              // held-out rows of the per-head tables (0 = batch_size); rank 0's
                                      // probe holds probeRows x H x T x T floats per layer at a time
  std::string probeText = "The quick brown fox jumps over the lazy dog because it is tired of running around the field all day.";
  uint64_t seed = 0;
  bool resume = false;
  int64_t debugNanAtStep = -1;        // testing aid: poison the loss at this step
  DataConfig data;
};

nlohmann::json toJson(const DistillConfig& config);
// Every key optional (defaults above); unknown keys and wrong types throw std::invalid_argument.
DistillConfig distillConfigFromJson(const nlohmann::json& json);

struct DistillResult {
  JobStatus status = JobStatus::Completed;
  std::string message;
  int64_t steps = 0;                  // optimizer steps done (including resumed ones)
  int64_t bestStep = 0;
  double initialKl = 0, finalKl = 0;  // mean KL on held-out text before and after
  double bestValidationLoss = 0;
  std::string runFile, adaptersFile;
  double seconds = 0;
};

// Runs the job on the calling thread. Throws only for bad configuration (before anything starts)
// and, with several processes, for a rank that stopped or timed out; failures during training
// are reported in the result (and the run file).
// `world` (engine/distributed/communicator.h): null or a world of one trains alone; otherwise
// this process is one data-parallel rank: config.batchSize is the global batch, each rank takes
// its rows, gradients are summed over ranks, and only rank 0 writes the run file, the checkpoint
// and the adapters (the others return with empty paths).
DistillResult runDistill(const DistillConfig& config, JobObserver& observer, dist::Communicator* world = nullptr);

// The distillation loss of one batch's captures (exposed for tests and benchmarks).
torch::Tensor distillationLoss(const std::vector<models::LayerCapture>& captures, bool causal, const torch::Tensor& mask,
                               const std::string& loss, double outputMse);

// One forward of stage 1, layer by layer: the teacher runs on ids [B, T] and each layer `capture`
// names adds its distillationLoss term as soon as the layer has run, so one layer's [B, H, T, T]
// tensors are alive at a time. Returns the summed loss.
//   Backward   each term is backpropagated at once (a layer's term depends on its own feature
//              map only: the teacher's softmax output goes on), so the gradients equal those of
//              the summed loss; a term that is not finite is not backpropagated (the sum says so)
//   LossOnly   the loss alone (held-out evaluation, under NoGradGuard)
// `options` are the teacher's (computeLogits, stopAfterLayer; capture is set here); `poison`
// multiplies every term by NaN (a testing aid).
enum class LayerPass { Backward, LossOnly };
double distillLayerByLayer(models::TransformerModel& model, const torch::Tensor& ids, models::CaptureRequest& capture,
                           models::ForwardOptions options, const std::string& loss, double outputMse, LayerPass pass,
                           bool poison = false);

}  // namespace hh::jobs
