#include "engine/generation/generator.h"

#include <torch/types.h>

#include "engine/generation/decode_graph.h"
#include "engine/tokenizers/tokenizer.h"

#include <algorithm>
#include <chrono>
#include <stdexcept>

namespace hh::gen {
namespace {

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace

double GenerateResult::decodeTokensPerSecond() const {
  return tokens.size() > 1 && decodeSeconds > 0 ? double(tokens.size() - 1) / decodeSeconds : 0.0;
}

std::vector<int64_t> endOfTextTokens(const models::ModelConfig& config, const tok::Tokenizer& tokenizer) {
  std::vector<int64_t> ids;
  const bool framedByBos = tokenizer.bosId() >= 0 && !tokenizer.prefixIds().empty() &&
                           tokenizer.prefixIds().front() == tokenizer.bosId();
  std::vector<int64_t> candidates = config.eosTokenIds;
  if (candidates.empty()) candidates.push_back(config.eosTokenId);  // a config made in code sets only the one
  candidates.push_back(tokenizer.eosId());
  candidates.push_back(framedByBos ? tokenizer.bosId() : int64_t(-1));
  for (const int64_t id : candidates)
    if (id >= 0 && std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
  return ids;
}

void requireDecoder(const models::ModelConfig& config) {
  if (config.head != models::HeadKind::CausalLM || !config.causal)
    throw std::invalid_argument(config.describe() +
                                " is not a causal LM: generation needs a decoder with an LM head "
                                "(GPT-2, Llama), not an encoder or a classifier");
}

Decoder::Decoder(models::TransformerModel& model, const std::vector<int64_t>& prompt, const GenerateOptions& options)
    : model_(model), options_(options), sampler_(options.sampling) {
  const auto& config = model.config();
  requireDecoder(config);
  if (prompt.empty()) throw std::invalid_argument("the prompt is empty: generation needs at least one token");
  if (options.maxNewTokens < 1) throw std::invalid_argument("max new tokens must be >= 1");
  for (const auto id : prompt)
    if (id < 0 || id >= config.vocabSize)
      throw std::invalid_argument("prompt token " + std::to_string(id) + " is outside the vocabulary [0, " +
                                  std::to_string(config.vocabSize) + ")");
  learnedPositions_ = config.modelType == "gpt2";
  const int64_t promptLength = static_cast<int64_t>(prompt.size());
  if (learnedPositions_ && promptLength >= config.maxPositions)
    throw std::invalid_argument("the prompt has " + std::to_string(promptLength) + " tokens; the model has " +
                                std::to_string(config.maxPositions) + " positions");
  model.eval();
  const auto device = model.parameters().front().device();
  // Reserved up front up to the model's positions at most (and the prompt); past them, as rotary
  // positions may go, the KV cache grows by doubling.
  const int64_t capacity =
      std::min(promptLength + options.maxNewTokens, std::max(config.maxPositions, promptLength + 1));
  cache_ = model.newCache(1, options.reserveCache ? capacity : 0, options.teacher);
  result_.promptTokens = promptLength;
  input_ = torch::tensor(prompt, torch::kLong).unsqueeze(0).to(device);  // [1, T]
}

Decoder::~Decoder() = default;

void Decoder::cancel() {
  if (!done()) result_.stopReason = "cancelled";
}

TokenEvent Decoder::next() {
  if (done()) throw std::logic_error("the decoder has stopped (" + result_.stopReason + ")");
  at::NoGradGuard noGrad;
  const auto& config = model_.config();
  models::ForwardOptions forward;
  forward.cache = &cache_;
  forward.teacher = options_.teacher;
  const auto start = Clock::now();
  if (options_.cudaGraph && index_ > 0 && !graph_) graph_ = std::make_unique<DecodeGraph>(model_, cache_);
  const auto logits = graph_ ? graph_->step(input_) : model_.forward(input_, forward).logits;  // [1, T, V]
  const auto last = logits[0][logits.size(1) - 1];             // [V]
  TokenEvent event;
  event.token = sampler_.next(last);
  event.seconds = secondsSince(start);
  event.index = index_;
  event.position = result_.promptTokens + index_;
  event.logProbability = torch::log_softmax(last.to(torch::kDouble), 0)[event.token].item<double>();
  event.cacheBytes = cache_.usedBytes();
  event.reservedBytes = cache_.bytes();
  event.stateNorms = cache_.stateNorms(config.heads);
  event.decay = cache_.lastDecay(config.heads);
  (index_ == 0 ? result_.prefillSeconds : result_.decodeSeconds) += event.seconds;
  result_.tokens.push_back(event.token);
  result_.peakCacheBytes = std::max(result_.peakCacheBytes, event.cacheBytes);
  result_.stateBytes = cache_.stateBytes();
  result_.reservedBytes = event.reservedBytes;
  ++index_;
  const auto& stops = options_.stopTokens;
  if (std::find(stops.begin(), stops.end(), event.token) != stops.end()) result_.stopReason = "stop token";
  else if (learnedPositions_ && cache_.position >= config.maxPositions) result_.stopReason = "context full";
  else if (index_ >= options_.maxNewTokens) result_.stopReason = "max tokens";
  input_ = torch::full({1, 1}, event.token, input_.options());
  return event;
}

GenerateResult generate(models::TransformerModel& model, const std::vector<int64_t>& prompt,
                        const GenerateOptions& options, const TokenCallback& onToken) {
  Decoder decoder(model, prompt, options);
  while (!decoder.done()) {
    const auto event = decoder.next();
    if (onToken && !onToken(event)) decoder.cancel();
  }
  return decoder.result();
}

}  // namespace hh::gen
