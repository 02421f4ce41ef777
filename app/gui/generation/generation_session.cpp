#include "app/gui/generation/generation_session.h"

#include <torch/types.h>

#include "engine/core/error_text.h"
#include "engine/generation/generator.h"
#include "engine/generation/text_stream.h"
#include "engine/jobs/job_support.h"
#include "engine/models/model_io.h"
#include "engine/tokenizers/tokenizer.h"

namespace hh::gui {

struct GenerationSession::Side {
  models::ModelPtr model;
  std::unique_ptr<tok::Tokenizer> tokenizer;
  GenerationSideInfo info;
};

GenerationSession::GenerationSession() = default;
GenerationSession::~GenerationSession() = default;

namespace {
// What the header of a side says of its attention: "softmax + KV cache", or
// "5 of 5 layers recurrent: hedgehog_window(64) in all 5 layers" (a window keeps a ring buffer).
void describeAttention(const models::ModelConfig& c, GenerationSideInfo& info) {
  info.recurrent = c.plan.anyLinear();
  if (!info.recurrent) {
    info.attention = QStringLiteral("softmax + KV cache");
    return;
  }
  for (const auto& spec : c.plan.layers)
    if (spec.linear) {
      info.rule = QString::fromStdString(attn::toString(spec.config.rule.rule));
      break;
    }
  info.attention = QStringLiteral("%1 of %2 layers recurrent: %3")
                       .arg(c.plan.linearLayerCount())
                       .arg(c.layers)
                       .arg(QString::fromStdString(c.plan.summary()));
}
}  // namespace

QString GenerationSession::load(int side, const QString& folder, GenerationSideInfo* info,
                                const ComputeChoice& choice) {
  if (side < 0 || side > 1) return QStringLiteral("side must be 0 or 1");
  {
    std::lock_guard<std::mutex> lock(mutex_);
    sides_[side].reset();
  }
  try {
    auto s = std::make_shared<Side>();
    s->model = models::loadModel(folder.toStdString(),
                                 jobs::loadOptions(choice.device.toStdString(), choice.dtype.toStdString()));
    s->tokenizer = jobs::loadTokenizerFor(*s->model, folder.toStdString());
    const auto& c = s->model->config();
    if (!c.causal) return folder + QStringLiteral(": ") + QString::fromStdString(c.modelType) +
                          QStringLiteral(" is bidirectional; generation needs a decoder (GPT-2, Llama)");
    s->info.folder = folder;
    s->info.description = QString::fromStdString(c.describe());
    s->info.device = QString::fromStdString(jobs::deviceLabelOf(*s->model));
    s->info.layers = int(c.layers);
    s->info.heads = int(c.heads);
    describeAttention(c, s->info);
    if (info) *info = s->info;
    std::lock_guard<std::mutex> lock(mutex_);
    sides_[side] = std::move(s);
    return {};
  } catch (const std::exception& e) {
    return QString::fromStdString(hh::errorText(e));
  }
}

void GenerationSession::unload(int side) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (side >= 0 && side <= 1) sides_[side].reset();
}

bool GenerationSession::loaded(int side) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return side >= 0 && side <= 1 && sides_[side] != nullptr;
}

GenerationSideInfo GenerationSession::info(int side) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return side >= 0 && side <= 1 && sides_[side] ? sides_[side]->info : GenerationSideInfo{};
}

