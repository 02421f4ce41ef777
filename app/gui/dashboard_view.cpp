#include "app/gui/dashboard_view.h"

#include <QComboBox>
#include <QFileInfo>
#include <QGridLayout>
#include <QLabel>
#include <QPlainTextEdit>
#include <QProgressBar>
#include <QSlider>
#include <QSplitter>
#include <QVBoxLayout>

#include <cmath>

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
                                 {"monotonicity", "monotonicity (Spearman)", true}};

QString formatEta(double seconds) {
  if (!(seconds >= 0) || !std::isfinite(seconds)) return QStringLiteral("--");
  const int s = int(seconds);
  return s >= 3600 ? QStringLiteral("%1h%2m").arg(s / 3600).arg((s / 60) % 60, 2, 10, QLatin1Char('0'))
                   : QStringLiteral("%1m%2s").arg(s / 60).arg(s % 60, 2, 10, QLatin1Char('0'));
}

}  // namespace

DashboardView::DashboardView(QWidget* parent) : QWidget(parent) {
  title_ = new QLabel(tr("No run"), this);
  title_->setObjectName(QStringLiteral("dashboardTitle"));
  status_ = new QLabel(this);
  progress_ = new QProgressBar(this);
  progress_->setRange(0, 1000);
  progress_->setTextVisible(true);

  loss_ = new widgets::CurvePlot(this);
  loss_->setTitle(tr("Loss"));
  loss_->setAxisLabels(tr("step"), tr("loss"));
  lr_ = new widgets::CurvePlot(this);
  lr_->setTitle(tr("Learning rate"));
  lr_->setAxisLabels(tr("step"), tr("lr"));
  lr_->setLegendVisible(false);
  smoothing_ = new QSlider(Qt::Horizontal, this);
  smoothing_->setRange(0, 99);
  smoothing_->setValue(int(smoothingWeight_ * 100));
  smoothing_->setToolTip(tr("Exponential moving average of the loss (0 = raw)"));
  connect(smoothing_, &QSlider::valueChanged, this, [this](int v) { setSmoothing(v / 100.0); });

  tableChoice_ = new QComboBox(this);
  for (const auto& t : kTables) tableChoice_->addItem(tr(t.label), QString::fromLatin1(t.name));
  connect(tableChoice_, qOverload<int>(&QComboBox::currentIndexChanged), this, [this] { refreshGrid(); });
  grid_ = new widgets::HeadGrid(this);
  connect(grid_, &widgets::HeadGrid::headClicked, this, &DashboardView::showPair);

  softmaxMap_ = new widgets::HeatmapView(this);
  softmaxMap_->setTitle(tr("softmax"));
  softmaxMap_->setValueLabel(tr("weight"));
  linearMap_ = new widgets::HeatmapView(this);
  linearMap_->setTitle(tr("linear"));
  linearMap_->setValueLabel(tr("weight"));
  mapsTitle_ = new QLabel(tr("Attention on the probe text"), this);
  log_ = new QPlainTextEdit(this);
  log_->setReadOnly(true);
  log_->setMaximumBlockCount(2000);

  auto* header = new QGridLayout;
  header->addWidget(title_, 0, 0, 1, 2);
  header->addWidget(status_, 1, 0);
  header->addWidget(progress_, 1, 1);
  header->setColumnStretch(0, 2);
  header->setColumnStretch(1, 1);

  auto* curves = new QWidget(this);
  auto* curvesLayout = new QVBoxLayout(curves);
  curvesLayout->setContentsMargins(0, 0, 0, 0);
  curvesLayout->addWidget(loss_, 3);
  auto* smoothRow = new QHBoxLayout;
  smoothRow->addWidget(new QLabel(tr("smoothing"), this));
  smoothRow->addWidget(smoothing_);
  curvesLayout->addLayout(smoothRow);
  lr_->setMinimumHeight(130);
  curvesLayout->addWidget(lr_, 1);

  auto* heads = new QWidget(this);
  auto* headsLayout = new QVBoxLayout(heads);
  headsLayout->setContentsMargins(0, 0, 0, 0);
  headsLayout->addWidget(tableChoice_);
  headsLayout->addWidget(grid_, 1);

  auto* maps = new QWidget(this);
  auto* mapsLayout = new QGridLayout(maps);
  mapsLayout->setContentsMargins(0, 0, 0, 0);
  mapsLayout->addWidget(mapsTitle_, 0, 0, 1, 2);
  mapsLayout->addWidget(softmaxMap_, 1, 0);
  mapsLayout->addWidget(linearMap_, 1, 1);
  mapsLayout->setRowStretch(1, 1);
  mapsTitle_->setSizePolicy(QSizePolicy::Preferred, QSizePolicy::Fixed);

  auto* top = new QSplitter(Qt::Horizontal, this);
  top->addWidget(curves);
  top->addWidget(heads);
  top->setStretchFactor(0, 3);
  top->setStretchFactor(1, 2);
  auto* bottom = new QSplitter(Qt::Horizontal, this);
  bottom->addWidget(maps);
  bottom->addWidget(log_);
  bottom->setStretchFactor(0, 3);
  bottom->setStretchFactor(1, 2);
  auto* body = new QSplitter(Qt::Vertical, this);
  body->addWidget(top);
  body->addWidget(bottom);
  body->setStretchFactor(0, 1);
  body->setStretchFactor(1, 1);

  auto* layout = new QVBoxLayout(this);
  layout->addLayout(header);
  layout->addWidget(body, 1);
  clear();
}

