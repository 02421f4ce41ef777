// A loaded checkpoint and its attention on a text (see model_session.h).
#include "app/gui/inspector/model_session.h"

#include <filesystem>

#include <torch/types.h>

#include <QElapsedTimer>

#include <algorithm>
#include <cmath>
#include <exception>
#include <limits>

#include "app/gui/common/session_tensors.h"
#include "app/gui/comparison/head_comparison.h"
#include "app/gui/inspector/session_layers.h"
#include "engine/attention/softmax_attention.h"
#include "engine/core/error_text.h"
#include "engine/core/process_memory.h"
#include "engine/jobs/convert_job.h"
#include "engine/jobs/job_support.h"
#include "engine/jobs/recall_probe.h"
#include "engine/metrics/attention_metrics.h"
#include "engine/models/model_io.h"
#include "engine/models/preflight.h"
#include "engine/tokenizers/tokenizer.h"

namespace hh::gui {

struct ModelSession::State {
  ModelSummary summary;
  models::ModelPtr model;
  std::unique_ptr<tok::Tokenizer> tokenizer;
  // The last inspected text: q, k per layer [1, H, T, D] (k expanded to H heads), the layer's
  // input [1, T, C] where its linear attention's gates read it (gated, delta and decay rules;
  // undefined for other layers), and its tokens.
  std::vector<torch::Tensor> queries, keys, hidden;
  QStringList tokens;
};

namespace {

QString fromStd(const std::string& s) { return QString::fromStdString(s); }

// A token as a short axis label: line breaks and tabs made visible, a leading space as a middle
// dot (so " the" and "the" differ), at most 16 characters.
QString tokenLabel(const tok::Tokenizer& tokenizer, int64_t id) {
  QString text = fromStd(tokenizer.decode({id}));
  if (text.isEmpty()) text = fromStd(tokenizer.idToToken(id));
  text.replace(QLatin1Char('\n'), QStringLiteral("\u21b5")).replace(QLatin1Char('\t'), QStringLiteral("\u21e5"));
  if (text.startsWith(QLatin1Char(' '))) text[0] = QChar(0x00b7);
  if (text.size() > 16) text = text.left(15) + QChar(0x2026);
  return text;
}

// The 99th percentile of the valid entries of a [.., T, T] matrix (0 when there are none).
double top99(const torch::Tensor& values, const torch::Tensor& valid) {
  const auto v = values.to(torch::kFloat).masked_select(valid.expand_as(values));
  if (v.numel() == 0) return 0.0;
  const int64_t k = std::max<int64_t>(1, int64_t(0.99 * double(v.numel() - 1)) + 1);
  return std::get<0>(v.kthvalue(k)).item<double>();
}

}  // namespace

bool ModelSummary::converted() const {
  return std::any_of(layerAttention.begin(), layerAttention.end(),
                     [](const QString& a) { return a != QLatin1String("softmax"); });
}

ModelSession::ModelSession() : state_(std::make_unique<State>()) {}
ModelSession::~ModelSession() {
  state_.reset();
  hh::releaseFreeMemory();
}

bool ModelSession::loaded() const {
  std::lock_guard lock(snapshotMutex_);
  return loaded_;
}

ModelSummary ModelSession::summary() const {
  std::lock_guard lock(snapshotMutex_);
  return summary_;
}

ModelSummary ModelSession::load(const QString& folder, QString* error, const ComputeChoice& choice) {
  std::lock_guard lock(mutex_);
  ModelSummary summary;
  try {
    const models::PreflightReport report = models::preflight(folder.toStdString());
    summary.preflightText = fromStd(report.text());
    for (const auto& f : report.findings) {
      if (f.severity == models::PreflightFinding::Severity::Blocker) summary.blockers << fromStd(f.message);
      if (f.severity == models::PreflightFinding::Severity::Warning) summary.warnings << fromStd(f.message);
    }
    if (!report.ready()) {
      // One error naming the folder once: the pre-flight's findings usually name it already.
      const QString blockers = summary.blockers.join(QStringLiteral("; "));
      if (error) *error = blockers.startsWith(folder) ? blockers : QStringLiteral("%1: %2").arg(folder, blockers);
      return ModelSummary{};
    }
    auto model = models::loadModel(folder.toStdString(),
                                   jobs::loadOptions(choice.device.toStdString(), choice.dtype.toStdString()));
    auto tokenizer = jobs::loadTokenizerFor(*model, folder.toStdString());
    model->eval();
    const auto& c = model->config();
    summary.folder = folder;
    summary.description = fromStd(c.describe());
    summary.device = fromStd(jobs::deviceLabelOf(*model));
    summary.modelType = fromStd(c.modelType);
    summary.layers = int(c.layers);
    summary.heads = int(c.heads);
    summary.kvHeads = int(c.kvHeads);
    summary.headDim = int(c.headDim);
    summary.hiddenSize = int(c.hiddenSize);
    summary.maxPositions = int(c.maxPositions);
    summary.causal = c.causal;
    summary.parameters = model->parameterCount();
    for (int64_t l = 0; l < c.layers; ++l) {
      const auto linear = model->linearAttention(l);
      summary.layerAttention << (linear ? fromStd(attn::describe(linear->config()))
                                        : QStringLiteral("softmax"));
    }
    *state_ = State{};
    state_->summary = summary;
    state_->model = std::move(model);
    state_->tokenizer = std::move(tokenizer);
    {
      std::lock_guard snapshot(snapshotMutex_);
      loaded_ = true;
      summary_ = summary;
    }
    hh::releaseFreeMemory();  // what loading held beside the weights (and a model this one replaced)
  } catch (const std::exception& e) {
    const QString what =
        QString::fromStdString(hh::errorText(e)).section(QLatin1Char('\n'), 0, 0);  // engine errors are one line
    if (error) *error = what.contains(folder) ? what : QStringLiteral("%1: %2").arg(folder, what);
    return ModelSummary{};
  }
  return summary;
}

namespace {

// Thrown where an inspection finds its cancel flag set; says how far it got.
struct InspectionCancelled : std::runtime_error {
  using std::runtime_error::runtime_error;
};

void stopIfCancelled(const InspectControl& control, const std::string& where) {
  if (control.cancelled()) throw InspectionCancelled("cancelled " + where);
}

std::string layersDone(int done, int layers) {
  return "after " + std::to_string(done) + " of " + std::to_string(layers) + " layers";
}

// The result of a request cancelled before it changed anything: the session keeps the last
// inspection, and so may the view.
InspectResult cancelledUntouched(const std::string& where) {
  InspectResult result;
  result.cancelled = true;
  result.previousKept = true;
  result.error = QString::fromStdString("cancelled " + where);
  return result;
}

}  // namespace

InspectResult ModelSession::inspect(const QString& text, int maxTokens, int thumbSize, const InspectControl& control) {
  std::lock_guard lock(mutex_);
  InspectResult result;
  std::vector<int64_t> ids;
  try {
    State& st = *state_;
    if (!st.model) throw std::runtime_error("no model loaded (File > Open model folder)");
    const auto& config = st.model->config();
    ids = st.tokenizer->encode(text.toStdString(), /*addSpecialTokens=*/true);
    result.textTokens = int(ids.size());
    int64_t limit = std::max(1, maxTokens);
    if (config.maxPositions > 0) limit = std::min(limit, config.maxPositions);
    if (int64_t(ids.size()) > limit) {
      st.tokenizer->truncateFramed(ids, size_t(limit));  // keeps BERT's [SEP]
      result.truncated = true;
      result.cutByModel = config.maxPositions > 0 && limit >= config.maxPositions;
    }
  } catch (const std::exception& e) {
    result.error = QString::fromStdString(hh::errorText(e)).section('\n', 0, 1);
    return result;
  }
  return inspectTokens(std::move(ids), std::move(result), thumbSize, control);
}

InspectResult ModelSession::recallProbe(const QString& text, const QString& task, int length, int prompts,
                                        int thumbSize, const InspectControl& control) {
  std::lock_guard lock(mutex_);
  try {
    State& st = *state_;
    if (!st.model) throw std::runtime_error("no model loaded (File > Open model folder)");
    const auto textIds = st.tokenizer->encode(text.toStdString(), /*addSpecialTokens=*/false);
    if (textIds.empty()) throw std::runtime_error("the text has no tokens to hide the needle in");
    std::vector<int64_t> filler;  // the text repeated to `length` tokens
    while (int64_t(filler.size()) < length) filler.push_back(textIds[filler.size() % textIds.size()]);
    jobs::RecallProbeOptions options;
    options.task = task.toStdString();
    options.trials = std::max(1, prompts);
    at::NoGradGuard noGrad;
    const auto recall = jobs::makeRecallPrompts(torch::tensor(filler, torch::kLong).unsqueeze(0), length,
                                                st.model->config().vocabSize, options, options.seed);
    const auto point = jobs::scoreRecallPrompts(
        *st.model, recall, [&control] { stopIfCancelled(control, "while the probe's prompts were scored"); });
    auto summary = std::make_shared<RecallSummary>();
    summary->task = task;
    summary->length = length;
    summary->prompts = options.trials;
    summary->teacherAccuracy = point.teacherAccuracy;
    summary->convertedAccuracy = point.convertedAccuracy;
    summary->teacherMass = point.teacherMass.values;
    summary->convertedMass = point.convertedMass.values;
    summary->answerPositions.assign(recall.answerPositions[0].begin(), recall.answerPositions[0].end());
    summary->needlePositions.assign(recall.needlePositions[0].begin(), recall.needlePositions[0].end());
    const auto first = recall.ids[0].contiguous();
    InspectResult result;
    result.recall = summary;
    result.textTokens = length;
    return inspectTokens(std::vector<int64_t>(first.data_ptr<int64_t>(), first.data_ptr<int64_t>() + length),
                         std::move(result), thumbSize, control);
  } catch (const InspectionCancelled& e) {
    return cancelledUntouched(e.what());  // scoring does not touch the last inspection
  } catch (const std::exception& e) {
    InspectResult result;
    result.error = QString::fromStdString(hh::errorText(e)).section('\n', 0, 1);
    return result;
  }
}

namespace {

// What a layer's map is not, where its rule makes it other than a distribution over the keys:
// the delta rule's effective matrix is signed (so KL, which takes logarithms, is NaN), the decay
// rule's has no normaliser and leaves out its value-side gate (it scales each output channel, so
// no one T x T matrix holds it). Empty for the other rules.
QString ruleNote(const attn::LinearAttentionConfig& config) {
  switch (attn::formRule(config.rule.rule)) {
    case attn::UpdateRule::Delta:
      return QStringLiteral("signed weights (delta rule): no KL");
    case attn::UpdateRule::Decay:
      return QStringLiteral("not normalised, without the value-side gate: KL is no divergence here");
    default:
      return {};
  }
}

}  // namespace

InspectResult ModelSession::inspectTokens(std::vector<int64_t> ids, InspectResult result, int thumbSize,
                                          const InspectControl& control) {
  QElapsedTimer timer;
  timer.start();
  State& st = *state_;
  // The previous text's q, k go before this forward pass, not after it (75 MB at T = 1024 on a
  // 124M model); a failure or a cancellation below leaves "nothing inspected".
  const auto forget = [&st] {
    st.queries.clear();
    st.keys.clear();
    st.hidden.clear();
    st.tokens.clear();
  };
  if (control.cancelled()) return cancelledUntouched("before it started");  // nothing forgotten
  forget();
  try {
    if (!st.model) throw std::runtime_error("no model loaded (File > Open model folder)");
    at::NoGradGuard noGrad;
    const auto& config = st.model->config();
    if (ids.empty()) throw std::runtime_error("the text has no tokens");
    const int64_t t = int64_t(ids.size());
    const int L = int(config.layers), H = int(config.heads);
    st.queries.assign(size_t(L), {});
    st.keys.assign(size_t(L), {});
    st.hidden.assign(size_t(L), {});
    for (int64_t id : ids) st.tokens << tokenLabel(*st.tokenizer, id);
    result.tokens = st.tokens;
    result.layers = L;
    result.heads = H;
    result.length = int(t);
    result.thumbSize = int(std::min<int64_t>(thumbSize, t));
    result.measures = jobs::HeadMeasures(L, H);
    result.thumbnails.assign(size_t(L * H), {});
    const auto valid = attn::validPairs(t, t, config.causal);  // [1, 1, T, T]
    const auto empty = inspect::emptyBlocks(valid, result.thumbSize);
    int done = 0;
    const std::function<void()> checkCancel = [&] { stopIfCancelled(control, layersDone(done, L)); };
    checkCancel();
    double measuring = 0;  // ms of the pass spent on the heads, not the forward
    inspect::captureQueriesKeys(*st.model, ids, [&](models::LayerCapture& c) {  // each layer as it has run
      checkCancel();
      QElapsedTimer clock;
      clock.start();
      st.queries[size_t(c.layer)] = c.queries;
      st.keys[size_t(c.layer)] = c.keys;
      st.hidden[size_t(c.layer)] = inspect::gateInput(st.model->linearAttention(int(c.layer)), c);
      inspect::measureLayer(*st.model, c, valid, empty, result, checkCancel);
      measuring += double(clock.nsecsElapsed()) / 1e6;
      ++done;
      if (control.layerDone) control.layerDone(inspect::preview(result, int(c.layer), done));
    });
    result.forwardMilliseconds = double(timer.nsecsElapsed()) / 1e6 - measuring;
  } catch (const std::exception& e) {
    forget();
    const bool cancelled = dynamic_cast<const InspectionCancelled*>(&e) != nullptr;
    result = InspectResult{};
    result.cancelled = cancelled;
    result.error = QString::fromStdString(hh::errorText(e)).section('\n', 0, 1);
  }
  hh::releaseFreeMemory();  // the forward pass's activations, back to the system
  result.milliseconds = double(timer.nsecsElapsed()) / 1e6;
  return result;
}

HeadMaps ModelSession::headMaps(int layer, int head) {
  std::lock_guard lock(mutex_);
  HeadMaps maps;
  maps.layer = layer;
  maps.head = head;
  QElapsedTimer timer;
  timer.start();
  State& st = *state_;
  try {
    if (!st.model || st.queries.empty()) throw std::runtime_error("nothing inspected yet");
    if (layer < 0 || layer >= int(st.queries.size()) || head < 0 || head >= st.summary.heads)
      throw std::out_of_range("no such layer or head");
    at::NoGradGuard noGrad;
    const auto& q = st.queries[size_t(layer)];
    const auto& k = st.keys[size_t(layer)];
    const int64_t t = q.size(2);
    const bool causal = st.model->config().causal;
    const auto valid = attn::validPairs(t, t, causal);  // [1, 1, T, T]
    const auto qh = q.narrow(1, head, 1), kh = k.narrow(1, head, 1);  // [1, 1, T, D]
    maps.length = int(t);
    const auto p = attn::softmaxWeights(qh, kh, causal);  // [1, 1, T, T]
    maps.softmax = std::make_shared<const std::vector<float>>(toMaskedMatrix(p, valid));
    maps.softmaxTop = top99(p, valid);
    maps.scores = toMaskedMatrix(attn::attentionScores(qh, kh), valid);
    if (auto linear = st.model->linearAttention(layer)) {
      maps.featureMap = fromStd(attn::describe(linear->config()));
      const auto a = linear->headWeights(q, k, head, st.hidden[size_t(layer)]);  // [1, 1, T, T]
      maps.linear = std::make_shared<const std::vector<float>>(toMaskedMatrix(a, valid));
      maps.linearTop = top99(a, valid);
      maps.differenceTop = top99((a.to(torch::kFloat) - p.to(torch::kFloat)).abs(), valid);
      maps.note = ruleNote(linear->config());
    }
  } catch (const std::exception& e) {
    maps = HeadMaps{};
    maps.error = QString::fromStdString(hh::errorText(e)).section('\n', 0, 1);
  }
  maps.milliseconds = double(timer.nsecsElapsed()) / 1e6;
  return maps;
}

QString ModelSession::exportModel(const QString& output, const QString& dtype, bool adaptersOnly) {
  std::lock_guard lock(mutex_);
  State& st = *state_;
  try {
    if (!st.model) throw std::runtime_error("no model loaded");
    namespace fs = std::filesystem;
    const fs::path target(output.toStdString());
    jobs::refuseExportIntoModelFolder((adaptersOnly ? target.parent_path() : target).string(),
                                      st.summary.folder.toStdString());
    if (adaptersOnly) {
      if (st.model->adapterTensors().empty()) throw std::runtime_error("the model has no linear-attention layers to export");
      if (target.has_parent_path()) fs::create_directories(target.parent_path());
      models::saveAdapters(*st.model, output.toStdString());
      return {};
    }
    models::SaveOptions options;
    options.dtype = dtype == QLatin1String("float16")    ? torch::kHalf
                    : dtype == QLatin1String("bfloat16") ? torch::kBFloat16
                                                         : torch::kFloat;
    options.tokenizerFrom = st.summary.folder.toStdString();
    models::saveModel(*st.model, output.toStdString(), options);
  } catch (const std::exception& e) {
    const QString what = QString::fromStdString(hh::errorText(e)).section(QLatin1Char('\n'), 0, 0);
    return what.contains(output) ? what : QStringLiteral("%1: %2").arg(output, what);
  }
  return {};
}

ComparisonResult ModelSession::headComparison(int layer, int head, const ComparisonSettings& settings) {
  std::lock_guard lock(mutex_);
  ComparisonResult result;
  result.settings = settings;
  QElapsedTimer timer;
  timer.start();
  State& st = *state_;
  try {
    if (!st.model || st.queries.empty()) throw std::runtime_error("inspect a text first (Attention inspector)");
    if (layer < 0 || layer >= int(st.queries.size()) || head < 0 || head >= st.summary.heads)
      throw std::out_of_range("no such layer or head");
    const auto qh = st.queries[size_t(layer)].narrow(1, head, 1);  // [1, 1, T, D]
    const auto kh = st.keys[size_t(layer)].narrow(1, head, 1);
    auto linear = st.model->linearAttention(layer);
    ComparisonSettings asked = settings;
    // A softmax layer of a partly converted model has no trained map: the others are compared.
    const bool noTrained = !linear && asked.featureMaps.removeAll(QStringLiteral("trained")) > 0;
    TrainedWeights trained;  // the layer's own weights, its rule, window and gates included
    if (linear && asked.featureMaps.contains(QStringLiteral("trained"))) {
      at::NoGradGuard noGrad;
      trained.weights = linear->headWeights(st.queries[size_t(layer)], st.keys[size_t(layer)], head,
                                            st.hidden[size_t(layer)]);  // [1, 1, T, T]
      trained.featureDim = int(linear->featureMap()->featureDim());
    }
    compareHead(qh, kh, st.model->config().causal, asked, linear ? &trained : nullptr, result);
    result.settings = settings;
    result.tokens = st.tokens;
    result.source = QStringLiteral("layer %1, head %2 of %3 on %4 tokens")
                        .arg(layer)
                        .arg(head)
                        .arg(st.summary.folder)
                        .arg(qh.size(2));
    if (noTrained) result.source += QStringLiteral(" (a softmax layer: no trained map)");
    if (linear && settings.featureMaps.contains(QStringLiteral("trained")))
      result.source += QStringLiteral(" (\"trained\": the layer's %1)").arg(fromStd(attn::describe(linear->config())));
  } catch (const std::exception& e) {
    result = ComparisonResult{};
    result.settings = settings;
    result.error = QString::fromStdString(hh::errorText(e)).section('\n', 0, 1);
  }
  result.milliseconds = double(timer.nsecsElapsed()) / 1e6;
  return result;
}

}  // namespace hh::gui
