// DashboardView: layout, traces that grow by appending, the head grid and probe maps (latest or
// at the step slider's snapshot), pause state (see dashboard_view.h).
#include "app/gui/conversion/dashboard_view.h"

#include <QComboBox>
#include <QFileInfo>
#include <QLabel>
#include <QPlainTextEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QSlider>
#include <QStandardItemModel>

#include <algorithm>
#include <cmath>
#include <limits>

#include "app/gui/conversion/snapshot_maps.h"
#include "engine/runs/run_chain.h"
#include "engine/runs/run_layout.h"
#include "widgets/curve_plot.h"
#include "widgets/head_grid.h"
#include "widgets/heatmap_view.h"

namespace hh::gui {
namespace {

// Per-head tables a run may hold, with how they are labelled and whether higher is better.
struct TableKind {
  const char* name;
  const char* label;
  bool higherIsBetter;
};
constexpr TableKind kTables[] = {{"kl", "KL(softmax || linear)", false},
                                 {"entropy_linear", "entropy of linear attention", false},
                                 {"entropy_softmax", "entropy of softmax attention", false},
                                 {"monotonicity", "monotonicity (Spearman)", true},
                                 {"entropy", "attention entropy (trained model)", false}};

QString formatEta(double seconds) {
  if (!(seconds >= 0) || !std::isfinite(seconds)) return QStringLiteral("--");
  const int s = int(seconds);
  return s >= 3600 ? QStringLiteral("%1h%2m").arg(s / 3600).arg((s / 60) % 60, 2, 10, QLatin1Char('0'))
                   : QStringLiteral("%1m%2s").arg(s / 60).arg(s % 60, 2, 10, QLatin1Char('0'));
}

}  // namespace

DashboardView::DashboardView(QWidget* parent) : QWidget(parent) {
  createWidgets();
  arrangeWidgets();
  clear();
  setJobRunning(false);
}

void DashboardView::addTableChoices() {
  for (const auto& t : kTables) tableChoice_->addItem(tr(t.label), QString::fromLatin1(t.name));
}

void DashboardView::syncTableChoices() {
  // Once the run has tables: only those can be chosen, and the choice moves to the first of them
  // when the run lacks the one chosen (a train run has only "entropy").
  auto* model = qobject_cast<QStandardItemModel*>(tableChoice_->model());
  const auto& tables = shownTables();
  int firstPresent = -1;
  for (int i = 0; i < tableChoice_->count(); ++i) {
    const bool present = tables.count(tableChoice_->itemData(i).toString().toStdString()) > 0;
    if (model) model->item(i)->setEnabled(present || tables.empty());
    if (present && firstPresent < 0) firstPresent = i;
  }
  const bool chosenPresent = tables.count(tableChoice_->currentData().toString().toStdString()) > 0;
  if (!chosenPresent && firstPresent >= 0) tableChoice_->setCurrentIndex(firstPresent);  // refreshes the grid
}

void DashboardView::clear() {
  jobProgress_ = false;
  plannedSteps_ = lastStep_ = 0;
  path_.clear();
  fileStatus_.clear();
  lossSteps_.clear();
  lossValues_.clear();
  ema_ = kNoAverage;
  heldOutTeacherKl_ = false;
  tables_.clear();
  snapshot_.reset();
  pairs_.clear();
  tokens_.clear();
  pairIndex_ = 0;
  snapshotSteps_.clear();
  followLatest_ = true;
  requestedIndex_ = pickedIndex_ = -1;
  pickedTables_.clear();
  pickedSnapshot_.reset();
  curves_.reset();
  pickedCurves_.reset();
  curvePairs_.clear();
  curveLabels_.clear();
  mono_->clear();
  gridStale_ = mapsStale_ = false;
  {
    const QSignalBlocker block(stepSlider_);
    stepSlider_->setRange(0, 0);
    stepSlider_->setValue(0);
  }
  stepSlider_->setEnabled(false);
  updateStepLabel();
  loss_->clear();
  const int raw = loss_->addSeries(tr("loss"), {}, {}, {}, QColor(120, 120, 120, 90));
  loss_->setSeriesStyle(raw, widgets::CurvePlot::SeriesStyle::Line, 1.0);
  const int smooth = loss_->addSeries(tr("loss (smoothed)"), {}, {}, {}, widgets::seriesPaletteColor(0));
  loss_->setSeriesStyle(smooth, widgets::CurvePlot::SeriesStyle::Line, 2.0);
  const int val = loss_->addSeries(tr("held-out loss"), {}, {}, {}, widgets::seriesPaletteColor(1));
  loss_->setSeriesStyle(val, widgets::CurvePlot::SeriesStyle::LineAndPoints, 1.5);
  lr_->clear();
  const int lr = lr_->addSeries(tr("lr"), {}, {}, {}, widgets::seriesPaletteColor(2));
  lr_->setSeriesStyle(lr, widgets::CurvePlot::SeriesStyle::Line, 1.5);
  grid_->clear();
  softmaxMap_->clear();
  linearMap_->clear();
  noLinearMap_ = false;
  log_->clear();
  progress_->setValue(0);
  progress_->setFormat(QStringLiteral("%p%"));
  refreshStatus();
  updateEmptyTexts();
}

// A finetuning on the teacher_kl loss: its held-out points are the same quantity (val_kl), not
// the next-token loss (val_loss, about 1.6 beside a KL of 0.2 in the stories demo), and the legend
// says what they are.
void DashboardView::showHeldOutTeacherKl() {
  if (heldOutTeacherKl_) return;
  heldOutTeacherKl_ = true;
  loss_->setSeriesData(2, {}, {});
  loss_->setSeriesName(0, tr("KL to the teacher"));
  loss_->setSeriesName(1, tr("KL to the teacher (smoothed)"));
  loss_->setSeriesName(2, tr("held-out KL to the teacher"));
}

void DashboardView::updateEmptyTexts() {
  if (path_.isEmpty()) {
    grid_->setEmptyText(tr("No run open: start a conversion (Run menu) or open a run file"));
    loss_->setEmptyText({});
    lr_->setEmptyText({});
    mono_->setEmptyText({});
    for (auto* map : {softmaxMap_, linearMap_}) map->setEmptyText(tr("No run open"));
    return;
  }
  loss_->setEmptyText(tr("No steps yet"));
  lr_->setEmptyText(tr("No steps yet"));
  if (!shownSnapshot()) mapsTitle_->setText(tr("Attention on the probe text: no snapshots in this run yet"));
  softmaxMap_->setEmptyText(tr("No attention snapshots:\na distillation stores them\nat each evaluation"));
  linearMap_->setEmptyText(noLinearMap_ ? tr("No linear attention:\nthis run's model\nuses softmax")
                                        : softmaxMap_->emptyText());
  grid_->setEmptyText(shownTables().empty()
                          ? tr("No per-head tables in this run yet: a distillation writes KL, entropy and "
                               "monotonicity per head at each evaluation")
                          : tr("This run has no %1 per head").arg(tableChoice_->currentText()));
  mono_->setEmptyText(tr("No monotonicity curves at this step:\na distillation stores them with its snapshots"));
}

QString DashboardView::statusText() const {
  return status_->text();
}

void DashboardView::setSmoothing(double weight) {
  smoothingWeight_ = std::clamp(weight, 0.0, 0.99);
  if (smoothing_->value() != int(std::lround(smoothingWeight_ * 100))) smoothing_->setValue(int(std::lround(smoothingWeight_ * 100)));
  rebuildSmoothed();
}

void DashboardView::setJobProgress(int64_t step, int64_t total, const QString& phase, double etaSeconds) {
  jobProgress_ = true;
  jobStep_ = step, jobTotal_ = total, jobPhase_ = phase;
  const int value = total > 0 ? int(1000.0 * double(step) / double(total)) : 0;
  const QString format = QStringLiteral("%1  %2/%3  ETA %4").arg(phase).arg(step).arg(total).arg(formatEta(etaSeconds));
  // Ten calls a second: repaint the bar only when what it shows changed.
  if (progress_->value() != value) progress_->setValue(value);
  if (progress_->format() != format) progress_->setFormat(format);
}

void DashboardView::setJobEnded(const QString& status) {
  if (!jobProgress_) return;
  const bool completed = status == QLatin1String("completed");
  progress_->setValue(completed ? 1000 : (jobTotal_ > 0 ? int(1000.0 * double(jobStep_) / double(jobTotal_)) : 0));
  progress_->setFormat(completed ? tr("completed") : tr("%1 in %2 at %3/%4").arg(status, jobPhase_).arg(jobStep_).arg(jobTotal_));
}

QString DashboardView::progressText() const { return progress_->text(); }

void DashboardView::setJobRunning(bool running) {
  jobRunning_ = running;
  pause_->setVisible(jobRunning_ && showsJob_);
  if (!running) setPaused(false);
}

void DashboardView::setShowsJob(bool shows) {
  showsJob_ = shows;
  pause_->setVisible(jobRunning_ && showsJob_);
  refreshStatus();
}

void DashboardView::setPaused(bool paused) {
  paused_ = paused;
  pause_->setText(paused ? tr("Resume") : tr("Pause"));
  refreshStatus();
}

void DashboardView::refreshStatus() {
  QString text = fileStatus_;
  if (paused_ && showsJob_) text = tr("paused (the job waits at its next step; resume or cancel)");
  if (status_->text() != text) status_->setText(text);
}

void DashboardView::attachFollower(RunFollower* follower) {
  connect(follower, &RunFollower::updated, this, &DashboardView::applyUpdate);
  connect(follower, &RunFollower::snapshotLoaded, this, &DashboardView::showSnapshotAt);
  connect(this, &DashboardView::snapshotRequested, follower, &RunFollower::loadSnapshot);
}

void DashboardView::applyUpdate(const RunUpdate& u) {
  if (u.reset) {
    const bool keepProgress = jobProgress_;
    clear();
    jobProgress_ = keepProgress;
    path_ = u.path;
    // A resumed run: its first file, and where it went on (each continuation's S).
    const QString first = u.chain.isEmpty() ? u.path : u.chain.front();
    QString title = QStringLiteral("<b>%1</b> &nbsp; %2")
                        .arg(u.kind.toHtmlEscaped(), QFileInfo(first).absoluteFilePath().toHtmlEscaped());
    QStringList resumes;
    for (qsizetype i = 1; i < u.chain.size(); ++i)
      resumes << QString::number(runs::resumedAfter(u.chain[i].toStdString()));
    if (!resumes.isEmpty()) title += tr(" &nbsp; (resumed after step %1)").arg(resumes.join(QStringLiteral(", ")));
    title_->setText(title);
    title_->setToolTip(u.chain.join(QLatin1Char('\n')));
    pairs_ = u.snapshotPairs;
    tokens_ = u.probeTokens;
    curvePairs_ = u.curvePairs;
    curveLabels_ = u.curveLabels;
  }
  plannedSteps_ = u.plannedSteps;
  lastStep_ = std::max(lastStep_, u.lastStep);
  fileStatus_ = u.statusMessage.isEmpty() ? u.status : QStringLiteral("%1: %2").arg(u.status, u.statusMessage);
  refreshStatus();
  if (!jobProgress_ && plannedSteps_ > 0) {
    progress_->setValue(int(1000.0 * double(std::min(lastStep_, plannedSteps_)) / double(plannedSteps_)));
    progress_->setFormat(QStringLiteral("step %1/%2").arg(lastStep_).arg(plannedSteps_));
  }
  // Traces grow by appending only the new rows.
  auto series = [&](const char* name) -> const runs::ScalarSeries* {
    const auto it = u.newScalars.find(name);
    return it == u.newScalars.end() ? nullptr : &it->second;
  };
  auto toQt = [](const auto& v) { return QVector<double>(v.begin(), v.end()); };
  if (const auto* loss = series("loss")) appendLoss(*loss);
  if (const auto* kl = series("val_kl"); kl && !kl->values.empty()) showHeldOutTeacherKl();
  if (const auto* val = series(heldOutTeacherKl_ ? "val_kl" : "val_loss"))
    loss_->appendPoints(2, toQt(val->steps), toQt(val->values));
  if (const auto* lr = series("lr")) lr_->appendPoints(0, toQt(lr->steps), toQt(lr->values));

  for (const auto& [name, table] : u.latestTables) tables_[name] = table;
  if (u.reset || !u.latestTables.empty()) syncTableChoices();
  if (u.latestSnapshot) snapshot_ = u.latestSnapshot;
  if (u.latestCurves) curves_ = u.latestCurves;
  if (!u.newSnapshotSteps.empty()) {
    snapshotSteps_.insert(snapshotSteps_.end(), u.newSnapshotSteps.begin(), u.newSnapshotSteps.end());
    const QSignalBlocker block(stepSlider_);
    stepSlider_->setRange(0, int(snapshotSteps_.size()) - 1);
    if (followLatest_) stepSlider_->setValue(stepSlider_->maximum());
    stepSlider_->setEnabled(snapshotSteps_.size() > 1);
  }
  updateStepLabel();
  // While the user looks at an earlier step, new rows are kept but not shown.
  // A hidden dashboard (another tab) only notes that it is stale and redraws when shown.
  if (followLatest_ && !u.latestTables.empty()) {
    if (isVisible()) refreshGrid();
    else gridStale_ = true;
  }
  if (followLatest_ && (u.latestSnapshot || u.latestCurves)) {
    if (isVisible()) refreshMaps();
    else mapsStale_ = true;
  }
  for (const auto& line : u.newLogLines) log_->appendPlainText(line);
  if (u.reset) updateEmptyTexts();
}

void DashboardView::showEvent(QShowEvent* event) {
  QWidget::showEvent(event);
  if (gridStale_) refreshGrid();
  if (mapsStale_) refreshMaps();
}

void DashboardView::appendLoss(const runs::ScalarSeries& series) {
  // Raw values and the smoothed trace continue from where they were: O(new rows).
  QVector<double> xs, ys, smooth;
  for (size_t i = 0; i < series.steps.size(); ++i) {
    const double y = series.values[i];
    ema_ = smoothedLoss(ema_, y);
    lossSteps_.push_back(double(series.steps[i]));
    lossValues_.push_back(y);
    xs.push_back(double(series.steps[i]));
    ys.push_back(y);
    smooth.push_back(ema_);
  }
  loss_->appendPoints(0, xs, ys);
  loss_->appendPoints(1, xs, smooth);
}

double DashboardView::smoothedLoss(double average, double loss) const {
  // A non-finite loss (a diverged step) is shown raw but left out of the running average, which
  // would otherwise stay NaN or Inf for the rest of the run.
  if (!std::isfinite(loss)) return average;
  return std::isnan(average) ? loss : smoothingWeight_ * average + (1 - smoothingWeight_) * loss;
}

void DashboardView::rebuildSmoothed() {
  // A new smoothing weight: the whole smoothed trace again (the raw one is unchanged).
  QVector<double> smooth(lossValues_.size());
  for (int i = 0; i < lossValues_.size(); ++i) {
    ema_ = smoothedLoss(i == 0 ? kNoAverage : ema_, lossValues_[i]);
    smooth[i] = ema_;
  }
  loss_->setSeriesData(1, lossSteps_, smooth);
}

const std::map<std::string, runs::TableSeries>& DashboardView::shownTables() const {
  return followLatest_ ? tables_ : pickedTables_;
}

const std::optional<runs::Snapshot>& DashboardView::shownSnapshot() const {
  return followLatest_ ? snapshot_ : pickedSnapshot_;
}

const std::optional<runs::CurveSet>& DashboardView::shownCurves() const {
  return followLatest_ ? curves_ : pickedCurves_;
}

int64_t DashboardView::shownSnapshotStep() const {
  return shownSnapshot() ? shownSnapshot()->step : -1;
}

void DashboardView::refreshGrid() {
  gridStale_ = false;
  const auto name = tableChoice_->currentData().toString().toStdString();
  const auto it = shownTables().find(name);
  if (it == shownTables().end() || it->second.size() == 0) {
    if (grid_->layers() > 0) grid_->clear();  // not the numbers of the table chosen before
    updateEmptyTexts();
    return;
  }
  const auto& t = it->second;
  if (grid_->layers() != t.layers || grid_->heads() != t.heads) grid_->setGridSize(t.layers, t.heads);
  for (const auto& kind : kTables)
    if (name == kind.name) grid_->setSummaryHigherIsBetter(kind.higherIsBetter);
  grid_->setSummaryName(tableChoice_->currentText());
  const size_t row = t.size() - 1;
  for (int l = 0; l < t.layers; ++l)
    for (int h = 0; h < t.heads; ++h) grid_->setSummary(l, h, t.at(row, l, h));
  if (!pairs_.empty()) {
    const auto& p = pairs_[static_cast<size_t>(pairIndex_)];
    grid_->setSelected(p.layer, p.head);
  }
}

void DashboardView::showPair(int layer, int head) {
  for (size_t i = 0; i < pairs_.size(); ++i) {
    if (pairs_[i].layer == layer && pairs_[i].head == head) {
      pairIndex_ = int(i);
      grid_->setSelected(layer, head);
      refreshMaps();
      return;
    }
  }
  mapsTitle_->setText(tr("Layer %1, head %2 has no snapshots in this run (snapshot pairs are set in the config)").arg(layer).arg(head));
}

void DashboardView::onStepSlider(int index) {
  // Only the user moves the slider with signals on (updates move it under a QSignalBlocker).
  followLatest_ = index >= stepSlider_->maximum();
  updateStepLabel();
  if (followLatest_) {
    refreshGrid();
    refreshMaps();
    return;
  }
  // One request in flight at a time; the answer asks again if the slider moved meanwhile. A
  // request unanswered for a second (the read failed) no longer holds the next one back.
  if (requestedIndex_ < 0 || requestClock_.elapsed() > 1000) {
    requestedIndex_ = index;
    requestClock_.start();
    Q_EMIT snapshotRequested(index);
  }
}

void DashboardView::showSnapshotAt(const SnapshotAtStep& loaded) {
  if (loaded.path != path_) return;  // an answer about a file no longer shown
  requestedIndex_ = -1;
  const int wanted = stepSlider_->value();
  if (followLatest_) return;
  if (loaded.index != wanted) {
    requestedIndex_ = wanted;
    requestClock_.start();
    Q_EMIT snapshotRequested(wanted);
    return;
  }
  pickedIndex_ = loaded.index;
  pickedSnapshot_ = loaded.snapshot;
  pickedTables_ = loaded.tables;
  pickedCurves_ = loaded.curves;
  updateStepLabel();
  refreshGrid();
  refreshMaps();
}

QString DashboardView::mapsTitleText() const {
  return mapsTitle_->text();
}

void DashboardView::updateStepLabel() {
  if (snapshotSteps_.empty()) {
    stepLabel_->setText(tr("no snapshots yet"));
    return;
  }
  const size_t index = std::min(size_t(stepSlider_->value()), snapshotSteps_.size() - 1);
  stepLabel_->setText(followLatest_ ? tr("step %1 (latest of %2)").arg(snapshotSteps_[index]).arg(snapshotSteps_.size())
                                    : tr("step %1 (%2 of %3)").arg(snapshotSteps_[index]).arg(index + 1).arg(snapshotSteps_.size()));
}

void DashboardView::refreshMaps() {
  mapsStale_ = false;
  refreshCurves();
  const auto& snapshot = shownSnapshot();
  if (!snapshot || pairs_.empty()) return;
  const int s = snapshot->size;
  const size_t cell = size_t(s) * size_t(s);
  const size_t offset = size_t(pairIndex_) * cell;
  if (snapshot->softmax.size() < offset + cell) return;
  const auto& p = pairs_[static_cast<size_t>(pairIndex_)];
  mapsTitle_->setText(tr("Layer %1, head %2 on the probe text, step %3").arg(p.layer).arg(p.head).arg(snapshot->step));
  std::vector<float> softmax(snapshot->softmax.begin() + long(offset), snapshot->softmax.begin() + long(offset + cell));
  std::vector<float> linear(snapshot->linear.begin() + long(offset), snapshot->linear.begin() + long(offset + cell));
  QStringList labels;
  if (tokens_.size() == s) labels = tokens_;  // pooled maps (S < T) keep no per-token labels
  // The grid's thumbnails: each snapshot pair's linear map (softmax where there is none).
  for (size_t i = 0; i < pairs_.size() && (i + 1) * cell <= snapshot->softmax.size(); ++i) {
    const auto begin = long(i * cell), end = long((i + 1) * cell);
    std::vector<float> thumb(snapshot->linear.begin() + begin, snapshot->linear.begin() + end);
    if (!thumb.empty() && std::isnan(thumb.front()))
      thumb.assign(snapshot->softmax.begin() + begin, snapshot->softmax.begin() + end);
    maskAboveDiagonalIfCausal(s, thumb);
    if (pairs_[i].layer < grid_->layers() && pairs_[i].head < grid_->heads())
      grid_->setCell(pairs_[i].layer, pairs_[i].head, s, s, thumb, grid_->summary(pairs_[i].layer, pairs_[i].head));
  }
  maskAboveDiagonalIfCausal(s, softmax);  // files pooled before the upper blocks were NaN
  maskAboveDiagonalIfCausal(s, linear);
  const auto [lo, hi] = sharedWeightRange(softmax, linear);
  softmaxMap_->setMatrix(s, s, std::move(softmax));
  // A model trained with softmax attention stores no linear map (NaN): say so instead of a blank.
  noLinearMap_ = std::none_of(linear.begin(), linear.end(), [](float v) { return std::isfinite(v); });
  if (noLinearMap_) {
    linearMap_->clear();
    updateEmptyTexts();
  } else {
    linearMap_->setMatrix(s, s, std::move(linear));
  }
  for (auto* map : {softmaxMap_, linearMap_}) {
    if (hi > lo)
      map->setValueRange(lo, hi);
    else
      map->setAutoValueRange();
  }
  softmaxMap_->setTokenLabels(labels, labels);
  linearMap_->setTokenLabels(labels, labels);
}

void DashboardView::refreshCurves() {
  // The chosen head's stored curves (teacher and student on the probe text) at the shown step.
  mono_->clear();
  const auto& set = shownCurves();
  if (!set || pairs_.empty()) return;
  const auto& p = pairs_[static_cast<size_t>(pairIndex_)];
  for (size_t i = 0; i < curvePairs_.size() && i < set->curves.size(); ++i) {
    if (curvePairs_[i].layer != p.layer || curvePairs_[i].head != p.head) continue;
    const auto& c = set->curves[i];
    if (std::none_of(c.mean.begin(), c.mean.end(), [](double v) { return std::isfinite(v); })) continue;
    const QString label = i < size_t(curveLabels_.size()) ? curveLabels_[int(i)] : tr("curve %1").arg(i);
    const bool teacher = label == QStringLiteral("softmax");
    const int index = mono_->addSeries(label, QVector<double>(c.binCenters.begin(), c.binCenters.end()),
                                       QVector<double>(c.mean.begin(), c.mean.end()),
                                       teacher ? QVector<double>(c.stddev.begin(), c.stddev.end()) : QVector<double>(),
                                       teacher ? QColor(60, 60, 60) : widgets::seriesPaletteColor(0));
    mono_->setSeriesStyle(index, widgets::CurvePlot::SeriesStyle::LineAndPoints, teacher ? 1.5 : 2.0);
  }
  mono_->setTitle(tr("Monotonicity, layer %1 head %2, step %3").arg(p.layer).arg(p.head).arg(set->step));
}

}  // namespace hh::gui