void DashboardView::clear() {
  jobProgress_ = false;
  plannedSteps_ = lastStep_ = 0;
  lossSteps_.clear();
  lossValues_.clear();
  valSteps_.clear();
  valValues_.clear();
  lrSteps_.clear();
  lrValues_.clear();
  tables_.clear();
  snapshot_.reset();
  pairs_.clear();
  tokens_.clear();
  pairIndex_ = 0;
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
  log_->clear();
  progress_->setValue(0);
  progress_->setFormat(QStringLiteral("%p%"));
}

QString DashboardView::statusText() const {
  return status_->text();
}

void DashboardView::setSmoothing(double weight) {
  smoothingWeight_ = std::clamp(weight, 0.0, 0.99);
  if (smoothing_->value() != int(std::lround(smoothingWeight_ * 100))) smoothing_->setValue(int(std::lround(smoothingWeight_ * 100)));
  rebuildLoss();
}

void DashboardView::setJobProgress(int64_t step, int64_t total, const QString& phase, double etaSeconds) {
  jobProgress_ = true;
  progress_->setValue(total > 0 ? int(1000.0 * double(step) / double(total)) : 0);
  progress_->setFormat(QStringLiteral("%1  %2/%3  ETA %4").arg(phase).arg(step).arg(total).arg(formatEta(etaSeconds)));
}

