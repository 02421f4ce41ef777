// Recall probes on a (converted) model at growing context: can it find something it was shown
// earlier in the text, and which heads look at it when it answers?
//   passkey   a needle of `needle` random tokens is hidden at a random depth in real text; the
//             text ends with the needle's first `cue` tokens, and the model must continue with the
//             rest (teacher-forced: the argmax at each answer position).
//   mqar      multi-query associative recall: `pairs` random (key, value) token pairs are
//             scattered through the text; at the end the keys come again in another order, each
//             followed by its value, and the model must predict every value from its key.
// Random tokens cannot be guessed from the text: only copying from the context finds them.
// Every trial is scored for the teacher (the same model run with softmax everywhere) and for the
// converted model, and per layer x head the attention mass that the answer positions put on the
// needle (mqar: on the key's value token), for the teacher's softmax and the converted layers'
// own attention: the heads that carry the answer.
// Shapes: filler rows [N, T_max] int64 from the model's tokenizer.
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "engine/jobs/head_tables.h"
#include "engine/models/transformer_model.h"

namespace hh::jobs {

struct RecallProbeOptions {
  std::string task = "passkey";       // passkey | mqar
  std::vector<int64_t> lengths{64, 128, 256};
  int64_t trials = 16;                // prompts per length (one batch)
  int64_t needle = 6, cue = 2;        // passkey: needle tokens, of which the first `cue` are repeated
  int64_t pairs = 4;                  // mqar: key-value pairs
  int64_t firstRandomToken = 3;       // random tokens come from [firstRandomToken, vocab) (skips specials)
  uint64_t seed = 0;
};

struct RecallProbePoint {
  int64_t length = 0;
  double teacherAccuracy = 0, convertedAccuracy = 0;  // fraction of answer tokens predicted
  HeadTable teacherMass, convertedMass;               // [L, H] attention on the needle (a softmax layer of the
                                                      // converted model: its softmax weights)
};

// One prompt set: ids [trials, T], the answer positions (the logits at p predict ids[p + 1]) and
// the needle positions each answer should look at. Exposed for tests.
struct RecallPrompts {
  at::Tensor ids;                                     // [B, T] int64
  std::vector<std::vector<int64_t>> answerPositions;  // per row
  std::vector<std::vector<int64_t>> needlePositions;  // per row, per answer position: the key position it should read
};
RecallPrompts makeRecallPrompts(const at::Tensor& filler, int64_t length, int64_t vocab, const RecallProbeOptions& options,
                                uint64_t seed);

// Scores one prompt set (length = its T): accuracies and the needle mass of every head, for the
// teacher and the converted model. `checkpoint`, when set, is called before each layer's weights
// are read, in both passes: it may throw to stop the scoring (the workbench's Cancel).
RecallProbePoint scoreRecallPrompts(models::TransformerModel& model, const RecallPrompts& prompts,
                                    const std::function<void()>& checkpoint = {});

// Runs the probe at every length (each <= filler's T); throws std::invalid_argument for bad
// options (unknown task, a length the filler or the model's positions cannot hold, too short for
// the needle). `cancelled` is polled between lengths.
std::vector<RecallProbePoint> runRecallProbe(models::TransformerModel& model, const at::Tensor& filler,
                                             const RecallProbeOptions& options);

}  // namespace hh::jobs
