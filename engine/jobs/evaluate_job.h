// Evaluation of a conversion: how well does the converted model do against the original, and how
// close is each feature map's attention to softmax on held-out text?
//   1. Task quality on held-out sequences of the data config's validation split:
//      task "lm": perplexity = exp(mean over every next-token prediction of -log p(x_{t+1} | x_<=t)),
//        original (all softmax) and converted (linear layers propagate their own output);
//      task "classification": accuracy of argmax(logits) against the labels (padding masked).
//   2. The per-head attention table of each feature map against softmax (the Hedgehog paper's
//      Table 4 for this model): every listed feature map is put into the converted layers at its
//      initialisation (hedgehog / t2r at identity, performer seeded) and measured on the
//      teacher's activations; "trained" measures the converted model's own feature maps (against
//      its own softmax: full finetuning changes q and k). Per map:
//      [L, H] tables of KL(softmax || linear), entropy of the linear weights and monotonicity
//      (Spearman's rho against q.k/sqrt(d)); scalars = their mean over the converted layers' heads
//      (layers that stay softmax are NaN in the tables and left out of the means). The untrained
//      maps are measured in one pass over the table's batches: per layer one teacher forward,
//      one softmax and one ranking of its scores serve every map (ProbeRequest::candidates).
// The converted model is `converted` (a converted folder, or an adapters .safetensors file applied
// to the teacher) or, when that is empty, the teacher with `feature_map` at its initialisation.
// Everything goes to <run_dir>/run.h5 (kind "evaluate"; scalars at step 0; tables kl_<map>,
// entropy_<map>, monotonicity_<map> and entropy_softmax, all declared up front) and is returned.
// Cancel is polled before every forward pass, so it takes effect within a batch.
#pragma once
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "engine/config/evaluate_config.h"
#include "engine/jobs/head_tables.h"
#include "engine/jobs/job_observer.h"

namespace hh::jobs {


// One row of the table: a feature map's attention against softmax.
struct FeatureMapEvaluation {
  std::string name;           // a feature map kind ("hedgehog", ...) or "trained"
  double kl = 0, entropy = 0, monotonicity = 0;  // means over the converted layers' heads
  HeadTable klTable, entropyTable, monotonicityTable;  // [L, H] each
};

struct EvaluateResult {
  JobStatus status = JobStatus::Completed;
  std::string message;
  std::string task;
  int64_t sequences = 0;      // held-out sequences evaluated
  int64_t predictions = 0;    // lm: next-token predictions per model; classification: examples
  double nllOriginal = std::numeric_limits<double>::quiet_NaN();         // lm, nats per token
  double nllConverted = std::numeric_limits<double>::quiet_NaN();
  double perplexityOriginal = std::numeric_limits<double>::quiet_NaN();  // lm
  double perplexityConverted = std::numeric_limits<double>::quiet_NaN();
  double accuracyOriginal = std::numeric_limits<double>::quiet_NaN();    // classification
  double accuracyConverted = std::numeric_limits<double>::quiet_NaN();
  double softmaxEntropy = std::numeric_limits<double>::quiet_NaN();      // reference: mean softmax entropy
  HeadTable softmaxEntropyTable;
  std::vector<FeatureMapEvaluation> featureMaps;  // in the config's order
  std::string runFile;
  std::string device;       // where it computed: "cpu", "cuda:0 (NAME)", with ", bfloat16" in bf16 (engine/core/device.h)
  double seconds = 0;
};

// Runs the job on the calling thread. Throws only for bad configuration (before the run file
// exists); failures while evaluating are reported in the result (and the run file).
EvaluateResult runEvaluate(const EvaluateConfig& config, JobObserver& observer);


}  // namespace hh::jobs
