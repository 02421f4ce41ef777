// HeatmapView: QCustomPlot colour map + colour scale, block-reduced display of large matrices,
// token tick labels, hover readout, clamped zoom and pan (see heatmap_view.h).
#include "widgets/heatmap_view.h"

#include <QEvent>
#include <QLabel>
#include <QMouseEvent>
#include <QTimer>
#include <QVBoxLayout>

#include "widgets/qcp.h"

#include <algorithm>
#include <cmath>

#include "widgets/colormap.h"
#include "widgets/heatmap_axes.h"
#include "widgets/plot_note.h"
#include "widgets/token_axis_ticker.h"

namespace hh::widgets {
namespace {

constexpr double kZoomFactor = 0.85;  // per wheel step
constexpr int kReadoutOffset = 14;    // px between the cursor and the readout box
constexpr int kRebuildDelayMs = 50;   // after the last zoom / pan / resize step

// The values of a view with no matrix (one shared empty vector).
SharedValues noValues() {
  static const SharedValues empty = std::make_shared<const std::vector<float>>();
  return empty;
}

QString formatNumber(double v) {
  if (std::isnan(v)) return QStringLiteral("masked");
  return QString::number(v, 'g', 4);
}

}  // namespace

HeatmapView::HeatmapView(QWidget* parent) : QWidget(parent), values_(noValues()), scores_(noValues()) {
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  plot_ = new QCustomPlot(this);
  layout->addWidget(plot_);
  plot_->setInteractions(QCP::iRangeDrag | QCP::iRangeZoom);
  plot_->axisRect()->setRangeZoomFactor(kZoomFactor);
  plot_->setMouseTracking(true);
  plot_->installEventFilter(this);

  QFont tickFont = font();
  tickFont.setPointSizeF(std::max(6.0, tickFont.pointSizeF() * 0.85));
  xTicker_.reset(new TokenAxisTicker);
  yTicker_.reset(new TokenAxisTicker);
  plot_->xAxis->setTicker(xTicker_);
  plot_->yAxis->setTicker(yTicker_);
  for (QCPAxis* axis : {plot_->xAxis, plot_->yAxis}) {
    axis->setTickLabelFont(tickFont);
    axis->grid()->setVisible(false);
    axis->setSubTicks(false);
  }
  plot_->yAxis->setRangeReversed(true);  // row 0 (first query) at the top
  plot_->xAxis->setLabel(QStringLiteral("key"));
  plot_->yAxis->setLabel(QStringLiteral("query"));

  colorMap_ = new QCPColorMap(plot_->xAxis, plot_->yAxis);
  colorMap_->setVisible(false);  // its default data is a 10 x 10 block of zeros: shown once there is a matrix
  colorMap_->setInterpolate(false);
  colorMap_->setTightBoundary(false);
  colorScale_ = new QCPColorScale(plot_);
  plot_->plotLayout()->addElement(0, 1, colorScale_);
  colorScale_->setType(QCPAxis::atRight);
  colorScale_->setBarWidth(12);
  colorScale_->axis()->setTickLabelFont(tickFont);
  colorMap_->setColorScale(colorScale_);
  auto* margins = new QCPMarginGroup(plot_);
  plot_->axisRect()->setMarginGroup(QCP::msTop | QCP::msBottom, margins);
  colorScale_->setMarginGroup(QCP::msTop | QCP::msBottom, margins);
  setValueLabel(QStringLiteral("weight"));

  readout_ = new QLabel(plot_);
  readout_->setAttribute(Qt::WA_TransparentForMouseEvents);
  readout_->setStyleSheet(QStringLiteral(
      "QLabel { background: rgba(255,255,255,235); color: #202225; border: 1px solid #9aa0a6;"
      " border-radius: 3px; padding: 3px 5px; }"));
  readout_->hide();

  rebuildTimer_ = new QTimer(this);
  rebuildTimer_->setSingleShot(true);
  rebuildTimer_->setInterval(kRebuildDelayMs);
  connect(rebuildTimer_, &QTimer::timeout, this, [this] { rebuildDisplay(false); });

  connect(plot_, &QCustomPlot::beforeReplot, this, &HeatmapView::updateTickDensity);
  // The axis rect gets its final size during a replot: re-plan the display when it changed, and
  // replot once more when the tick labels were fitted to another size (a view laid out while
  // hidden fitted them to a few pixels: one label per axis until the next replot).
  connect(plot_, &QCustomPlot::afterReplot, this, [this] {
    const QSize size = plot_->axisRect()->rect().size();
    if (!values().empty() && size != plannedFor_) scheduleRebuild();
    if (size != tickedFor_) requestReplot();
  });
  connect(plot_, &QCustomPlot::mouseMove, this, &HeatmapView::onMouseMove);
  connect(plot_, &QCustomPlot::mouseDoubleClick, this, [this](QMouseEvent*) { resetView(); });
  connect(plot_->xAxis, qOverload<const QCPRange&>(&QCPAxis::rangeChanged), this, &HeatmapView::clampRanges);
  connect(plot_->yAxis, qOverload<const QCPRange&>(&QCPAxis::rangeChanged), this, &HeatmapView::clampRanges);

  applyColorRange();
  resetView();
}

HeatmapView::~HeatmapView() = default;

bool HeatmapView::setMatrix(int rows, int cols, std::vector<float> values) {
  return setSharedMatrix(rows, cols, std::make_shared<const std::vector<float>>(std::move(values)));
}

bool HeatmapView::setSharedMatrix(int rows, int cols, SharedValues shared) {
  if (rows <= 0 || cols <= 0 || !shared || shared->size() != std::size_t(rows) * std::size_t(cols)) {
    clear();
    return false;
  }
  rows_ = rows;
  cols_ = cols;
  values_ = std::move(shared);
  if (scores().size() != values().size()) scores_ = noValues();
  const FiniteRange range = finiteRange(values().data(), values().size());
  dataLo_ = range.valid ? range.lo : 0.0;
  dataHi_ = range.valid ? range.hi : 1.0;
  xTicker_->setCells(cols_, keyLabels_);
  yTicker_->setCells(rows_, queryLabels_);
  resetView();
  rebuildDisplay(true);
  applyColorRange();
  return true;
}

bool HeatmapView::setScores(int rows, int cols, std::vector<float> scores) {
  return setSharedScores(rows, cols, std::make_shared<const std::vector<float>>(std::move(scores)));
}

bool HeatmapView::setSharedScores(int rows, int cols, SharedValues shared) {
  if (rows != rows_ || cols != cols_ || !shared || shared->size() != values().size()) return false;
  scores_ = std::move(shared);
  return true;
}

void HeatmapView::clearScores() {
  scores_ = noValues();
}

void HeatmapView::setTokenLabels(QStringList queries, QStringList keys) {
  queryLabels_ = std::move(queries);
  keyLabels_ = std::move(keys);
  xTicker_->setCells(cols_, keyLabels_);
  yTicker_->setCells(rows_, queryLabels_);
  // Token labels read better vertical along the key axis; plain indices stay horizontal.
  plot_->xAxis->setTickLabelRotation(keyLabels_.isEmpty() ? 0.0 : 90.0);
  requestReplot();
}

void HeatmapView::setColorMode(ColorMode mode) {
  if (mode == mode_) return;
  mode_ = mode;
  rebuildDisplay(true);
  applyColorRange();
}

void HeatmapView::setBlockReduce(BlockReduce reduce) {
  reduce_ = reduce;
  rebuildDisplay(true);
}

void HeatmapView::setValueRange(double lo, double hi) {
  if (!(hi > lo)) return;
  fixedRange_ = std::make_pair(lo, hi);
  applyColorRange();
}

void HeatmapView::setAutoValueRange() {
  fixedRange_.reset();
  applyColorRange();
}

QString HeatmapView::title() const { return title_ ? title_->text() : QString(); }

void HeatmapView::setTitle(const QString& title) {
  if (title.isEmpty()) {
    if (title_) {
      plot_->plotLayout()->remove(title_);
      plot_->plotLayout()->simplify();
      title_ = nullptr;
    }
  } else if (!title_) {
    QFont titleFont = font();
    titleFont.setBold(true);
    plot_->plotLayout()->insertRow(0);
    title_ = new QCPTextElement(plot_, title, titleFont);
    plot_->plotLayout()->addElement(0, 0, title_);
  } else {
    title_->setText(title);
  }
  requestReplot();
}

void HeatmapView::setValueLabel(const QString& label) {
  valueLabel_ = label;
  colorScale_->axis()->setLabel(label);
  requestReplot();
}

void HeatmapView::setColorScaleVisible(bool visible) {
  // Taken out of the layout (not only hidden) so that the map gets its width; the scale object
  // stays alive and keeps the colour range.
  if (visible == colorScaleInLayout()) return;
  if (visible) {
    plot_->plotLayout()->addElement(mapRow(), 1, colorScale_);  // beside the map, below a title
  } else {
    plot_->plotLayout()->take(colorScale_);
    plot_->plotLayout()->simplify();
  }
  colorScale_->setVisible(visible && !emptyTextShown());
  requestReplot();
}

void HeatmapView::setEmptyText(const QString& text) {
  if (!emptyText_) emptyText_ = addCentredNote(plot_);
  emptyTextValue_ = text;
  emptyText_->setText(text);
  updateEmptyState();
}

bool HeatmapView::colorScaleInLayout() const { return plot_->plotLayout()->elements(false).contains(colorScale_); }

int HeatmapView::mapRow() const {
  QCPLayoutGrid* grid = plot_->plotLayout();
  for (int r = 0; r < grid->rowCount(); ++r)
    if (grid->hasElement(r, 0) && grid->element(r, 0) == plot_->axisRect()) return r;
  return 0;
}

bool HeatmapView::emptyTextShown() const { return emptyText_ && emptyText_->visible(); }

void HeatmapView::updateEmptyState() {
  const bool empty = values().empty() && !emptyTextValue_.isEmpty();
  if (emptyText_) emptyText_->setVisible(empty);
  colorScale_->setVisible(colorScaleInLayout() && !empty);
  requestReplot();
}

void HeatmapView::setAxisTitles(const QString& keys, const QString& queries) {
  plot_->xAxis->setLabel(keys);
  plot_->yAxis->setLabel(queries);
  requestReplot();
}

void HeatmapView::setReadoutNames(const QString& row, const QString& col) {
  rowName_ = row;
  colName_ = col;
}

void HeatmapView::clear() {
  rows_ = cols_ = 0;
  values_ = noValues();
  scores_ = noValues();
  display_ = DownsampledMatrix{};
  rebuildTimer_->stop();
  xTicker_->setCells(0, keyLabels_);
  yTicker_->setCells(0, queryLabels_);
  colorMap_->data()->clear();
  colorMap_->setVisible(false);  // (see rebuildDisplay)
  updateEmptyState();
  hideReadout();
  resetView();
  requestReplot();
}

QSize HeatmapView::displaySize() const { return QSize(display_.cols, display_.rows); }

QSize HeatmapView::displayBlockSize() const { return QSize(display_.blockCols, display_.blockRows); }

std::pair<double, double> HeatmapView::valueRange() const {
  const QCPRange r = colorScale_->dataRange();
  return {r.lower, r.upper};
}

float HeatmapView::valueAt(int row, int col) const {
  if (row < 0 || col < 0 || row >= rows_ || col >= cols_) return std::nanf("");
  return values()[std::size_t(row) * std::size_t(cols_) + std::size_t(col)];
}

std::optional<float> HeatmapView::scoreAt(int row, int col) const {
  if (scores().empty() || row < 0 || col < 0 || row >= rows_ || col >= cols_) return std::nullopt;
  return scores()[std::size_t(row) * std::size_t(cols_) + std::size_t(col)];
}

std::optional<QPoint> HeatmapView::cellAt(QPoint widgetPos) const {
  if (rows_ == 0 || cols_ == 0) return std::nullopt;
  const QPoint p = plot_->mapFrom(this, widgetPos);
  if (!plot_->axisRect()->rect().contains(p)) return std::nullopt;
  const double x = plot_->xAxis->pixelToCoord(p.x());
  const double y = plot_->yAxis->pixelToCoord(p.y());
  const int col = int(std::floor(x + 0.5)), row = int(std::floor(y + 0.5));
  if (row < 0 || col < 0 || row >= rows_ || col >= cols_) return std::nullopt;
  return QPoint(col, row);
}

QPointF HeatmapView::cellCenter(int row, int col) const {
  const QPointF inPlot(plot_->xAxis->coordToPixel(col), plot_->yAxis->coordToPixel(row));
  return inPlot + QPointF(plot_->pos());
}

QString HeatmapView::readoutText(int row, int col) const {
  auto token = [](const QStringList& labels, int i) {
    if (i < 0 || i >= labels.size()) return QString();
    return QStringLiteral("  \u201c%1\u201d").arg(labels.at(i).toHtmlEscaped());
  };
  // One pass (multi-argument arg): a label holding "%1" is not substituted again.
  QString text = QStringLiteral("%1 %2%3<br>%4 %5%6<br>%7 <b>%8</b>")
                     .arg(rowName_.toHtmlEscaped(), QString::number(row), token(queryLabels_, row),
                          colName_.toHtmlEscaped(), QString::number(col), token(keyLabels_, col),
                          valueLabel_.isEmpty() ? QStringLiteral("value") : valueLabel_.toHtmlEscaped(),
                          formatNumber(valueAt(row, col)));
  if (auto score = scoreAt(row, col)) text += QStringLiteral("<br>q\u00b7k/\u221ad %1").arg(formatNumber(*score));
  return text;
}

void HeatmapView::resetView() {
  clamping_ = true;
  plot_->xAxis->setRange(-0.5, std::max(cols_, 1) - 0.5);
  plot_->yAxis->setRange(-0.5, std::max(rows_, 1) - 0.5);
  clamping_ = false;
  requestReplot();
}

void HeatmapView::replotNow() {
  if (rebuildTimer_->isActive()) rebuildDisplay(false);
  plot_->replot(QCustomPlot::rpImmediateRefresh);
  if (rebuildTimer_->isActive()) {  // the layout changed the axis rect: draw at the new plan
    rebuildDisplay(false);
    plot_->replot(QCustomPlot::rpImmediateRefresh);
  }
}

bool HeatmapView::eventFilter(QObject* watched, QEvent* event) {
  if (watched == plot_ && event->type() == QEvent::Leave) {
    hideReadout();
    Q_EMIT hoverLeft();
  }
  return QWidget::eventFilter(watched, event);
}

BlockReduce HeatmapView::currentReduce() const {
  return reduce_.value_or(mode_ == ColorMode::Sequential ? BlockReduce::Max : BlockReduce::AbsMax);
}

void HeatmapView::scheduleRebuild() {
  if (!values().empty() && !rebuildTimer_->isActive()) rebuildTimer_->start();
}

void HeatmapView::rebuildDisplay(bool force) {
  rebuildTimer_->stop();
  QCPColorMapData* data = colorMap_->data();
  // QCustomPlot draws a cleared colour map as one block of the lowest colour: hide it instead.
  colorMap_->setVisible(!values().empty());
  updateEmptyState();
  if (values().empty()) {
    data->clear();
    return;
  }
  const QSize axisRect = plot_->axisRect()->rect().size();
  plannedFor_ = axisRect;
  const AxisPlan px = planAxis(plot_->xAxis->range(), cols_, cellBudget(axisRect.width(), kMaxDisplayCells));
  const AxisPlan py = planAxis(plot_->yAxis->range(), rows_, cellBudget(axisRect.height(), kMaxDisplayCells));
  const BlockReduce reduce = currentReduce();
  const bool same = px == AxisPlan{displayRegion_.col0, displayRegion_.cols, display_.blockCols} &&
                    py == AxisPlan{displayRegion_.row0, displayRegion_.rows, display_.blockRows} &&
                    reduce == displayReduce_ && !display_.values.empty();
  if (same && !force) return;

  display_ = downsampleRegion(rows_, cols_, values().data(), MatrixRegion{py.start, px.start, py.span, px.span},
                              py.block, px.block, reduce);
  displayReduce_ = reduce;
  displayRegion_ = MatrixRegion{py.start, px.start, py.span, px.span};
  data->setSize(std::max(display_.cols, 2), std::max(display_.rows, 2));
  data->setRange(centreRange(display_.col0, display_.cols, display_.blockCols),
                 centreRange(display_.row0, display_.rows, display_.blockRows));
  fillColorMap();
}

void HeatmapView::fillColorMap() {
  // QCustomPlot turns a value into a colour index with int(): +Inf, or a value far outside the
  // colour range, overflows to the lowest colour. Each cell is clamped to the range first, so
  // +Inf is drawn in the top colour and -Inf in the bottom one; NaN stays the masked grey.
  QCPColorMapData* data = colorMap_->data();
  if (display_.values.empty()) return;
  const QCPRange range = colorMap_->dataRange();
  const int keyCells = data->keySize(), valueCells = data->valueSize();
  for (int r = 0; r < valueCells; ++r) {
    const int sr = std::min(r, display_.rows - 1);  // duplicates the single row, if one
    const float* src = display_.values.data() + std::size_t(sr) * std::size_t(display_.cols);
    for (int c = 0; c < keyCells; ++c) {
      const double v = src[std::min(c, display_.cols - 1)];
      data->setCell(c, r, std::isnan(v) ? v : std::clamp(v, range.lower, range.upper));
    }
  }
  requestReplot();
}

void HeatmapView::applyColorRange() {
  double lo = dataLo_, hi = dataHi_;
  if (fixedRange_) {
    std::tie(lo, hi) = *fixedRange_;
  } else if (mode_ == ColorMode::Diverging) {
    const double m = std::max(std::fabs(lo), std::fabs(hi));
    lo = m > 0.0 ? -m : -1.0;
    hi = m > 0.0 ? m : 1.0;
  } else if (!(hi > lo)) {
    lo -= 0.5;
    hi += 0.5;
  }
  const ColorMap& map = mode_ == ColorMode::Sequential ? ColorMap::viridis() : ColorMap::diverging();
  colorScale_->setGradient(map.gradient());
  const bool rangeChanged = colorMap_->dataRange() != QCPRange(lo, hi);
  colorScale_->setDataRange(QCPRange(lo, hi));
  if (rangeChanged) fillColorMap();  // the cells are clamped to the range
  requestReplot();
}

void HeatmapView::updateTickDensity() {
  const QFontMetrics fm(plot_->xAxis->tickLabelFont());
  const QRect rect = plot_->axisRect()->rect();
  tickedFor_ = rect.size();
  const double xLabel = keyLabels_.isEmpty() ? fm.horizontalAdvance(QString::number(cols_)) + 14.0
                                             : fm.height() * 1.25;
  xTicker_->fitTickCount(rect.width(), xLabel);
  yTicker_->fitTickCount(rect.height(), fm.height() * 1.25);
}

void HeatmapView::clampRanges() {
  if (clamping_) return;
  clamping_ = true;
  // Keep the view inside the matrix: no wider than it, shifted back when panned past an edge.
  auto clampAxis = [](QCPAxis* axis, int cells) {
    const double lo = -0.5, hi = std::max(cells, 1) - 0.5;
    QCPRange r = axis->range();
    if (r.size() >= hi - lo) {
      r = QCPRange(lo, hi);
    } else if (r.lower < lo) {
      r = QCPRange(lo, lo + r.size());
    } else if (r.upper > hi) {
      r = QCPRange(hi - r.size(), hi);
    }
    if (r != axis->range()) axis->setRange(r);
  };
  clampAxis(plot_->xAxis, cols_);
  clampAxis(plot_->yAxis, rows_);
  clamping_ = false;
  scheduleRebuild();  // zoomed or panned: re-reduce the visible part once the user pauses
}

void HeatmapView::onMouseMove(QMouseEvent* event) {
  const QPoint plotPos = event->position().toPoint();
  const std::optional<QPoint> cell = cellAt(plot_->mapTo(this, plotPos));
  if (!cell) {
    hideReadout();
    return;
  }
  const int row = cell->y(), col = cell->x();
  showReadout(plotPos, readoutText(row, col));
  Q_EMIT cellHovered(row, col, double(valueAt(row, col)));
}

void HeatmapView::showReadout(QPoint plotPos, const QString& text) {
  readout_->setText(text);
  readout_->adjustSize();
  QPoint at = plotPos + QPoint(kReadoutOffset, kReadoutOffset);
  if (at.x() + readout_->width() > plot_->width()) at.setX(plotPos.x() - kReadoutOffset - readout_->width());
  if (at.y() + readout_->height() > plot_->height()) at.setY(plotPos.y() - kReadoutOffset - readout_->height());
  readout_->move(std::max(0, at.x()), std::max(0, at.y()));
  readout_->show();
  readout_->raise();
}

void HeatmapView::hideReadout() { readout_->hide(); }

void HeatmapView::requestReplot() { plot_->replot(QCustomPlot::rpQueuedReplot); }

}  // namespace hh::widgets