void DashboardView::applyUpdate(const RunUpdate& u) {
  if (u.reset) {
    const bool keepProgress = jobProgress_;
    clear();
    jobProgress_ = keepProgress;
    title_->setText(QStringLiteral("<b>%1</b> &nbsp; %2").arg(u.kind.toHtmlEscaped(), QFileInfo(u.path).absoluteFilePath().toHtmlEscaped()));
    pairs_ = u.snapshotPairs;
    tokens_ = u.probeTokens;
  }
  plannedSteps_ = u.plannedSteps;
  lastStep_ = std::max(lastStep_, u.lastStep);
  status_->setText(u.statusMessage.isEmpty() ? u.status : QStringLiteral("%1: %2").arg(u.status, u.statusMessage));
  if (!jobProgress_ && plannedSteps_ > 0) {
    progress_->setValue(int(1000.0 * double(std::min(lastStep_, plannedSteps_)) / double(plannedSteps_)));
    progress_->setFormat(QStringLiteral("step %1/%2").arg(lastStep_).arg(plannedSteps_));
  }
  auto append = [&](const char* name, QVector<double>& xs, QVector<double>& ys) {
    const auto it = u.newScalars.find(name);
    if (it == u.newScalars.end()) return false;
    for (size_t i = 0; i < it->second.steps.size(); ++i) {
      xs.push_back(double(it->second.steps[i]));
      ys.push_back(it->second.values[i]);
    }
    return true;
  };
  const bool lossChanged = append("loss", lossSteps_, lossValues_) | append("val_loss", valSteps_, valValues_);
  if (lossChanged) rebuildLoss();
  if (append("lr", lrSteps_, lrValues_)) lr_->setSeriesData(0, lrSteps_, lrValues_);
  for (const auto& [name, table] : u.latestTables) tables_[name] = table;
  if (!u.latestTables.empty()) refreshGrid();
  if (u.latestSnapshot) {
    snapshot_ = u.latestSnapshot;
    refreshMaps();
  }
  for (const auto& line : u.newLogLines) log_->appendPlainText(line);
}

void DashboardView::rebuildLoss() {
  QVector<double> smooth(lossValues_.size());
  double ema = 0;
  for (int i = 0; i < lossValues_.size(); ++i) {
    ema = i == 0 ? lossValues_[i] : smoothingWeight_ * ema + (1 - smoothingWeight_) * lossValues_[i];
    smooth[i] = ema;
  }
  loss_->setSeriesData(0, lossSteps_, lossValues_);
  loss_->setSeriesData(1, lossSteps_, smooth);
  loss_->setSeriesData(2, valSteps_, valValues_);
}

void DashboardView::refreshGrid() {
  const auto name = tableChoice_->currentData().toString().toStdString();
  const auto it = tables_.find(name);
  if (it == tables_.end() || it->second.size() == 0) return;
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

void DashboardView::refreshMaps() {
  if (!snapshot_ || pairs_.empty()) return;
  const int s = snapshot_->size;
  const size_t cell = size_t(s) * size_t(s);
  const size_t offset = size_t(pairIndex_) * cell;
  if (snapshot_->softmax.size() < offset + cell) return;
  const auto& p = pairs_[static_cast<size_t>(pairIndex_)];
  mapsTitle_->setText(tr("Layer %1, head %2 on the probe text, step %3").arg(p.layer).arg(p.head).arg(snapshot_->step));
  std::vector<float> softmax(snapshot_->softmax.begin() + long(offset), snapshot_->softmax.begin() + long(offset + cell));
  std::vector<float> linear(snapshot_->linear.begin() + long(offset), snapshot_->linear.begin() + long(offset + cell));
  QStringList labels;
  if (tokens_.size() == s) labels = tokens_;  // pooled maps (S < T) keep no per-token labels
  // The grid's thumbnails: each snapshot pair's linear map (softmax where there is none).
  for (size_t i = 0; i < pairs_.size() && (i + 1) * cell <= snapshot_->softmax.size(); ++i) {
    const auto begin = long(i * cell), end = long((i + 1) * cell);
    std::vector<float> thumb(snapshot_->linear.begin() + begin, snapshot_->linear.begin() + end);
    if (!thumb.empty() && std::isnan(thumb.front()))
      thumb.assign(snapshot_->softmax.begin() + begin, snapshot_->softmax.begin() + end);
    if (pairs_[i].layer < grid_->layers() && pairs_[i].head < grid_->heads())
      grid_->setCell(pairs_[i].layer, pairs_[i].head, s, s, thumb, grid_->summary(pairs_[i].layer, pairs_[i].head));
  }
  softmaxMap_->setMatrix(s, s, std::move(softmax));
  linearMap_->setMatrix(s, s, std::move(linear));
  softmaxMap_->setTokenLabels(labels, labels);
  linearMap_->setTokenLabels(labels, labels);
}

}  // namespace hh::gui
