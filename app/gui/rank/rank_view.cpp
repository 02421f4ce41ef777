// RankView: the Layer ranking tab: the rank job's settings, its progress, and the ranking (see
// rank_view.h).
#include "app/gui/rank/rank_view.h"

#include <QComboBox>
#include <QDir>
#include <QFile>
#include <QFileDialog>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QSpinBox>
#include <QVBoxLayout>

#include <nlohmann/json.hpp>

#include <algorithm>

#include "app/gui/common/error_dialog.h"
#include "app/gui/rank/rank_results.h"
#include "app/gui/rank/rank_runner.h"
#include "engine/core/error_text.h"
#include "engine/jobs/rank_job.h"

namespace hh::gui {
namespace {
constexpr int kMaxSteps = 1'000'000;
}  // namespace

QStringList RankView::attentionChoices() {
  return {QStringLiteral("hedgehog"), QStringLiteral("hedgehog_window(16)"), QStringLiteral("hedgehog_window(64)"),
          QStringLiteral("hedgehog_softmax"), QStringLiteral("t2r")};
}

RankView::RankView(QWidget* parent) : QWidget(parent) {
  runner_ = new RankRunner(this);
  auto* layout = new QVBoxLayout(this);
  layout->addWidget(buildSettings());
  results_ = new RankResultsPanel;
  layout->addWidget(results_, 1);
  connect(results_, &RankResultsPanel::convertRequested, this, &RankView::convertRequested);
  connect(runner_, &RankRunner::progress, this, &RankView::onProgress);
  connect(runner_, &RankRunner::logLine, this, [this](const QString& line) { showLog(line); });
  connect(runner_, &RankRunner::runningChanged, this, &RankView::setRunning);
  connect(runner_, &RankRunner::pausedChanged, this, &RankView::setPaused);
  connect(runner_, &RankRunner::finished, this, &RankView::onFinished);
  setRunning(false);
}

QWidget* RankView::buildSettings() {
  auto* box = new QWidget;
  auto* layout = new QVBoxLayout(box);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addLayout(buildInputRow());
  layout->addLayout(buildStatusRow());
  connect(browse_, &QPushButton::clicked, this, &RankView::chooseModel);
  connect(open_, &QPushButton::clicked, this, &RankView::chooseRanking);
  connect(cancel_, &QPushButton::clicked, this, &RankView::cancel);
  connect(pause_, &QPushButton::clicked, this, [this] { runner_->paused() ? runner_->resume() : runner_->pause(); });
  connect(start_, &QPushButton::clicked, this, [this] {
    const QString error = start();
    if (!error.isEmpty()) showErrorDialog(this, tr("Rank layers"), error);
  });
  return box;
}

// Model, the attention to try, steps, and the Start / Pause / Cancel / Open buttons.
QHBoxLayout* RankView::buildInputRow() {
  auto* row = new QHBoxLayout;
  model_ = new QLineEdit;
  model_->setObjectName(QStringLiteral("rankModel"));
  model_->setPlaceholderText(tr("a model folder (config.json, weights, tokenizer)"));
  browse_ = new QPushButton(tr("Browse\u2026"));
  attention_ = new QComboBox;
  attention_->setObjectName(QStringLiteral("rankAttention"));
  attention_->setEditable(true);
  attention_->addItems(attentionChoices());
  attention_->setToolTip(tr("The linear attention every layer is tried with (any layer spec, e.g. hedgehog_window(32))"));
  steps_ = new QSpinBox;
  steps_->setObjectName(QStringLiteral("rankSteps"));
  steps_->setRange(1, kMaxSteps);
  steps_->setValue(int(base_.steps));
  steps_->setToolTip(tr("Distillation steps before the layers are measured"));
  start_ = new QPushButton(tr("Start"));
  start_->setObjectName(QStringLiteral("rankStart"));
  cancel_ = new QPushButton(tr("Cancel"));
  cancel_->setObjectName(QStringLiteral("rankCancel"));
  pause_ = new QPushButton(tr("Pause"));
  pause_->setObjectName(QStringLiteral("rankPause"));
  pause_->setToolTip(tr("Wait at the next step (the ranking keeps what it has done); Resume goes on"));
  open_ = new QPushButton(tr("Open a ranking\u2026"));
  open_->setToolTip(tr("Show a saved rank.json (hedgehog rank writes one into its run folder)"));
  row->addWidget(new QLabel(tr("Model")));
  row->addWidget(model_, 3);
  row->addWidget(browse_);
  row->addSpacing(12);
  row->addWidget(new QLabel(tr("Try every layer as")));
  row->addWidget(attention_, 1);
  row->addWidget(new QLabel(tr("Steps")));
  row->addWidget(steps_);
  row->addSpacing(12);
  for (QPushButton* b : {start_, pause_, cancel_, open_}) row->addWidget(b);
  return row;
}

// The progress bar and the last log line.
QHBoxLayout* RankView::buildStatusRow() {
  auto* status = new QHBoxLayout;
  progress_ = new QProgressBar;
  progress_->setObjectName(QStringLiteral("rankProgress"));
  progress_->setMaximumWidth(320);
  progress_->setRange(0, 1);
  progress_->setValue(0);
  progress_->setFormat(tr("no run"));
  log_ = new QLabel;
  log_->setObjectName(QStringLiteral("rankLog"));
  log_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  status->addWidget(progress_);
  status->addWidget(log_, 1);
  return status;
}

void RankView::setModelFolder(const QString& folder) { model_->setText(folder); }
QString RankView::modelFolder() const { return model_->text().trimmed(); }

void RankView::setBaseConfig(const jobs::RankConfig& config) {
  base_ = config;
  if (!config.modelDir.empty()) setModelFolder(QString::fromStdString(config.modelDir));
  attention_->setCurrentText(QString::fromStdString(config.attention));
  steps_->setValue(int(std::min<int64_t>(config.steps, kMaxSteps)));
}

jobs::RankConfig RankView::config() const {
  jobs::RankConfig c = base_;
  c.modelDir = modelFolder().toStdString();
  c.attention = attention_->currentText().trimmed().toStdString();
  c.steps = steps_->value();
  if (c.modelDir != base_.modelDir) {  // the base's folder and budget were another model's ranking
    c.runDir.clear();
    c.keep = jobs::RankConfig{}.keep;
  }
  if (c.runDir.empty() && !c.modelDir.empty()) {
    const QString name = QFileInfo(QDir::cleanPath(modelFolder())).fileName();
    c.runDir = QStringLiteral("runs/rank/%1").arg(name.isEmpty() ? QStringLiteral("model") : name).toStdString();
  }
  return c;
}

QString RankView::start() {
  if (runner_->running()) return tr("a ranking is already running");
  if (modelFolder().isEmpty()) return tr("no model folder: choose the model to rank");
  if (!QFileInfo::exists(modelFolder() + QStringLiteral("/config.json")))
    return tr("%1: not a model folder (no config.json)").arg(modelFolder());
  jobs::RankConfig c;
  try {
    c = jobs::rankConfigFromJson(jobs::toJson(config()));  // the checks the CLI makes
  } catch (const std::exception& e) {
    return QString::fromStdString(hh::errorText(e));
  }
  if (!runner_->start(c)) return tr("a ranking is already running");
  progress_->setRange(0, int(c.steps));
  progress_->setValue(0);
  progress_->setFormat(tr("starting\u2026"));
  showLog(tr("Ranking %1: every layer %2, %3 steps\u2026")
              .arg(QString::fromStdString(c.modelDir), QString::fromStdString(c.attention))
              .arg(c.steps));
  return {};
}

void RankView::cancel() {
  if (!runner_->running()) return;
  runner_->cancel();
  showLog(tr("Cancelling\u2026 (the job stops within a step)"));
}

bool RankView::running() const { return runner_->running(); }

QString RankView::openRanking(const QString& path) {
  QFile file(path);
  if (!file.open(QIODevice::ReadOnly)) return tr("%1: cannot read it").arg(path);
  try {
    const auto json = nlohmann::json::parse(file.readAll().toStdString());
    jobs::RankResult result = jobs::rankResultFromJson(json);
    if (!json.contains("config")) throw std::invalid_argument("no \"config\": not a ranking written by hedgehog rank");
    const jobs::RankConfig config = jobs::rankConfigFromJson(json.at("config"));
    result.rankFile = path.toStdString();
    results_->setRanking(result, config);
    if (!running()) setBaseConfig(config);
    showLog(tr("Opened %1").arg(path));
    return {};
  } catch (const std::exception& e) {
    return tr("%1: %2").arg(path, QString::fromStdString(hh::errorText(e)));
  }
}

QString RankView::logText() const { return log_->text(); }

void RankView::chooseModel() {
  const QString dir = QFileDialog::getExistingDirectory(this, tr("Model to rank"), modelFolder());
  if (!dir.isEmpty()) setModelFolder(dir);
}

void RankView::chooseRanking() {
  const QString path = QFileDialog::getOpenFileName(this, tr("Open a ranking"), QStringLiteral("runs/rank"),
                                                    tr("Rankings (rank.json);;JSON files (*.json)"));
  if (path.isEmpty()) return;
  const QString error = openRanking(path);
  if (!error.isEmpty()) showErrorDialog(this, tr("Open a ranking"), error);
}

void RankView::setRunning(bool running) {
  for (QWidget* w : std::initializer_list<QWidget*>{model_, browse_, attention_, steps_, start_, open_})
    w->setEnabled(!running);
  cancel_->setEnabled(running);
  pause_->setEnabled(running);
}

void RankView::setPaused(bool paused) {
  pause_->setText(paused ? tr("Resume") : tr("Pause"));
  if (paused) progress_->setFormat(tr("paused at %v / %m"));
}

void RankView::onProgress(qint64 step, qint64 total, const QString& phase) {
  progress_->setRange(0, int(std::max<qint64>(total, 1)));
  progress_->setValue(int(std::min(step, total)));
  progress_->setFormat(runner_->paused() ? tr("paused at %v / %m")
                                         : QStringLiteral("%v / %m %1").arg(phase.isEmpty() ? tr("steps") : phase));
}

void RankView::onFinished(const QString& status, const QString& message) {
  const jobs::RankResult& r = runner_->result();
  if (r.status == jobs::JobStatus::Completed) {
    results_->setRanking(r, runner_->config());
    progress_->setValue(progress_->maximum());
    progress_->setFormat(tr("done: %m steps"));
    showLog(tr("%1; written to %2").arg(message, QString::fromStdString(r.rankFile)));
  } else if (r.status == jobs::JobStatus::Cancelled) {
    progress_->setFormat(tr("cancelled at %v / %m"));
    showLog(tr("Cancelled: %1").arg(message));
  } else {
    progress_->setFormat(tr("failed"));
    showLog(tr("Failed: %1").arg(message), true);
    showErrorDialog(this, tr("Rank layers"), message);
  }
  Q_EMIT statusMessage(tr("Layer ranking %1: %2").arg(status, message));
  Q_EMIT finished(status, message);
}

void RankView::showLog(const QString& text, bool error) {
  log_->setStyleSheet(error ? QStringLiteral("color: #b3261e;") : QString());
  log_->setText(text);
  log_->setToolTip(text);
}

}  // namespace hh::gui
