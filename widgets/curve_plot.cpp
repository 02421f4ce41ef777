// CurvePlot: QCustomPlot graphs with shaded ± spread bands and a coalescing replot timer
// (see curve_plot.h).
#include "widgets/curve_plot.h"

#include <QTimer>
#include <QVBoxLayout>

#include "widgets/qcp.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "widgets/plot_note.h"

namespace hh::widgets {
namespace {

constexpr int kBandAlpha = 50;  // of 255: the spread band's fill
// Okabe & Ito (2008), without black and yellow (too faint on white).
constexpr QRgb kPalette[] = {0xff0072b2, 0xffd55e00, 0xff009e73, 0xffcc79a7, 0xff56b4e9, 0xffe69f00};
constexpr int kPaletteSize = int(std::size(kPalette));

}  // namespace

QColor seriesPaletteColor(int i) {
  return QColor::fromRgb(kPalette[((i % kPaletteSize) + kPaletteSize) % kPaletteSize]);
}

CurvePlot::CurvePlot(QWidget* parent) : QWidget(parent) {
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  plot_ = new QCustomPlot(this);
  layout->addWidget(plot_);
  plot_->setInteractions(QCP::iRangeDrag | QCP::iRangeZoom);
  plot_->setPlottingHint(QCP::phFastPolylines, true);  // long traces (a loss): cheaper line joins
  plot_->legend->setVisible(true);
  QFont legendFont = font();
  legendFont.setPointSizeF(std::max(6.0, legendFont.pointSizeF() * 0.9));
  plot_->legend->setFont(legendFont);
  plot_->legend->setBrush(QColor(255, 255, 255, 220));
  plot_->legend->setBorderPen(QPen(QColor(0xb8, 0xbc, 0xc4)));
  plot_->axisRect()->insetLayout()->setInsetAlignment(0, Qt::AlignTop | Qt::AlignLeft);
  for (QCPAxis* axis : {plot_->xAxis, plot_->yAxis}) {
    axis->grid()->setPen(QPen(QColor(0xe3, 0xe5, 0xe8), 0, Qt::SolidLine));
    axis->grid()->setSubGridVisible(false);
  }

  replotTimer_ = new QTimer(this);
  replotTimer_->setSingleShot(true);
  replotTimer_->setInterval(kReplotDelayMs);
  connect(replotTimer_, &QTimer::timeout, this, &CurvePlot::onReplotTimer);
  // Any zoom or pan by the user stops automatic rescaling; a double-click brings it back.
  connect(plot_, &QCustomPlot::mousePress, this, [this](QMouseEvent*) { autoRescale_ = false; });
  connect(plot_, &QCustomPlot::mouseWheel, this, [this](QWheelEvent*) { autoRescale_ = false; });
  connect(plot_, &QCustomPlot::mouseDoubleClick, this, [this](QMouseEvent*) { rescaleAxes(); });
}

namespace {
// Past the palette's six colours, the next series of a colour differ by dash and marker: the
// first six solid with circles, the next six dashed with squares, then dotted with triangles.
Qt::PenStyle dashOf(int cycle) {
  static const Qt::PenStyle styles[] = {Qt::SolidLine, Qt::DashLine, Qt::DotLine};
  return styles[cycle % 3];
}
QCPScatterStyle::ScatterShape shapeOf(int cycle) {
  static const QCPScatterStyle::ScatterShape shapes[] = {QCPScatterStyle::ssCircle, QCPScatterStyle::ssSquare,
                                                         QCPScatterStyle::ssTriangle};
  return shapes[cycle % 3];
}
}  // namespace

int CurvePlot::addSeries(const QString& name, const QVector<double>& xs, const QVector<double>& ys,
                         const QVector<double>& spread, QColor color) {
  int cycle = 0;
  if (!color.isValid()) {
    cycle = paletteNext_ / kPaletteSize;
    color = seriesPaletteColor(paletteNext_++);
  }
  Series s;
  s.line = plot_->addGraph();
  s.line->setName(name);
  s.line->setPen(QPen(color, 2.0, dashOf(cycle)));
  s.line->setScatterStyle(QCPScatterStyle(shapeOf(cycle), color, color, 4));
  series_.append(s);
  const int index = int(series_.size()) - 1;
  setSeriesData(index, xs, ys, spread);
  return index;
}

void CurvePlot::setSeriesName(int index, const QString& name) {
  if (index < 0 || index >= series_.size()) return;
  series_[index].line->setName(name);
  scheduleReplot();
}

void CurvePlot::setSeriesDash(int index, Qt::PenStyle dash) {
  if (index < 0 || index >= series_.size()) return;
  QPen pen = series_[index].line->pen();
  pen.setStyle(dash);
  series_[index].line->setPen(pen);
  scheduleReplot();
}

void CurvePlot::setSeriesStyle(int index, SeriesStyle style, double width) {
  if (index < 0 || index >= series_.size()) return;
  QCPGraph* g = series_[index].line;
  const QColor color = g->pen().color();
  QPen pen = g->pen();  // keeps its dash
  pen.setWidthF(width);
  g->setPen(pen);
  g->setLineStyle(style == SeriesStyle::Points ? QCPGraph::lsNone : QCPGraph::lsLine);
  const auto shape = g->scatterStyle().shape() == QCPScatterStyle::ssNone ? QCPScatterStyle::ssCircle : g->scatterStyle().shape();
  g->setScatterStyle(style == SeriesStyle::Line ? QCPScatterStyle(QCPScatterStyle::ssNone)
                                                : QCPScatterStyle(shape, color, color, 5));
  scheduleReplot();
}

void CurvePlot::setSeriesData(int index, const QVector<double>& xs, const QVector<double>& ys,
                              const QVector<double>& spread) {
  if (index < 0 || index >= series_.size()) return;
  Series& s = series_[index];
  const int n = int(std::min(xs.size(), ys.size()));
  s.line->setData(xs.mid(0, n), ys.mid(0, n), /*alreadySorted=*/false);
  setBand(s, xs.mid(0, n), ys.mid(0, n), spread.size() == n ? spread : QVector<double>{});
  scheduleReplot();
}

void CurvePlot::setBand(Series& s, const QVector<double>& xs, const QVector<double>& ys,
                        const QVector<double>& spread) {
  if (spread.isEmpty() || xs.isEmpty()) {
    if (s.upper) plot_->removeGraph(s.upper);
    if (s.lower) plot_->removeGraph(s.lower);
    s.upper = s.lower = nullptr;
    return;
  }
  if (!s.upper) {
    QColor fill = s.line->pen().color();
    QColor edge = fill;
    edge.setAlpha(90);
    fill.setAlpha(kBandAlpha);
    s.lower = plot_->addGraph();
    s.upper = plot_->addGraph();
    for (QCPGraph* g : {s.lower, s.upper}) {
      g->setPen(QPen(edge, 1.0));
      g->removeFromLegend();
    }
    s.upper->setBrush(fill);
    s.upper->setChannelFillGraph(s.lower);
  }
  QVector<double> hi(xs.size()), lo(xs.size());
  for (int i = 0; i < xs.size(); ++i) {
    hi[i] = ys[i] + spread[i];
    lo[i] = ys[i] - spread[i];
  }
  s.upper->setData(xs, hi, false);
  s.lower->setData(xs, lo, false);
}

void CurvePlot::appendPoint(int index, double x, double y) {
  if (index < 0 || index >= series_.size()) return;
  series_[index].line->addData(x, y);
  scheduleReplot();
}

void CurvePlot::appendPoints(int index, const QVector<double>& xs, const QVector<double>& ys) {
  if (index < 0 || index >= series_.size()) return;
  const int n = int(std::min(xs.size(), ys.size()));
  if (n == 0) return;
  // Sorted input that goes after the data held appends in place; anything else is merged (sorted).
  QCPGraph* g = series_[index].line;
  bool sorted = g->dataCount() == 0 || xs[0] >= (g->data()->constEnd() - 1)->key;
  for (int i = 1; i < n && sorted; ++i) sorted = xs[i] >= xs[i - 1];
  g->addData(xs.mid(0, n), ys.mid(0, n), sorted);
  scheduleReplot();
}

void CurvePlot::clear() {
  plot_->clearGraphs();
  series_.clear();
  paletteNext_ = 0;
  autoRescale_ = true;
  scheduleReplot();
}

void CurvePlot::setTitle(const QString& title) {
  if (!title_) {
    QFont titleFont = font();
    titleFont.setBold(true);
    plot_->plotLayout()->insertRow(0);
    title_ = new QCPTextElement(plot_, title, titleFont);
    plot_->plotLayout()->addElement(0, 0, title_);
  }
  title_->setText(title);
  scheduleReplot();
}

void CurvePlot::setAxisLabels(const QString& x, const QString& y) {
  plot_->xAxis->setLabel(x);
  plot_->yAxis->setLabel(y);
  scheduleReplot();
}

void CurvePlot::setLogY(bool enabled) {
  plot_->yAxis->setScaleType(enabled ? QCPAxis::stLogarithmic : QCPAxis::stLinear);
  if (enabled) {
    plot_->yAxis->setTicker(QSharedPointer<QCPAxisTickerLog>(new QCPAxisTickerLog));
  } else {
    plot_->yAxis->setTicker(QSharedPointer<QCPAxisTicker>(new QCPAxisTicker));
  }
  scheduleReplot();
}

void CurvePlot::setLegendVisible(bool visible) {
  legendWanted_ = visible;
  scheduleReplot();
}

void CurvePlot::setEmptyText(const QString& text) {
  if (!emptyText_) emptyText_ = addCentredNote(plot_);
  emptyTextValue_ = text;
  emptyText_->setText(text);
  scheduleReplot();
}

bool CurvePlot::emptyTextShown() const { return emptyText_ && emptyText_->visible(); }

QString CurvePlot::seriesName(int index) const {
  return index >= 0 && index < series_.size() ? series_[index].line->name() : QString();
}

QColor CurvePlot::seriesColor(int index) const {
  return index >= 0 && index < series_.size() ? series_[index].line->pen().color() : QColor();
}

int CurvePlot::pointCount(int index) const {
  return index >= 0 && index < series_.size() ? series_[index].line->dataCount() : 0;
}

QVector<double> CurvePlot::seriesValues(int index) const {
  QVector<double> ys;
  if (index < 0 || index >= series_.size()) return ys;
  for (auto it = series_[index].line->data()->constBegin(); it != series_[index].line->data()->constEnd(); ++it)
    ys.push_back(it->value);
  return ys;
}

bool CurvePlot::hasSpread(int index) const {
  return index >= 0 && index < series_.size() && series_[index].upper != nullptr;
}

bool CurvePlot::replotPending() const { return replotTimer_->isActive(); }

void CurvePlot::replotNow() {
  replotTimer_->stop();
  doReplot();
}

void CurvePlot::rescaleAxes() {
  autoRescale_ = true;
  scheduleReplot();
}

void CurvePlot::scheduleReplot() {
  if (!replotTimer_->isActive()) replotTimer_->start();
}

void CurvePlot::onReplotTimer() {
  if (!isVisible()) {
    staleWhileHidden_ = true;  // drawn when shown (showEvent)
    return;
  }
  doReplot();
}

void CurvePlot::showEvent(QShowEvent* event) {
  QWidget::showEvent(event);
  if (staleWhileHidden_) scheduleReplot();
}

void CurvePlot::placeLegendAwayFromData() {
  // The corner (of the axis rectangle, in axis fractions) whose legend-sized box holds the
  // fewest data points; ties keep the order below (top left first).
  const QCPRange xr = plot_->xAxis->range(), yr = plot_->yAxis->range();
  if (xr.size() <= 0 || yr.size() <= 0) return;
  const QRect area = plot_->axisRect()->rect();
  const QSize box = plot_->legend->minimumOuterSizeHint();
  const double w = area.width() > 0 ? (box.width() + 16.0) / area.width() : 0.35;
  const double h = area.height() > 0 ? (box.height() + 16.0) / area.height() : 0.4;
  if (w > 0.6 || h > 0.75) return putLegendOutside();  // it would cover most of the axes wherever it sat
  const Qt::Alignment corners[4] = {Qt::AlignTop | Qt::AlignLeft, Qt::AlignTop | Qt::AlignRight,
                                    Qt::AlignBottom | Qt::AlignRight, Qt::AlignBottom | Qt::AlignLeft};
  int counts[4] = {0, 0, 0, 0};
  for (int i = 0; i < plot_->graphCount(); ++i) {
    if (!plot_->graph(i)->visible()) continue;
    for (auto it = plot_->graph(i)->data()->constBegin(); it != plot_->graph(i)->data()->constEnd(); ++it) {
      const double fx = (it->key - xr.lower) / xr.size(), fy = (it->value - yr.lower) / yr.size();  // 0..1, y up
      const bool left = fx <= w, right = fx >= 1 - w, top = fy >= 1 - h, bottom = fy <= h;
      counts[0] += left && top;
      counts[1] += right && top;
      counts[2] += right && bottom;
      counts[3] += left && bottom;
    }
  }
  int best = 0;
  for (int c = 1; c < 4; ++c)
    if (counts[c] < counts[best]) best = c;
  if (counts[best] == 0) return putLegendInside(corners[best]);
  // Every corner holds data. A short legend gets a band of its own above the data (only while the
  // axes follow the data: a user's zoom is left alone); a tall one goes beside the axes.
  if (h <= 0.45 && autoRescale_ && plot_->yAxis->scaleType() == QCPAxis::stLinear) {
    plot_->yAxis->setRangeUpper(yr.upper + yr.size() * h / (1 - h));
    return putLegendInside(Qt::AlignTop | Qt::AlignLeft);
  }
  putLegendOutside();
}

void CurvePlot::putLegendInside(Qt::Alignment corner) {
  if (legendOutside_) {
    legendColumn_->take(plot_->legend);
    plot_->plotLayout()->take(legendColumn_);
    plot_->plotLayout()->simplify();
    plot_->axisRect()->insetLayout()->addElement(plot_->legend, corner);
    legendOutside_ = false;
  }
  plot_->axisRect()->insetLayout()->setInsetAlignment(0, corner);
}

void CurvePlot::putLegendOutside() {
  if (legendOutside_) return;
  // Taken out of the plot's layout, the column stays the plot's child (QCPLayout::take).
  if (!legendColumn_) {
    legendColumn_ = new QCPLayoutGrid;
    legendColumn_->setMargins(QMargins(6, 6, 4, 0));  // the legend's frame clear of the axes and the edge
  }
  int row = 0;
  for (int r = 0; r < plot_->plotLayout()->rowCount(); ++r)
    if (plot_->plotLayout()->element(r, 0) == plot_->axisRect()) row = r;
  const int column = plot_->plotLayout()->columnCount();
  plot_->axisRect()->insetLayout()->take(plot_->legend);
  plot_->axisRect()->insetLayout()->simplify();
  legendColumn_->addElement(0, 0, plot_->legend);
  if (legendColumn_->rowCount() < 2 || !legendColumn_->hasElement(1, 0))
    legendColumn_->addElement(1, 0, new QCPLayoutElement(plot_));  // the rest of the column, empty
  legendColumn_->setRowStretchFactor(0, 0.001);
  plot_->plotLayout()->addElement(row, column, legendColumn_);
  plot_->plotLayout()->setColumnStretchFactor(column, 0.001);
  legendOutside_ = true;
}

namespace {
// The range of the drawable points of the visible graphs along one axis: NaN values (gaps) and
// non-finite coordinates left out, and on a logarithmic axis the non-positive ones too.
// Empty when no point qualifies.
std::optional<QCPRange> finiteDataRange(QCustomPlot* plot, QCPAxis* axis) {
  const bool alongKeys = axis == plot->xAxis;
  const bool logScale = axis->scaleType() == QCPAxis::stLogarithmic;
  std::optional<QCPRange> range;
  for (int i = 0; i < plot->graphCount(); ++i) {
    if (!plot->graph(i)->visible()) continue;
    for (auto it = plot->graph(i)->data()->constBegin(); it != plot->graph(i)->data()->constEnd(); ++it) {
      if (!std::isfinite(it->value)) continue;  // a gap or a point off the chart (+-Inf)
      const double v = alongKeys ? it->key : it->value;
      if (!std::isfinite(v) || (logScale && v <= 0)) continue;
      range = range ? QCPRange(std::min(range->lower, v), std::max(range->upper, v)) : QCPRange(v, v);
    }
  }
  return range;
}
}  // namespace

void CurvePlot::fitAxesToData() {
  // QCustomPlot's own rescale handles a single key; its range from data with +-Inf is refused,
  // so each axis is then set from the finite points alone.
  plot_->rescaleAxes(/*onlyVisiblePlottables=*/true);
  for (QCPAxis* axis : {plot_->xAxis, plot_->yAxis}) {
    const std::optional<QCPRange> data = finiteDataRange(plot_, axis);
    if (!data) continue;  // nothing drawable: the axis stays as it is (no padding growing on each replot)
    const bool flat = data->size() <= 1e-9 * std::max(1.0, std::abs(data->center()));
    if (!flat) axis->setRange(*data);
    if (axis->scaleType() == QCPAxis::stLogarithmic) continue;
    if (flat && axis == plot_->yAxis) {  // flat data (a constant learning rate): +-10 % around the value
      const double half = data->center() != 0 ? std::abs(data->center()) * 0.1 : 0.5;
      axis->setRange(data->center() - half, data->center() + half);
      continue;
    }
    // A little air around the data so markers and bands are not cut at the frame.
    const QCPRange r = axis->range();
    const double pad = r.size() > 0 ? r.size() * 0.04 : 0.5;
    axis->setRange(r.lower - pad, r.upper + pad);
  }
}

void CurvePlot::doReplot() {
  staleWhileHidden_ = false;
  if (autoRescale_ && plot_->graphCount() > 0) fitAxesToData();
  bool anyPoint = false;
  for (const auto& series : series_) anyPoint = anyPoint || series.line->dataCount() > 0;
  if (emptyText_) emptyText_->setVisible(!anyPoint && !emptyTextValue_.isEmpty());
  plot_->legend->setVisible(legendWanted_ && anyPoint);  // a legend of empty curves names nothing
  if (plot_->legend->visible()) placeLegendAwayFromData();
  ++replotCount_;
  // Queued refresh: the widget repaints with the next paint event, together with whatever else
  // changed, rather than forcing a paint (and a window flush) of its own now.
  plot_->replot(QCustomPlot::rpQueuedRefresh);
}

}  // namespace hh::widgets
