// Generation with any causal model: prefill the prompt in one forward pass (the chunked form
// for linear layers, producing their recurrent state; softmax layers fill a KV cache), then one
// token at a time (the recurrent form; softmax layers attend to the cache), streaming each token
// to a callback with its timing, the memory the cache holds and the state norms.
#pragma once
#include <ATen/core/Tensor.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/generation/sampling.h"
#include "engine/models/transformer_model.h"

namespace hh::tok {
class Tokenizer;
}

namespace hh::gen {

class DecodeGraph;

struct GenerateOptions {
  SamplingOptions sampling;
  int64_t maxNewTokens = 64;
  std::vector<int64_t> stopTokens;  // generation ends after emitting one of these
  bool teacher = false;             // run converted layers as softmax (the original model)
  bool reserveCache = true;         // size KV caches for prompt + maxNewTokens up front
  // Replay one recorded decode step per token after the prompt (decode_graph.h): a GPU and every
  // layer Hedgehog (additive, no window); otherwise the first step fails with the reason.
  bool cudaGraph = false;
};

// One generated token, as the callback sees it.
struct TokenEvent {
  int64_t token = -1;
  int64_t index = 0;           // 0 for the first generated token
  int64_t position = 0;        // its position in the sequence (prompt length + index)
  double seconds = 0;          // the forward pass that produced it (the prefill for index 0)
  double logProbability = 0;   // log p(token) under the model's (unfiltered) distribution
  int64_t cacheBytes = 0;      // KV caches (filled positions) + recurrent states after this step
  int64_t reservedBytes = 0;   // what the caches hold allocated (KV buffers are reserved ahead)
  at::Tensor stateNorms;    // [L, H] ||S||_F per linear layer/head, NaN rows for softmax layers
  at::Tensor decay;         // [L, H] last decay factor (gated, decay rules), NaN elsewhere
};

struct GenerateResult {
  std::vector<int64_t> tokens;  // generated ids (prompt not included)
  int64_t promptTokens = 0;
  double prefillSeconds = 0;    // the prompt's forward pass (first token included)
  double decodeSeconds = 0;     // every later token
  int64_t peakCacheBytes = 0;   // cacheBytes at its largest
  int64_t reservedBytes = 0;    // allocated for the caches at the end
  int64_t stateBytes = 0;       // recurrent states (constant over the run)
  std::string stopReason;       // "stop token", "max tokens", "context full", "cancelled"

  // Tokens per second after the first (decode only); 0 when fewer than two tokens.
  double decodeTokensPerSecond() const;
};

// Generation one token at a time, for callers that interleave several models (the workbench
// runs the original and the converted model side by side on one thread). The first next()
// prefills the prompt. generate() below is this loop with a callback.
class Decoder {
 public:
  // Validates like generate(); the model must outlive the decoder.
  Decoder(models::TransformerModel& model, const std::vector<int64_t>& prompt, const GenerateOptions& options);
  ~Decoder();
  bool done() const { return !result_.stopReason.empty(); }
  TokenEvent next();  // throws std::logic_error when done()
  void cancel();      // ends the run with stop reason "cancelled"
  const GenerateResult& result() const { return result_; }
  const models::DecodeCache& cache() const { return cache_; }

 private:
  models::TransformerModel& model_;
  GenerateOptions options_;
  Sampler sampler_;
  models::DecodeCache cache_;
  std::unique_ptr<DecodeGraph> graph_;  // options.cudaGraph: recorded after the prompt
  at::Tensor input_;  // [1, T]: the prompt, then the last token
  GenerateResult result_;
  int64_t index_ = 0;
  bool learnedPositions_ = false;
};

// Throws std::invalid_argument unless the model is a causal LM (an encoder or a classifier).
void requireDecoder(const models::ModelConfig& config);

// Return false from the callback to stop (cancel). Throws std::invalid_argument on bad options
// (not a causal LM, empty prompt, ids outside the vocabulary, a prompt as long as GPT-2's learned
// positions). Rotary (Llama) positions go past the trained length; GPT-2 stops at "context full".
using TokenCallback = std::function<bool(const TokenEvent&)>;
GenerateResult generate(models::TransformerModel& model, const std::vector<int64_t>& prompt,
                        const GenerateOptions& options, const TokenCallback& onToken = {});

// The tokens that end a text for this model: every id of the config's eos_token_id and the tokenizer's, and,
// when the tokenizer starts every text with its bos (Llama's <s>), that bos too: a model trained
// on documents framed that way (llama2.c's TinyStories models) ends a text by starting the next.
// Once each; none when there is none. Generation stops at them unless told otherwise.
std::vector<int64_t> endOfTextTokens(const models::ModelConfig& config, const tok::Tokenizer& tokenizer);

}  // namespace hh::gen
