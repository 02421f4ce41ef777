#include "app/gui/generation/generation_view.h"

#include <QCheckBox>
#include <QCoreApplication>
#include <QDoubleSpinBox>
#include <QElapsedTimer>
#include <QFileDialog>
#include <QGridLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPlainTextEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QSettings>
#include <QSpinBox>
#include <QSplitter>
#include <QTextCharFormat>
#include <QTextCursor>
#include <QTextEdit>
#include <QThread>
#include <QTimer>
#include <QVBoxLayout>

#include <cmath>
#include <utility>

#include "widgets/curve_plot.h"
#include "widgets/heatmap_view.h"

namespace hh::gui {

namespace {
const char* kSideNames[2] = {"original", "converted"};

QString megabytes(qint64 bytes) { return QString::number(double(bytes) / 1e6, 'f', bytes < 10'000'000 ? 2 : 1) + " MB"; }
}  // namespace

GenerationView::GenerationView(QWidget* parent) : QWidget(parent), session_(std::make_shared<GenerationSession>()) {
  auto* folders = createFolderRow();
  prompt_ = new QPlainTextEdit;
  prompt_->setPlaceholderText(tr("Prompt"));
  prompt_->setMaximumHeight(64);
  auto* controls = createControls();
  auto* body = new QSplitter(Qt::Vertical);
  body->addWidget(createOutputPanes());
  body->addWidget(createPlots());
  body->setStretchFactor(0, 1);
  body->setStretchFactor(1, 1);
  body->setSizes({300, 360});
  status_ = new QLabel(tr("Load an original and a converted model, type a prompt, and press Generate."));
  status_->setWordWrap(true);

  auto* layout = new QVBoxLayout(this);
  layout->addLayout(folders);
  layout->addWidget(prompt_);
  layout->addLayout(controls);
  layout->addWidget(body, 1);
  layout->addWidget(status_);

  stateTimer_ = new QTimer(this);
  stateTimer_->setSingleShot(true);
  stateTimer_->setInterval(100);
  connect(stateTimer_, &QTimer::timeout, this, &GenerationView::refreshStateView);
  restoreLastSession();
  updateButtons();
}

// Both model folders with Browse…, Load, and where and in what precision they decode.
QGridLayout* GenerationView::createFolderRow() {
  auto* folders = new QGridLayout;
  for (int s = 0; s < 2; ++s) {
    folders_[s] = new QLineEdit;
    folders_[s]->setPlaceholderText(s == 0 ? tr("original model folder (softmax)") : tr("converted model folder"));
    auto* browse = new QPushButton(tr("Browse…"));
    connect(browse, &QPushButton::clicked, this, [this, s] { chooseFolder(folders_[s]); });
    folders->addWidget(new QLabel(s == 0 ? tr("Original") : tr("Converted")), s, 0);
    folders->addWidget(folders_[s], s, 1);
    folders->addWidget(browse, s, 2);
  }
  load_ = new QPushButton(tr("Load"));
  load_->setToolTip(tr("Load both folders (model and tokenizer)"));
  connect(load_, &QPushButton::clicked, this, &GenerationView::loadModels);
  folders->addWidget(load_, 0, 3, 2, 1);
  compute_ = new ComputeChoiceBox;
  compute_->setToolTip(tr("Where both models decode, and in what precision (applies on Load)"));
  folders->addWidget(compute_, 0, 4, 2, 1);

  return folders;
}

// The sampling settings, Generate, Stop and the progress bar.
QHBoxLayout* GenerationView::createControls() {
  auto* controls = new QHBoxLayout;
  auto addSetting = [&](const QString& name, QWidget* w, const QString& tip) {
    auto* label = new QLabel(name);
    label->setToolTip(tip);
    w->setToolTip(tip);
    controls->addWidget(label);
    controls->addWidget(w);
  };
  maxTokens_ = new QSpinBox;
  maxTokens_->setRange(1, 100000);
  temperature_ = new QDoubleSpinBox;
  temperature_->setRange(0.0, 5.0);
  temperature_->setSingleStep(0.1);
  topK_ = new QSpinBox;
  topK_->setRange(0, 1000000);
  topP_ = new QDoubleSpinBox;
  topP_->setRange(0.01, 1.0);
  topP_->setSingleStep(0.05);
  seed_ = new QSpinBox;
  seed_->setRange(0, 1 << 30);
  addSetting(tr("Max tokens"), maxTokens_, tr("Tokens to generate at most"));
  addSetting(tr("Temperature"), temperature_, tr("0 = greedy"));
  addSetting(tr("Top-k"), topK_, tr("Keep the k most likely tokens (0 = all)"));
  addSetting(tr("Top-p"), topP_, tr("Keep the most likely tokens up to this probability mass"));
  addSetting(tr("Seed"), seed_, tr("The same seed repeats a run"));
  stopAtEos_ = new QCheckBox(tr("Stop at end of text"));
  stopAtEos_->setToolTip(tr("End a model's run when it emits its end-of-text token"));
  controls->addWidget(stopAtEos_);
  generate_ = new QPushButton(tr("Generate"));
  generate_->setDefault(true);
  stop_ = new QPushButton(tr("Stop"));
  progress_ = new QProgressBar;
  progress_->setFormat(tr("%v / %m tokens"));
  controls->addStretch(1);
  controls->addWidget(generate_);
  controls->addWidget(stop_);
  controls->addWidget(progress_, 1);
  connect(generate_, &QPushButton::clicked, this, &GenerationView::generate);
  connect(stop_, &QPushButton::clicked, this, &GenerationView::stop);

  return controls;
}

// Each model's header, its generated text and its run's numbers, side by side.
QSplitter* GenerationView::createOutputPanes() {
  auto* panes = new QSplitter(Qt::Horizontal);
  for (int s = 0; s < 2; ++s) {
    auto* pane = new QWidget;
    auto* layout = new QVBoxLayout(pane);
    layout->setContentsMargins(0, 0, 0, 0);
    headers_[s] = new QLabel(s == 0 ? tr("<b>Original</b>") : tr("<b>Converted</b>"));
    headers_[s]->setWordWrap(true);
    outputs_[s] = new QTextEdit;
    outputs_[s]->setReadOnly(true);
    stats_[s] = new QLabel;
    layout->addWidget(headers_[s]);
    layout->addWidget(outputs_[s], 1);
    layout->addWidget(stats_[s]);
    panes->addWidget(pane);
  }

  return panes;
}

// Per-token latency, cache memory, and the converted model's state norms (and decay factors).
QSplitter* GenerationView::createPlots() {
  latency_ = new hh::widgets::CurvePlot;
  latency_->setTitle(tr("Per-token latency"));
  latency_->setAxisLabels(tr("position"), tr("ms / token"));
  latency_->setEmptyText(tr("Generate to time each token"));
  memory_ = new hh::widgets::CurvePlot;
  memory_->setTitle(tr("Cache memory (KV cache or recurrent state)"));
  memory_->setAxisLabels(tr("position"), tr("MB"));
  memory_->setEmptyText(tr("Generate to follow the cache's size"));
  stateNorms_ = new hh::widgets::HeatmapView;
  stateNorms_->setTitle(tr("Converted model: ‖S‖ per layer/head"));
  stateNorms_->setValueLabel(tr("‖S‖_F"));
  stateNorms_->setAxisTitles(tr("generated token"), tr("layer / head"));
  stateNorms_->setEmptyText(tr("The converted model's state,\nper layer and head, as it generates"));
  decay_ = new hh::widgets::CurvePlot;
  decay_->setTitle(tr("Decay factor per layer (mean over heads)"));
  decay_->setAxisLabels(tr("position"), tr("decay"));
  decay_->setVisible(false);
  auto* stateColumn = new QSplitter(Qt::Vertical);
  stateColumn->addWidget(stateNorms_);
  stateColumn->addWidget(decay_);
  auto* plots = new QSplitter(Qt::Horizontal);
  plots->addWidget(latency_);
  plots->addWidget(memory_);
  plots->addWidget(stateColumn);
  for (auto* w : std::initializer_list<QWidget*>{latency_, memory_, stateColumn}) w->setMinimumSize(260, 200);

  return plots;
}

// The folders, prompt and settings of the last session (a daily tool should remember them).
void GenerationView::restoreLastSession() {
  QSettings stored;
  stored.beginGroup(QStringLiteral("generation"));
  folders_[0]->setText(stored.value(QStringLiteral("original")).toString());
  folders_[1]->setText(stored.value(QStringLiteral("converted")).toString());
  prompt_->setPlainText(stored.value(QStringLiteral("prompt")).toString());
  GenerationSettings defaults;
  defaults.maxTokens = stored.value(QStringLiteral("max_tokens"), defaults.maxTokens).toInt();
  defaults.temperature = stored.value(QStringLiteral("temperature"), defaults.temperature).toDouble();
  defaults.topK = stored.value(QStringLiteral("top_k"), defaults.topK).toInt();
  defaults.topP = stored.value(QStringLiteral("top_p"), defaults.topP).toDouble();
  defaults.seed = stored.value(QStringLiteral("seed"), 0).toULongLong();
  defaults.stopAtEos = stored.value(QStringLiteral("stop_at_eos"), true).toBool();
  setSettings(defaults);
}

void GenerationView::remember() const {
  const auto s = settings();
  QSettings stored;
  stored.beginGroup(QStringLiteral("generation"));
  stored.setValue(QStringLiteral("original"), folders_[0]->text());
  stored.setValue(QStringLiteral("converted"), folders_[1]->text());
  stored.setValue(QStringLiteral("prompt"), s.prompt);
  stored.setValue(QStringLiteral("max_tokens"), s.maxTokens);
  stored.setValue(QStringLiteral("temperature"), s.temperature);
  stored.setValue(QStringLiteral("top_k"), s.topK);
  stored.setValue(QStringLiteral("top_p"), s.topP);
  stored.setValue(QStringLiteral("seed"), qulonglong(s.seed));
  stored.setValue(QStringLiteral("stop_at_eos"), s.stopAtEos);
}

GenerationView::~GenerationView() {
  if (cancel_) cancel_->store(true);
  if (thread_) thread_->wait();
  if (loadThread_) loadThread_->wait();  // a load cannot be interrupted; its result is dropped
}

void GenerationView::chooseFolder(QLineEdit* edit) {
  const QString dir = QFileDialog::getExistingDirectory(this, tr("Model folder"), edit->text());
  if (!dir.isEmpty()) edit->setText(dir);
}

void GenerationView::setFolders(const QString& original, const QString& converted) {
  folders_[0]->setText(original);
  folders_[1]->setText(converted);
}

void GenerationView::loadModels() {
  if (running() || loading()) return;
  const QString folders[2] = {folders_[0]->text().trimmed(), folders_[1]->text().trimmed()};
  const ComputeChoice choice = compute_->choice();
  for (int s = 0; s < 2; ++s)
    if (!folders[s].isEmpty()) headers_[s]->setText(QStringLiteral("<b>%1</b>: loading…").arg(tr(kSideNames[s])));
  progress_->setRange(0, 0);  // busy: a load has no steps to count
  status_->setText(tr("Loading models…"));
  auto session = session_;
  loadThread_ = QThread::create([this, session, folders, choice] {
    std::vector<LoadedSide> sides(2);
    for (int s = 0; s < 2; ++s) {
      if (folders[s].isEmpty()) {
        session->unload(s);  // a cleared field: the side's earlier model must not generate on
        sides[size_t(s)].cleared = true;
        continue;
      }
      sides[size_t(s)].error = session->load(s, folders[s], &sides[size_t(s)].info, choice);
    }
    QMetaObject::invokeMethod(
        this, [this, sides] { onLoaded(sides); }, Qt::QueuedConnection);
  });
  loadThread_->start();
  updateButtons();
}

void GenerationView::onLoaded(const std::vector<LoadedSide>& sides) {
  loadThread_->wait();
  loadThread_->deleteLater();
  loadThread_ = nullptr;
  progress_->setRange(0, 100);
  progress_->reset();  // empty, as before any run (a busy bar until now)
  QStringList problems;
  for (int s = 0; s < 2; ++s) {
    const auto& side = sides[size_t(s)];
    if (side.cleared) {
      headers_[s]->setText(QStringLiteral("<b>%1</b>: none").arg(tr(kSideNames[s])));
    } else if (!side.error.isEmpty()) {
      problems << side.error;
      headers_[s]->setText(QStringLiteral("<b>%1</b>: <span style='color:#b00'>not loaded</span>").arg(tr(kSideNames[s])));
    } else {
      headers_[s]->setText(QStringLiteral("<b>%1</b>: %2<br><small>%3 — %4</small>")
                               .arg(s == 0 ? tr("Original") : tr("Converted"), side.info.attention.toHtmlEscaped(),
                                    side.info.description.toHtmlEscaped(), side.info.device.toHtmlEscaped()));
    }
  }
  const QString message = problems.isEmpty() ? tr("Models loaded.") : problems.join(QStringLiteral("\n"));
  status_->setText(message);
  Q_EMIT statusMessage(message);
  updateButtons();
  Q_EMIT modelsLoaded(problems.join(QStringLiteral("\n")));
  if (std::exchange(generateWhenLoaded_, false)) generate();
}

bool GenerationView::waitForLoad(int ms) {
  QElapsedTimer timer;
  timer.start();
  while (loading() && timer.elapsed() < ms) QCoreApplication::processEvents(QEventLoop::AllEvents, 20);
  return !loading();
}

void GenerationView::setPrompt(const QString& prompt) { prompt_->setPlainText(prompt); }

void GenerationView::setSettings(const GenerationSettings& s) {
  maxTokens_->setValue(s.maxTokens);
  temperature_->setValue(s.temperature);
  topK_->setValue(s.topK);
  topP_->setValue(s.topP);
  seed_->setValue(int(s.seed));
  stopAtEos_->setChecked(s.stopAtEos);
}

GenerationSettings GenerationView::settings() const {
  GenerationSettings s;
  s.prompt = prompt_->toPlainText();
  s.maxTokens = maxTokens_->value();
  s.temperature = temperature_->value();
  s.topK = topK_->value();
  s.topP = topP_->value();
  s.seed = quint64(seed_->value());
  s.stopAtEos = stopAtEos_->isChecked();
  return s;
}

QString GenerationView::outputText(int side) const { return outputs_[side]->toPlainText(); }

void GenerationView::updateButtons() {
  const bool any = session_->loaded(0) || session_->loaded(1);
  load_->setEnabled(!running() && !loading());
  generate_->setEnabled(any && !running() && !loading());
  stop_->setEnabled(running());
}

void GenerationView::generate() {
  if (running()) return;
  if (loading()) {
    generateWhenLoaded_ = true;
    return;
  }
  const auto s = settings();
  remember();
  // Fresh plots and panes.
  latency_->clear();
  memory_->clear();
  decay_->clear();
  decay_->setVisible(false);
  normColumns_.clear();
  stateNorms_->setMatrix(0, 0, {});
  summaries_.clear();
  const GenerationSideInfo converted = session_->info(1);
  stateLayers_ = converted.recurrent ? converted.layers : 0;  // all softmax: no state to draw
  stateHeads_ = converted.heads;
  stateNorms_->setEmptyText(converted.recurrent || !session_->loaded(1)
                                ? tr("The converted model's state,\nper layer and head, as it generates")
                                : tr("The converted side has no recurrent state:\nall its layers keep a KV cache"));
  for (int s2 = 0; s2 < 2; ++s2) {
    outputs_[s2]->clear();
    stats_[s2]->clear();
    sideMs_[s2] = 0;
    sideTokens_[s2] = 0;
    if (session_->loaded(s2)) {
      QTextCharFormat promptFormat;
      promptFormat.setForeground(palette().color(QPalette::PlaceholderText));
      QTextCursor(outputs_[s2]->document()).insertText(s.prompt, promptFormat);
    }
    const QString name = s2 == 0 ? tr("original") : tr("converted");
    latency_->addSeries(name, {}, {});
    memory_->addSeries(name, {}, {});
  }
  progress_->setRange(0, s.maxTokens);
  progress_->setValue(0);
  cancel_ = std::make_shared<std::atomic<bool>>(false);
  auto session = session_;
  auto cancel = cancel_;
  thread_ = QThread::create([this, session, cancel, s] {
    std::vector<GenerationSummary> summaries;
    const QString error = session->run(
        s,
        [this](const GenerationToken& token) {
          QMetaObject::invokeMethod(this, [this, token] { onToken(token); }, Qt::QueuedConnection);
        },
        *cancel, &summaries);
    QMetaObject::invokeMethod(this, [this, error, summaries] { onFinished(error, summaries); }, Qt::QueuedConnection);
  });
  thread_->start();
  status_->setText(tr("Generating…"));
  updateButtons();
}

void GenerationView::stop() {
  if (cancel_) cancel_->store(true);
}

bool GenerationView::waitForRun(int ms) {
  QElapsedTimer timer;
  timer.start();
  while (running() && timer.elapsed() < ms) QCoreApplication::processEvents(QEventLoop::AllEvents, 20);
  return !running();
}

void GenerationView::onToken(const GenerationToken& t) {
  const int side = t.side;
  QTextCursor cursor(outputs_[side]->document());
  cursor.movePosition(QTextCursor::End);
  QTextCharFormat generated;  // the prompt is shown greyed, the model's text in the normal colour
  generated.setForeground(palette().color(QPalette::Text));
  cursor.insertText(t.piece, generated);
  outputs_[side]->setTextCursor(cursor);
  outputs_[side]->ensureCursorVisible();
  if (t.index > 0) {  // the first token's time is the prompt's prefill: in the stats, not the curve
    latency_->appendPoint(side, t.position, t.milliseconds);
    sideMs_[side] += t.milliseconds;
    ++sideTokens_[side];
  }
  memory_->appendPoint(side, t.position, double(t.cacheBytes) / 1e6);
  progress_->setValue(std::max(progress_->value(), t.index + 1));
  const double mean = sideTokens_[side] > 0 ? sideMs_[side] / sideTokens_[side] : t.milliseconds;
  stats_[side]->setText(tr("%1 tokens · %2 ms/token · %3 tokens/s · cache %4")
                            .arg(t.index + 1)
                            .arg(mean, 0, 'f', 2)
                            .arg(mean > 0 ? 1000.0 / mean : 0.0, 0, 'f', 1)
                            .arg(megabytes(t.cacheBytes)));
  if (side != 1 || stateLayers_ == 0) return;
  if (t.stateNorms.size() == size_t(stateLayers_ * stateHeads_)) {
    normColumns_.push_back(t.stateNorms);
    if (!stateTimer_->isActive()) stateTimer_->start();
  }
  if (t.decay.size() == size_t(stateLayers_ * stateHeads_)) {
    for (int l = 0; l < stateLayers_; ++l) {
      double sum = 0;
      int n = 0;
      for (int h = 0; h < stateHeads_; ++h) {
        const float v = t.decay[size_t(l * stateHeads_ + h)];
        if (std::isfinite(v)) sum += v, ++n;
      }
      if (n == 0) continue;
      while (decay_->seriesCount() <= l) decay_->addSeries(tr("layer %1").arg(decay_->seriesCount()), {}, {});
      decay_->appendPoint(l, t.position, sum / n);
    }
    decay_->setVisible(decay_->seriesCount() > 0);
  }
}

void GenerationView::refreshStateView() {
  // rows: layer/head (L*H), columns: generated tokens
  const int rows = stateLayers_ * stateHeads_, cols = int(normColumns_.size());
  if (rows == 0 || cols == 0) return;
  std::vector<float> values(size_t(rows) * size_t(cols));
  for (int c = 0; c < cols; ++c)
    for (int r = 0; r < rows; ++r) values[size_t(r) * size_t(cols) + size_t(c)] = normColumns_[size_t(c)][size_t(r)];
  stateNorms_->setMatrix(rows, cols, std::move(values));
  QStringList rowLabels, colLabels;
  for (int r = 0; r < rows; ++r) rowLabels << QStringLiteral("L%1 H%2").arg(r / stateHeads_).arg(r % stateHeads_);
  for (int c = 0; c < cols; ++c) colLabels << QString::number(c + 1);
  stateNorms_->setTokenLabels(rowLabels, colLabels);
}

void GenerationView::onFinished(const QString& error, const std::vector<GenerationSummary>& summaries) {
  if (thread_) {
    thread_->wait();
    thread_->deleteLater();
    thread_ = nullptr;
  }
  summaries_ = summaries;
  refreshStateView();
  QStringList parts;
  for (int s = 0; s < int(summaries.size()); ++s) {
    const auto& sum = summaries[size_t(s)];
    if (sum.tokens == 0) continue;
    parts << tr("%1: %2 tokens, prefill %3 ms, %4 tokens/s, stopped by %5")
                 .arg(tr(kSideNames[s]))
                 .arg(sum.tokens)
                 .arg(sum.prefillMs, 0, 'f', 1)
                 .arg(sum.tokensPerSecond, 0, 'f', 1)
                 .arg(sum.stopReason);
  }
  const QString message = error.isEmpty() ? parts.join(QStringLiteral(" · ")) : tr("Generation failed: %1").arg(error);
  status_->setText(message);
  Q_EMIT statusMessage(message);
  updateButtons();
  Q_EMIT finished(error);
}

}  // namespace hh::gui
