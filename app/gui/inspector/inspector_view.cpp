// The attention inspector (see inspector_view.h).
#include "app/gui/inspector/inspector_view.h"

#include <QComboBox>
#include <QFile>
#include <QFileDialog>
#include <QFrame>
#include <QHBoxLayout>
#include <QLabel>
#include <QPlainTextEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QShortcut>
#include <QSpinBox>
#include <QSplitter>
#include <QThreadPool>
#include <QTimer>
#include <QVBoxLayout>

#include <algorithm>
#include <cmath>

#include "widgets/head_grid.h"
#include "widgets/heatmap_view.h"

namespace hh::gui {
namespace {

constexpr int kDefaultMaxTokens = 1024;
constexpr int kMaxTokens = 8192;
constexpr qint64 kMaxTextFileBytes = 8 << 20;  // a text file larger than this is refused

const char* kDefaultText =
    "The committee met on Monday to discuss the budget. After a long debate, the members agreed that the "
    "new library would open in the spring, and the mayor said the city would pay for the books.";

QFrame* framedPanel(QWidget* content) {
  auto* frame = new QFrame;
  frame->setObjectName(QStringLiteral("panel"));
  auto* layout = new QVBoxLayout(frame);
  layout->setContentsMargins(6, 6, 6, 6);
  layout->addWidget(content);
  return frame;
}

}  // namespace

InspectorView::InspectorView(std::shared_ptr<ModelSession> session, QThreadPool* pool, QWidget* parent)
    : QWidget(parent), session_(std::move(session)), pool_(pool) {
  compute_ = new ComputeChoiceBox;
  compute_->setToolTip(tr("Where the model computes, and in what precision (it is loaded again on a change)"));
  connect(compute_, &ComputeChoiceBox::changed, this, &InspectorView::computeChoiceChanged);

  auto* split = new QSplitter(Qt::Horizontal);
  split->addWidget(buildTextPanel());
  split->addWidget(buildHeadPanel());
  split->setStretchFactor(0, 2);
  split->setStretchFactor(1, 3);
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(8, 8, 8, 8);
  layout->addWidget(split);
  connectControls();
}

// Left: the text, its controls, the probe controls, and the grid of every layer and head.
QWidget* InspectorView::buildTextPanel() {
  textEdit_ = new QPlainTextEdit;
  textEdit_->setPlaceholderText(tr("Type or paste text, then Inspect (Ctrl+Return)"));
  textEdit_->setPlainText(QString::fromUtf8(kDefaultText));
  textEdit_->setMaximumHeight(140);
  runButton_ = new QPushButton(tr("Inspect"));
  runButton_->setToolTip(tr("Run the model on the text (Ctrl+Return)"));
  runButton_->setEnabled(false);
  auto* loadButton = new QPushButton(tr("Load text\u2026"));
  connect(loadButton, &QPushButton::clicked, this, &InspectorView::loadTextFile);
  maxTokens_ = new QSpinBox;
  maxTokens_->setRange(2, kMaxTokens);
  maxTokens_->setValue(kDefaultMaxTokens);
  maxTokens_->setPrefix(tr("max "));
  maxTokens_->setSuffix(tr(" tokens"));
  maxTokens_->setToolTip(tr("Longer texts are cut here (and at the model's position limit)"));
  summaryChoice_ = new QComboBox;
  summaryChoice_->setObjectName(QStringLiteral("colourBy"));
  summaryChoice_->addItems({tr("entropy of softmax"), tr("KL(softmax \u2016 linear)"), tr("entropy of linear"),
                            tr("weight on the needle, softmax"), tr("weight on the needle, converted")});
  summaryChoice_->setToolTip(tr("What the frame colour and number under each head show"));
  info_ = new QLabel(tr("Open a model folder (File > Open model, Ctrl+Shift+O), then Inspect."));
  info_->setWordWrap(true);
  grid_ = new hh::widgets::HeadGrid;
  grid_->setEmptyText(tr("Every layer and head of the model, once a text is inspected"));

  progress_ = new QProgressBar;
  progress_->setObjectName(QStringLiteral("inspectProgress"));
  progress_->setFormat(tr("%v / %m layers"));
  progress_->setToolTip(tr("Layers run and measured"));
  progress_->setMinimumWidth(160);
  progress_->hide();
  cancelButton_ = new QPushButton(tr("Cancel"));
  cancelButton_->setObjectName(QStringLiteral("cancelInspection"));
  cancelButton_->setToolTip(tr("Stop the inspection (Esc)"));
  cancelButton_->hide();

  auto* controls = new QHBoxLayout;
  controls->addWidget(runButton_);
  controls->addWidget(loadButton);
  controls->addWidget(maxTokens_);
  controls->addWidget(progress_, 1);
  controls->addWidget(cancelButton_);
  controls->addStretch(1);
  controls->addWidget(new QLabel(tr("colour by")));
  controls->addWidget(summaryChoice_);
  auto* left = new QWidget;
  auto* leftLayout = new QVBoxLayout(left);
  leftLayout->setContentsMargins(0, 0, 0, 0);
  leftLayout->addWidget(textEdit_);
  leftLayout->addLayout(controls);
  leftLayout->addLayout(buildProbeControls());
  leftLayout->addWidget(info_);
  leftLayout->addWidget(framedPanel(grid_), 3);
  return left;
}

// Right: one head's map large, what it shows, and the hovered cell's readout.
QWidget* InspectorView::buildHeadPanel() {
  large_ = new hh::widgets::HeatmapView;
  large_->setValueLabel(tr("weight"));
  large_->setAxisTitles(tr("key token"), tr("query token"));
  large_->setEmptyText(tr("Inspect a text, then click a head\nto see its attention here"));
  viewChoice_ = new QComboBox;
  viewChoice_->addItems({tr("softmax"), tr("linear"), tr("linear \u2212 softmax")});
  viewChoice_->setToolTip(tr("On a converted layer: its linear weights, or their difference to softmax"));
  compareButton_ = new QPushButton(tr("Compare feature maps on this head"));
  compareButton_->setEnabled(false);
  hover_ = new QLabel;
  hover_->setObjectName(QStringLiteral("metrics"));

  auto* rightHead = new QHBoxLayout;
  rightHead->addWidget(new QLabel(tr("show")));
  rightHead->addWidget(viewChoice_);
  rightHead->addStretch(1);
  rightHead->addWidget(compareButton_);
  auto* right = new QWidget;
  auto* rightLayout = new QVBoxLayout(right);
  rightLayout->setContentsMargins(0, 0, 0, 0);
  rightLayout->addLayout(rightHead);
  rightLayout->addWidget(framedPanel(large_), 1);
  rightLayout->addWidget(hover_);
  return right;
}

void InspectorView::connectControls() {
  connect(runButton_, &QPushButton::clicked, this, &InspectorView::inspect);
  auto* shortcut = new QShortcut(QKeySequence(Qt::CTRL | Qt::Key_Return), this);
  connect(shortcut, &QShortcut::activated, this, &InspectorView::inspect);
  connect(cancelButton_, &QPushButton::clicked, this, &InspectorView::cancelInspection);
  auto* escape = new QShortcut(QKeySequence(Qt::Key_Escape), this);
  escape->setContext(Qt::WidgetWithChildrenShortcut);
  connect(escape, &QShortcut::activated, this, &InspectorView::cancelInspection);
  connect(summaryChoice_, &QComboBox::currentIndexChanged, this, &InspectorView::applySummary);
  connect(viewChoice_, &QComboBox::currentIndexChanged, this, &InspectorView::applyHeadView);
  connect(grid_, &hh::widgets::HeadGrid::headClicked, this, &InspectorView::showHead);
  connect(compareButton_, &QPushButton::clicked, this, [this] {
    if (!maps_.error.isEmpty() || maps_.length == 0) return;
    Q_EMIT compareRequested(maps_.layer, maps_.head);
  });
  connect(large_, &hh::widgets::HeatmapView::cellHovered, this, [this](int row, int col, double) {
    hover_->setText(large_->readoutText(row, col).replace(QStringLiteral("<br>"), QStringLiteral("  \u00b7  ")));
  });
  connect(large_, &hh::widgets::HeatmapView::hoverLeft, hover_, &QLabel::clear);
}

QHBoxLayout* InspectorView::buildProbeControls() {
  probeTask_ = new QComboBox;
  probeTask_->addItems({QStringLiteral("passkey"), QStringLiteral("mqar")});
  probeTask_->setToolTip(tr("passkey: random tokens hidden in the text, asked for at its end; "
                            "mqar: random key-value pairs, every key asked again"));
  probeLength_ = new QSpinBox;
  probeLength_->setRange(32, kMaxTokens);
  probeLength_->setValue(256);
  probeLength_->setSuffix(tr(" tokens"));
  probeButton_ = new QPushButton(tr("Hide a needle"));
  probeButton_->setToolTip(tr("Recall probe: hide a needle in this text (repeated to the length), score 16 prompts "
                              "for softmax and the converted model, inspect the first, and colour each head by "
                              "the weight its answer positions put on the needle"));
  probeButton_->setEnabled(false);
  connect(probeButton_, &QPushButton::clicked, this, &InspectorView::runRecallProbe);
  auto* row = new QHBoxLayout;
  row->addWidget(new QLabel(tr("recall probe")));
  row->addWidget(probeTask_);
  row->addWidget(probeLength_);
  row->addWidget(probeButton_);
  row->addStretch(1);
  row->addWidget(compute_);
  return row;
}

void InspectorView::runRecallProbe() {
  ++pending_;
  info_->setText(tr("Hiding a needle and scoring 16 prompts\u2026"));
  probeButton_->setEnabled(false);
  const QString text = textEdit_->toPlainText(), task = probeTask_->currentText();
  int length = probeLength_->value();
  if (model_.maxPositions > 0) length = std::min(length, model_.maxPositions);
  auto session = session_;
  inspectRequests_.run(
      pool_, this,
      [session, text, task, length, control = beginInspection(true)] {
        return session->recallProbe(text, task, length, 16, 48, control);
      },
      [this](InspectResult result) { onInspected(std::move(result)); },
      [this] {
        --pending_;
        probeButton_->setEnabled(true);
        finishInspection();
      });
}

void InspectorView::setText(const QString& text) { textEdit_->setPlainText(text); }
QString InspectorView::text() const { return textEdit_->toPlainText(); }
void InspectorView::setMaxTokens(int tokens) { maxTokens_->setValue(tokens); }
int InspectorView::maxTokensLimit() const { return maxTokens_->maximum(); }
ComputeChoice InspectorView::computeChoice() const { return compute_->choice(); }

QString InspectorView::infoText() const { return info_->text(); }

void InspectorView::modelLoaded(const ModelSummary& summary) {
  model_ = summary;
  result_ = InspectResult{};
  maps_ = HeadMaps{};
  previews_.clear();
  reopenLayer_ = reopenHead_ = -1;  // another model's heads
  grid_->clear();
  large_->clear();
  compareButton_->setEnabled(false);
  runButton_->setEnabled(true);
  probeButton_->setEnabled(true);
  summaryChoice_->setCurrentIndex(summary.converted() ? Kl : EntropySoftmax);
  // The box goes no further than the model's positions (a model that does not say keeps the
  // inspector's own limit).
  const int positions = summary.maxPositions > 1 ? std::min(summary.maxPositions, kMaxTokens) : kMaxTokens;
  maxTokens_->setMaximum(positions);
  maxTokens_->setToolTip(tr("Longer texts are cut here; this model has %1 positions").arg(positions));
  info_->setText(tr("%1 \u00b7 %2").arg(summary.folder, summary.description));
}

void InspectorView::loadTextFile() {
  const QString path = QFileDialog::getOpenFileName(this, tr("Load text"), QString(), tr("Text (*.txt *.md);;All files (*)"));
  if (path.isEmpty()) return;
  QFile file(path);
  if (!file.open(QIODevice::ReadOnly)) {
    info_->setText(tr("Cannot read %1: %2").arg(path, file.errorString()));
    return;
  }
  if (file.size() > kMaxTextFileBytes) {
    info_->setText(tr("%1 is larger than %2 MB; load a smaller excerpt").arg(path).arg(kMaxTextFileBytes >> 20));
    return;
  }
  textEdit_->setPlainText(QString::fromUtf8(file.readAll()));
}

void InspectorView::inspect() {
  if (!session_->loaded()) {
    info_->setText(tr("No model loaded: File > Open model (Ctrl+Shift+O)."));
    return;
  }
  ++pending_;
  info_->setText(tr("Running the model\u2026"));
  runButton_->setEnabled(false);
  const QString text = textEdit_->toPlainText();
  const int maxTokens = maxTokens_->value();
  auto session = session_;
  inspectRequests_.run(
      pool_, this,
      [session, text, maxTokens, control = beginInspection(false)] {
        return session->inspect(text, maxTokens, 48, control);
      },
      [this](InspectResult result) { onInspected(std::move(result)); },
      [this] {
        --pending_;
        runButton_->setEnabled(true);
        finishInspection();
      });
}

void InspectorView::showNothingInspected(const QString& why) {
  // The session dropped the last inspection's q and k: nothing of it may stay clickable.
  result_ = InspectResult{};
  maps_ = HeadMaps{};
  grid_->clear();
  large_->clear();
  large_->setTitle(QString());
  compareButton_->setEnabled(false);
  viewChoice_->setEnabled(false);
  info_->setText(why);
}

void InspectorView::onInspected(InspectResult result) {
  const bool previewed = !previews_.empty();
  previews_.clear();
  if (result.cancelled && result.previousKept && !previewed) {  // nothing had changed yet
    QString what = result.error;
    what[0] = what[0].toUpper();
    info_->setText(result_.layers > 0 ? tr("%1: the grid still shows the last inspection.").arg(what)
                                      : what + QLatin1Char('.'));
    Q_EMIT inspected();
    return;
  }
  if (result.cancelled) {
    QString what = result.error;
    what[0] = what[0].toUpper();
    showNothingInspected(tr("%1: nothing is shown. Inspect runs it again.").arg(what));
    result_.cancelled = true;
    Q_EMIT inspected();
    return;
  }
  if (!result.error.isEmpty()) {
    showNothingInspected(QStringLiteral("<span style='color:#b2182b'>%1</span>").arg(result.error.toHtmlEscaped()));
    result_.error = result.error;
    Q_EMIT inspected();
    return;
  }
  result_ = std::move(result);
  const InspectResult& r = result_;
  QString text = tr("%1 tokens \u00b7 %2 layers \u00d7 %3 heads \u00b7 %4 ms on %5")
                     .arg(r.length)
                     .arg(r.layers)
                     .arg(r.heads)
                     .arg(r.milliseconds, 0, 'f', 0)
                     .arg(model_.device);
  if (r.truncated && r.cutByModel)
    text += tr(" \u00b7 cut from %1 tokens: the model has %2 positions").arg(r.textTokens).arg(r.length);
  else if (r.truncated)
    text += tr(" \u00b7 cut from %1 tokens by the max-tokens setting").arg(r.textTokens);
  if (r.recall) {
    const auto& p = *r.recall;
    const int answers = int(p.answerPositions.size()) * p.prompts;
    text = tr("%1 at %2 tokens, %3 prompts: answer tokens right, softmax %4 of %5, converted %6 \u00b7 the first prompt "
              "below; frames: weight from the answer positions to the needle")
               .arg(p.task)
               .arg(p.length)
               .arg(p.prompts)
               .arg(qRound(p.teacherAccuracy * answers))
               .arg(answers)
               .arg(qRound(p.convertedAccuracy * answers));
    summaryChoice_->setCurrentIndex(r.converted ? NeedleConverted : NeedleSoftmax);
  } else if (summaryChoice_->currentIndex() >= NeedleSoftmax) {
    summaryChoice_->setCurrentIndex(r.converted ? Kl : EntropySoftmax);
  }
  info_->setText(text);
  grid_->setGridSize(r.layers, r.heads);
  applySummary();
  // Keep the open head (or open the first); a slot on inspected() may open another.
  const bool open = maps_.length > 0 || reopenLayer_ >= 0;
  const int keptLayer = maps_.length > 0 ? maps_.layer : reopenLayer_,
            keptHead = maps_.length > 0 ? maps_.head : reopenHead_;
  reopenLayer_ = reopenHead_ = -1;
  const int layer = (open && keptLayer < r.layers) ? keptLayer : 0;
  const int head = (open && keptHead < r.heads) ? keptHead : 0;
  showHead(layer, head);
  Q_EMIT statusMessage(text);
  Q_EMIT inspected();
}

void InspectorView::setHeadView(int index) { viewChoice_->setCurrentIndex(index); }

int InspectorView::summaryChoice() const {
  return summaryChoice_->currentIndex();
}

void InspectorView::applySummary() {
  const InspectResult& r = result_;
  if (r.layers == 0) {  // an inspection in flight: its layers so far
    styleGridFor(summaryChoice());
    for (const auto& p : previews_) drawPreview(p);
    return;
  }
  const int choice = summaryChoice();
  const bool needle = choice >= NeedleSoftmax;
  const std::vector<double> none(size_t(r.layers * r.heads), std::nan(""));
  const auto& values = needle ? (!r.recall ? none : choice == NeedleSoftmax ? r.recall->teacherMass : r.recall->convertedMass)
                       : (choice == Kl ? r.measures.kl : choice == EntropyLinear ? r.measures.entropyLinear : r.measures.entropySoftmax).values;
  styleGridFor(choice);
  for (int l = 0; l < r.layers; ++l)
    for (int h = 0; h < r.heads; ++h) {
      const size_t i = size_t(l * r.heads + h);
      grid_->setCell(l, h, r.thumbSize, r.thumbSize, r.thumbnails[i], values[i]);
    }
}

void InspectorView::styleGridFor(int choice) {
  const bool needle = choice >= NeedleSoftmax;
  grid_->setSummaryName(needle ? tr("needle weight") : choice == Kl ? tr("KL") : tr("entropy"));
  // Low KL is good and low entropy sharp (bright); a head that looks at the needle is bright.
  grid_->setSummaryHigherIsBetter(needle);
  if (needle) {
    grid_->setLegendWords(tr("most"), tr("least"));
  } else if (choice == Kl) {
    grid_->setLegendWords(tr("best"), tr("worst"));
  } else {
    grid_->setLegendWords(tr("sharp"), tr("diffuse"));  // an entropy is neither good nor bad
  }
}

void InspectorView::showHead(int layer, int head) {
  if (result_.layers == 0) return;
  grid_->setSelected(layer, head);
  ++pending_;
  auto session = session_;
  headRequests_.run(
      pool_, this, [session, layer, head] { return session->headMaps(layer, head); },
      [this](HeadMaps maps) { onHeadMaps(std::move(maps)); }, [this] { --pending_; });
}

void InspectorView::onHeadMaps(HeadMaps maps) {
  maps_ = std::move(maps);  // T x T matrices: moved, not copied, on the GUI thread
  if (!maps_.error.isEmpty()) {
    info_->setText(QStringLiteral("<span style='color:#b2182b'>%1</span>").arg(maps_.error.toHtmlEscaped()));
  }
  compareButton_->setEnabled(maps_.error.isEmpty());
  viewChoice_->setEnabled(maps_.linear != nullptr);
  large_->clearScores();  // the previous head's scores must not read out for this one
  applyHeadView();
  // The scores (T x T, read only by the hover readout) are handed over in a later event, so
  // that no single GUI-thread step copies two large matrices; they stay with the view across
  // softmax / linear / difference switches (same size).
  if (!maps_.scores.empty()) {
    QTimer::singleShot(0, this, [this, ticket = headRequests_.current()] {
      if (!headRequests_.isCurrent(ticket) || maps_.scores.empty()) return;
      large_->setScores(maps_.length, maps_.length, std::move(maps_.scores));
      maps_.scores.clear();
    });
  }
  Q_EMIT headShown();
}

void InspectorView::applyHeadView() {
  const HeadMaps& m = maps_;
  if (!m.error.isEmpty() || m.length == 0) return;
  const int t = m.length;
  const int view = m.linear ? viewChoice_->currentIndex() : 0;
  const size_t i = size_t(m.layer * result_.heads + m.head);
  auto metric = [&](const std::vector<double>& v) {
    return i < v.size() && !std::isnan(v[i]) ? QString::number(v[i], 'f', 3) : QStringLiteral("n/a");
  };
  QString title = tr("layer %1, head %2").arg(m.layer).arg(m.head);
  if (view == 2) {
    const auto &linear = *m.linear, &softmax = *m.softmax;
    std::vector<float> diff(softmax.size());
    for (size_t j = 0; j < diff.size(); ++j) diff[j] = linear[j] - softmax[j];
    large_->setColorMode(hh::widgets::HeatmapView::ColorMode::Diverging);
    large_->setValueLabel(tr("linear \u2212 softmax (clipped at p99)"));
    large_->setMatrix(t, t, std::move(diff));
    if (m.differenceTop > 0) large_->setValueRange(-m.differenceTop, m.differenceTop);
    else large_->setAutoValueRange();
    title += tr(" \u00b7 %1 \u2212 softmax \u00b7 KL %2").arg(m.featureMap, metric(result_.measures.kl.values));
  } else {
    large_->setColorMode(hh::widgets::HeatmapView::ColorMode::Sequential);
    large_->setValueLabel(view == 1 ? tr("linear weight (clipped at p99)") : tr("softmax weight (clipped at p99)"));
    large_->setSharedMatrix(t, t, view == 1 ? m.linear : m.softmax);
    const double top = view == 1 ? m.linearTop : m.softmaxTop;
    if (top > 0) large_->setValueRange(0.0, top);
    else large_->setAutoValueRange();
    title += view == 1 ? tr(" \u00b7 %1 \u00b7 H %2 \u00b7 KL %3").arg(m.featureMap, metric(result_.measures.entropyLinear.values),
                                                                        metric(result_.measures.kl.values))
                       : tr(" \u00b7 softmax \u00b7 H %1").arg(metric(result_.measures.entropySoftmax.values));
    if (view == 1 && !m.note.isEmpty()) title += QStringLiteral(" \u00b7 ") + m.note;
  }
  large_->setTokenLabels(result_.tokens, result_.tokens);
  large_->setTitle(title);
}

}  // namespace hh::gui
