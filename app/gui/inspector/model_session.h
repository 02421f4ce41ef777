// ModelSession: one checkpoint folder loaded for inspection, and what its attention does on a
// text. Torch-free header (the views include it); every call runs the engine and may take
// seconds, so the workbench calls it on its one-thread worker pool, never on the GUI thread.
// Calls are serialised by an internal mutex; loaded() and summary() are the exceptions: they read
// a snapshot under a lock of their own, so the GUI thread may ask them while the worker loads or
// inspects (they answer for the model in place until a load replaces it).
//
//   load(folder)   pre-flight report + the model (float32, CPU) + its tokenizer
//   inspect(text)  tokenizes (the model's special tokens added), truncates to maxTokens and the
//                  model's positions, runs one forward pass in teacher mode capturing q, k of
//                  every layer ([1, H, T, D], after RoPE and the model's score scale), and per
//                  head: a block-max thumbnail of the softmax weights, the mean row entropy of
//                  softmax and, for converted (linear) layers, KL(softmax || linear) and the
//                  linear weights' entropy. Keeps q, k for the calls below.
//   headMaps(l,h)  the full T x T softmax weights, scores q.k/sqrt(D) and (converted layers) the
//                  linear weights of one head of the last inspected text.
//   recallProbe(text, task, length)  a passkey or multi-query recall prompt set hidden in the
//                  text (engine/jobs/recall_probe.h), scored for the teacher and the converted
//                  model; the first prompt is then inspected like a text, and the result carries
//                  per head the weight the answer positions put on the needle.
//   headComparison(l,h,maps)  the feature-map comparison (comparison_session.h) on that head's
//                  real q, k; "trained" is the layer's own feature map when it is converted.
// inspect and recallProbe take an InspectControl: they report each layer measured and stop
// within one head's work once its cancel flag is set (the result then says `cancelled`).
#pragma once
#include <QString>
#include <QStringList>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "app/gui/common/compute_choice.h"
#include "app/gui/comparison/comparison_session.h"
#include "engine/jobs/head_tables.h"
#include "widgets/matrix_downsample.h"

