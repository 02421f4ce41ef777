// GenerationSession: the original and the converted model loaded side by side for generation,
// and a run that decodes both interleaved (token i of the original, then token i of the
// converted model, on the caller's thread), so that both stream together and each token's time
// is measured alone. Torch-free header; the workbench calls run() on a worker thread.
//   side 0: the original model (softmax attention with a KV cache)
//   side 1: the converted model (linear layers in the recurrent form; softmax layers of a hybrid
//           plan keep a KV cache)
// A folder with no linear layer may be put on side 1 too: it then runs with a KV cache.
#pragma once
#include <QString>
#include <QStringList>

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "app/gui/common/compute_choice.h"

namespace hh::gui {

struct GenerationSettings {
  QString prompt;
  int maxTokens = 128;
  double temperature = 0.8;  // 0 = greedy
  int topK = 40;             // 0 = no limit
  double topP = 0.95;
  quint64 seed = 0;
  bool stopAtEos = true;
};

struct GenerationSideInfo {
  QString folder;
  QString description;    // the model's one-line description
  QString attention;      // "softmax + KV cache" or "4 of 4 layers recurrent: hedgehog in all 4 layers"
  QString rule;           // update rule of the linear layers ("" when none)
  QString device;         // "cpu", "cuda:0 (NAME), bfloat16"
  int layers = 0, heads = 0;
  bool recurrent = false; // any linear layer
};

struct GenerationToken {
  int side = 0;
  int index = 0;          // 0 = first generated token
  int position = 0;       // its position in the sequence
  QString piece;          // the text this token adds (may be empty mid-character)
  double milliseconds = 0;
  qint64 cacheBytes = 0;  // KV caches + recurrent states
  std::vector<float> stateNorms;  // L * H, layer-major; NaN for softmax layers
  std::vector<float> decay;       // L * H (gated, decay rules), NaN elsewhere
};

struct GenerationSummary {
  int promptTokens = 0, tokens = 0;
  double prefillMs = 0, tokensPerSecond = 0;
  qint64 peakCacheBytes = 0, stateBytes = 0;
  QString stopReason;
};

class GenerationSession {
 public:
  GenerationSession();
  ~GenerationSession();

  // Loads `folder` for `side` (0 or 1). Returns "" or the reason it failed; the side is then empty.
  // `choice`: the device and precision the side loads and decodes in. The side's earlier model is
  // let go first (two large models need not fit at once); the lock is not held while loading,
  // so loaded() and info() answer at once from another thread.
  QString load(int side, const QString& folder, GenerationSideInfo* info = nullptr, const ComputeChoice& choice = {});
  void unload(int side);  // the side generates nothing until a model is loaded again
  bool loaded(int side) const;
  GenerationSideInfo info(int side) const;

  // Generates on every loaded side, interleaved; onToken is called on this thread for each
  // token. The run keeps the models it started with, even if a side is loaded anew meanwhile. Stops when every side is
  // done or `cancel` is set (checked before each token). Returns "" or an error (bad settings, an empty prompt);
  // summaries get one entry per side (tokens = 0 for a side that is not loaded).
  QString run(const GenerationSettings& settings, const std::function<void(const GenerationToken&)>& onToken,
              const std::atomic<bool>& cancel, std::vector<GenerationSummary>* summaries);

 private:
  struct Side;
  std::shared_ptr<Side> sides_[2];  // guarded by mutex_; a run holds its own references
  mutable std::mutex mutex_;
};

}  // namespace hh::gui