namespace {
std::vector<float> toVector(const torch::Tensor& t) {
  if (!t.defined()) return {};
  const auto flat = t.to(torch::kCPU, torch::kFloat).contiguous().view(-1);
  return {flat.data_ptr<float>(), flat.data_ptr<float>() + flat.numel()};
}

gen::GenerateOptions generateOptions(const GenerationSettings& settings) {
  gen::GenerateOptions options;
  options.maxNewTokens = settings.maxTokens;
  options.sampling.temperature = settings.temperature;
  options.sampling.topK = settings.topK;
  options.sampling.topP = settings.topP;
  options.sampling.seed = settings.seed;
  options.sampling.validate();
  return options;
}

// One side's decoding in progress (no decoder: the side has no model).
struct RunningSide {
  std::unique_ptr<gen::Decoder> decoder;
  std::unique_ptr<gen::TextStream> text;
};

GenerationToken tokenOf(int side, const gen::TokenEvent& event, gen::TextStream& text) {
  GenerationToken token;
  token.side = side;
  token.index = int(event.index);
  token.position = int(event.position);
  token.piece = QString::fromStdString(text.push(event.token));
  token.milliseconds = event.seconds * 1e3;
  token.cacheBytes = event.cacheBytes;
  token.stateNorms = toVector(event.stateNorms);
  token.decay = toVector(event.decay);
  return token;
}

GenerationSummary summaryOf(const gen::GenerateResult& res) {
  GenerationSummary sum;
  sum.promptTokens = int(res.promptTokens);
  sum.tokens = int(res.tokens.size());
  sum.prefillMs = res.prefillSeconds * 1e3;
  sum.tokensPerSecond = res.decodeTokensPerSecond();
  sum.peakCacheBytes = res.peakCacheBytes;
  sum.stateBytes = res.stateBytes;
  sum.stopReason = QString::fromStdString(res.stopReason.empty() ? "cancelled" : res.stopReason);
  return sum;
}

// Starts a side: its prompt prefilled, its stop tokens set, and its text stream following the prompt.
void startSide(models::TransformerModel& model, const tok::Tokenizer& tokenizer, const GenerationSettings& settings,
               gen::GenerateOptions options, RunningSide& side) {
  if (settings.stopAtEos)
    for (const int64_t id : gen::endOfTextTokens(model.config(), tokenizer)) options.stopTokens.push_back(id);
  const auto prompt = tokenizer.encode(settings.prompt.toStdString(), /*addSpecialTokens=*/true);
  side.decoder = std::make_unique<gen::Decoder>(model, prompt, options);
  side.text = std::make_unique<gen::TextStream>(tokenizer, prompt);
}

}  // namespace

QString GenerationSession::run(const GenerationSettings& settings,
                               const std::function<void(const GenerationToken&)>& onToken,
                               const std::atomic<bool>& cancel, std::vector<GenerationSummary>* summaries) {
  std::shared_ptr<Side> sides[2];
  {
    std::lock_guard<std::mutex> lock(mutex_);
    sides[0] = sides_[0];
    sides[1] = sides_[1];
  }
  if (summaries) summaries->assign(2, {});
  if (!sides[0] && !sides[1]) return QStringLiteral("load a model first");
  if (settings.prompt.trimmed().isEmpty()) return QStringLiteral("the prompt is empty");
  try {
    const auto options = generateOptions(settings);
    std::vector<RunningSide> running(2);
    for (int s = 0; s < 2; ++s) {
      if (!sides[s]) continue;
      startSide(*sides[s]->model, *sides[s]->tokenizer, settings, options, running[size_t(s)]);
    }
    // The two sides take turns, a token each, so both stream at once.
    for (bool any = true; any && !cancel.load();) {
      any = false;
      for (int s = 0; s < 2 && !cancel.load(); ++s) {
        auto& r = running[size_t(s)];
        if (!r.decoder || r.decoder->done()) continue;
        any = true;
        const auto token = tokenOf(s, r.decoder->next(), *r.text);
        if (onToken) onToken(token);
      }
    }
    for (int s = 0; s < 2; ++s) {
      auto& r = running[size_t(s)];
      if (!r.decoder) continue;
      if (cancel.load()) r.decoder->cancel();
      if (summaries) (*summaries)[size_t(s)] = summaryOf(r.decoder->result());
    }
    return {};
  } catch (const std::exception& e) {
    return QString::fromStdString(hh::errorText(e));
  }
}

}  // namespace hh::gui