namespace hh::gui {

struct ModelSummary {
  QString folder;
  QString description;       // "gpt2, 4 layers, 4 heads x 32, C=128, vocab 50257"
  QString device;            // where it computes: "cpu", "cuda:0 (NAME), bfloat16"
  QString modelType;
  int layers = 0, heads = 0, kvHeads = 0, headDim = 0, hiddenSize = 0, maxPositions = 0;
  bool causal = true;
  qint64 parameters = 0;
  // Per layer: "softmax" or the linear attention's feature map ("hedgehog", ...).
  QStringList layerAttention;
  QString preflightText;     // the pre-flight report as aligned lines
  QStringList blockers, warnings;
  bool converted() const;    // any linear layer
};

// What recallProbe adds to an inspection: its prompts' scores and, per head (layer-major, L * H),
// the mean weight from an answer position to the needle token it must copy.
struct RecallSummary {
  QString task;                  // passkey | mqar
  int length = 0, prompts = 0;
  double teacherAccuracy = 0, convertedAccuracy = 0;  // fraction of answer tokens right
  std::vector<double> teacherMass, convertedMass;    // the teacher's softmax; the converted layers' own
  std::vector<int> answerPositions, needlePositions; // of the inspected (first) prompt
};

// One layer as soon as its heads are measured, for a grid that fills while the model runs.
struct LayerPreview {
  int layer = 0, done = 0, layers = 0, heads = 0;  // done: layers measured so far, this one included
  int thumbSize = 0;
  std::vector<std::vector<float>> thumbnails;             // per head, as InspectResult's
  std::vector<double> entropySoftmax, kl, entropyLinear;  // per head; NaN where undefined
  std::vector<double> needleSoftmax, needleConverted;     // per head, a recall probe's; else empty
};

// How an inspection says where it is and learns that it is to stop; both optional. layerDone is
// called on the inspecting thread as each layer's heads are measured; cancel is read before each
// layer and each head.
struct InspectControl {
  std::function<void(const LayerPreview&)> layerDone;
  std::shared_ptr<const std::atomic<bool>> cancel;
  bool cancelled() const { return cancel && cancel->load(); }
};

struct InspectResult {
  QString error;             // non-empty: nothing else is valid
  bool cancelled = false;    // the error is the cancellation's (how many layers were done)
  bool previousKept = false;              // cancelled before anything changed: the last inspection stands
  std::shared_ptr<RecallSummary> recall;  // set by recallProbe only
  QStringList tokens;        // display label per token
  int layers = 0, heads = 0, length = 0;
  bool converted = false;
  bool truncated = false;    // the text had more tokens than were used
  bool cutByModel = false;   // ... because of the model's position limit (not the max-tokens setting)
  int textTokens = 0;        // tokens in the text before truncation
  int thumbSize = 0;         // S: thumbnails are S x S
  // Layer-major, L * H entries.
  std::vector<std::vector<float>> thumbnails;  // S x S block max of softmax weights, NaN masked
  // kl, entropySoftmax, entropyLinear (monotonicity is not measured here); NaN where undefined.
  jobs::HeadMeasures measures;
  double milliseconds = 0;         // in all
  double forwardMilliseconds = 0;  // of which the model's forward pass
};

struct HeadMaps {
  QString error;
  int layer = 0, head = 0, length = 0;
  // T x T row-major, NaN where masked. The weights are shared with the view that draws them
  // (no 67 MB copy on the GUI thread at 4096 tokens); the scores are moved to it.
  widgets::SharedValues softmax;
  widgets::SharedValues linear;  // null for softmax layers
  std::vector<float> scores;
  QString featureMap;         // the layer's linear feature map, empty for softmax layers
  QString note;               // what the linear map is not (a delta rule's is signed, a decay rule's unnormalised)
  // 99th percentiles for the colour scales (a few saturated cells, e.g. the first causal row,
  // would otherwise leave everything else dark): of softmax, of linear, of |linear - softmax|.
  double softmaxTop = 0, linearTop = 0, differenceTop = 0;
  double milliseconds = 0;
};

class ModelSession {
 public:
  ModelSession();
  ~ModelSession();

  // Replaces any loaded model. Returns the summary; on failure summary.folder is empty and
  // `error` says why (the pre-flight blockers, or the loader's message).
  // `choice`: the device and the precision it is loaded in and computes in.
  ModelSummary load(const QString& folder, QString* error, const ComputeChoice& choice = {});
  // Safe on the GUI thread: they never wait for a load or an inspection in progress.
  bool loaded() const;
  ModelSummary summary() const;

  InspectResult inspect(const QString& text, int maxTokens = 4096, int thumbSize = 48,
                        const InspectControl& control = {});
  // `text` is the filler (repeated to `length` tokens); `prompts` prompts are scored.
  InspectResult recallProbe(const QString& text, const QString& task, int length, int prompts = 16, int thumbSize = 48,
                            const InspectControl& control = {});
  HeadMaps headMaps(int layer, int head);
  // Writes the loaded model with the engine's writer: a Hugging Face-style folder (floating
  // weights as dtype "float32" | "float16" | "bfloat16", feature maps kept in float32, tokenizer
  // files copied), or with adaptersOnly the trained feature maps alone as a safetensors file
  // (`output` is then the file path). Returns an empty string or the reason it failed.
  QString exportModel(const QString& output, const QString& dtype, bool adaptersOnly);
  // settings.featureMaps are compared on the head's q, k (settings.length etc. are ignored).
  ComparisonResult headComparison(int layer, int head, const ComparisonSettings& settings);

 private:
  struct State;
  // inspect() after tokenizing: one forward pass over ids, the grid's numbers (mutex held).
  InspectResult inspectTokens(std::vector<int64_t> ids, InspectResult result, int thumbSize,
                              const InspectControl& control);
  std::unique_ptr<State> state_;
  mutable std::mutex mutex_;
  // What loaded() and summary() return, set where load() swaps the model in (mutex_ held, then
  // snapshotMutex_): never held across engine work.
  mutable std::mutex snapshotMutex_;
  bool loaded_ = false;
  ModelSummary summary_;
};

}  // namespace hh::gui
