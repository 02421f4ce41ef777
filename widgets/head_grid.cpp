// HeadGrid: thumbnails painted with QPainter from block-reduced QImages, summary frames and
// numbers, click and tooltip hit-testing (see head_grid.h).
#include "widgets/head_grid.h"

#include <QHelpEvent>
#include <QMouseEvent>
#include <QPainter>
#include <QToolTip>

#include <algorithm>
#include <cmath>

#include "widgets/colormap.h"
#include "widgets/matrix_downsample.h"

namespace hh::widgets {
namespace {

constexpr int kHeaderW = 34;     // left column: layer names
constexpr int kHeaderH = 20;     // top row: head names
constexpr int kFrame = 3;        // summary frame width
constexpr int kGap = 6;          // space between cells
constexpr int kTextH = 16;       // summary number under the thumbnail
constexpr int kMinThumb = 24;
constexpr int kMaxThumb = 160;
constexpr int kLegendH = 18;     // bottom row: what the frame colour means

QImage makeThumbnail(int rows, int cols, const std::vector<float>& values) {
  if (rows <= 0 || cols <= 0 || values.size() != std::size_t(rows) * std::size_t(cols)) return {};
  const DownsampledMatrix d =
      downsampleMatrix(rows, cols, values.data(), HeadGrid::kThumbCells, HeadGrid::kThumbCells, BlockReduce::Max);
  const FiniteRange range = finiteRange(d.values.data(), d.values.size());
  const ColorMap& map = ColorMap::viridis();
  QImage image(d.cols, d.rows, QImage::Format_RGB32);
  for (int r = 0; r < d.rows; ++r) {
    auto* line = reinterpret_cast<QRgb*>(image.scanLine(r));
    for (int c = 0; c < d.cols; ++c) {
      const float v = d.values[std::size_t(r) * std::size_t(d.cols) + std::size_t(c)];
      line[c] = map.rgbFor(v, range.lo, range.hi);
    }
  }
  return image;
}

QString formatSummary(double v) { return std::isnan(v) ? QString() : QString::number(v, 'f', v < 10 ? 3 : 1); }

}  // namespace

HeadGrid::HeadGrid(QWidget* parent) : QWidget(parent) {
  setMouseTracking(true);
  setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Expanding);
}

void HeadGrid::setGridSize(int layers, int heads) {
  layers_ = std::max(layers, 0);
  heads_ = std::max(heads, 0);
  cells_ = QVector<Cell>(layers_ * heads_);
  if (selectedLayer_ >= layers_ || selectedHead_ >= heads_) selectedLayer_ = selectedHead_ = -1;
  updateGeometry();
  update();
}

void HeadGrid::setCell(int layer, int head, int rows, int cols, const std::vector<float>& values, double summary) {
  if (layer < 0 || head < 0) return;
  if (layer >= layers_ || head >= heads_) {
    // Grow, keeping the cells already set.
    const int newLayers = std::max(layers_, layer + 1), newHeads = std::max(heads_, head + 1);
    QVector<Cell> grown(newLayers * newHeads);
    for (int l = 0; l < layers_; ++l)
      for (int h = 0; h < heads_; ++h) grown[l * newHeads + h] = cells_[l * heads_ + h];
    cells_ = std::move(grown);
    layers_ = newLayers;
    heads_ = newHeads;
    updateGeometry();
  }
  Cell* cell = cellPtr(layer, head);
  cell->image = makeThumbnail(rows, cols, values);
  cell->summary = summary;
  update();
}

void HeadGrid::setSummary(int layer, int head, double summary) {
  if (Cell* cell = cellPtr(layer, head)) {
    cell->summary = summary;
    update();
  }
}

void HeadGrid::setSummaryName(const QString& name) {
  summaryName_ = name;
  update();
}

void HeadGrid::setSummaryRange(double lo, double hi) {
  if (!(hi > lo)) return;
  fixedRange_ = std::make_pair(lo, hi);
  update();
}

void HeadGrid::setAutoSummaryRange() {
  fixedRange_.reset();
  update();
}

void HeadGrid::setSummaryHigherIsBetter(bool higherIsBetter) {
  higherIsBetter_ = higherIsBetter;
  update();
}

void HeadGrid::setLegendWords(const QString& greyEnd, const QString& redEnd) {
  greyWord_ = greyEnd;
  redWord_ = redEnd;
  update();
}

void HeadGrid::setSelected(int layer, int head) {
  selectedLayer_ = layer;
  selectedHead_ = head;
  update();
}

void HeadGrid::clear() { setGridSize(0, 0); }

double HeadGrid::summary(int layer, int head) const {
  const Cell* cell = cellPtr(layer, head);
  return cell ? cell->summary : std::nan("");
}

QImage HeadGrid::thumbnail(int layer, int head) const {
  const Cell* cell = cellPtr(layer, head);
  return cell ? cell->image : QImage();
}

// The frame colour at badness t in [0, 1]: light grey for the best heads, through amber, to red
// for the worst, so the heads that need a look are the ones that stand out.
namespace {
QColor badnessColor(double t) {
  static const QColor stops[] = {QColor(0xdd, 0xdf, 0xe3), QColor(0xf9, 0xab, 0x00), QColor(0xd9, 0x30, 0x25)};
  if (std::isnan(t)) t = 0.5;  // never an index from NaN
  t = std::clamp(t, 0.0, 1.0) * 2.0;
  const int i = std::min(1, int(t));
  const double f = t - i;
  const QColor& a = stops[i];
  const QColor& b = stops[i + 1];
  return QColor::fromRgbF(float(a.redF() + f * (b.redF() - a.redF())), float(a.greenF() + f * (b.greenF() - a.greenF())),
                          float(a.blueF() + f * (b.blueF() - a.blueF())));
}
}  // namespace

QColor HeadGrid::summaryColor(int layer, int head) const {
  const double v = summary(layer, head);
  if (!std::isfinite(v)) return {};  // NaN or +-Inf: drawn as "no value"
  const auto [lo, hi] = summaryRange();
  double t = hi > lo ? (v - lo) / (hi - lo) : 0.5;  // 1 = the highest value
  if (higherIsBetter_) t = 1.0 - t;                 // now 1 = the worst head
  return badnessColor(t);
}

std::optional<QPoint> HeadGrid::cellAt(QPoint pos) const {
  if (layers_ == 0 || heads_ == 0) return std::nullopt;
  const Geometry g = geometry();
  const int x = pos.x() - g.left, y = pos.y() - g.top;
  if (x < 0 || y < 0) return std::nullopt;
  const int head = x / g.cellW, layer = y / g.cellH;
  if (head >= heads_ || layer >= layers_) return std::nullopt;
  return QPoint(head, layer);
}

QRect HeadGrid::thumbnailRect(int layer, int head) const {
  const Geometry g = geometry();
  const int x = g.left + head * g.cellW + (g.cellW - g.thumb) / 2;
  const int y = g.top + layer * g.cellH + kGap / 2 + kFrame;
  return QRect(x, y, g.thumb, g.thumb);
}

QSize HeadGrid::sizeHint() const {
  const int thumb = 56;
  return QSize(kHeaderW + std::max(heads_, 1) * (thumb + 2 * kFrame + kGap),
               kHeaderH + std::max(layers_, 1) * (thumb + 2 * kFrame + kGap + kTextH) + kLegendH);
}

QSize HeadGrid::minimumSizeHint() const {
  return QSize(kHeaderW + std::max(heads_, 1) * (kMinThumb + 2 * kFrame + kGap),
               kHeaderH + std::max(layers_, 1) * (kMinThumb + 2 * kFrame + kGap + kTextH) + kLegendH);
}

HeadGrid::Geometry HeadGrid::geometry() const {
  Geometry g;
  g.left = kHeaderW;
  g.top = kHeaderH;
  const int heads = std::max(heads_, 1), layers = std::max(layers_, 1);
  const int byWidth = (width() - kHeaderW) / heads - 2 * kFrame - kGap;
  const int byHeight = (height() - kHeaderH - kLegendH) / layers - 2 * kFrame - kGap - kTextH;
  g.thumb = std::clamp(std::min(byWidth, byHeight), kMinThumb, kMaxThumb);
  g.cellW = g.thumb + 2 * kFrame + kGap;
  g.cellH = g.thumb + 2 * kFrame + kGap + kTextH;
  return g;
}

HeadGrid::Cell* HeadGrid::cellPtr(int layer, int head) {
  if (layer < 0 || head < 0 || layer >= layers_ || head >= heads_) return nullptr;
  return &cells_[layer * heads_ + head];
}

const HeadGrid::Cell* HeadGrid::cellPtr(int layer, int head) const {
  if (layer < 0 || head < 0 || layer >= layers_ || head >= heads_) return nullptr;
  return &cells_[layer * heads_ + head];
}

std::pair<double, double> HeadGrid::summaryRange() const {
  if (fixedRange_) return *fixedRange_;
  double lo = 0.0, hi = 0.0;
  bool any = false;
  for (const Cell& c : cells_) {
    if (!std::isfinite(c.summary)) continue;
    lo = any ? std::min(lo, c.summary) : c.summary;
    hi = any ? std::max(hi, c.summary) : c.summary;
    any = true;
  }
  return {lo, hi};
}

void HeadGrid::setEmptyText(const QString& text) {
  emptyText_ = text;
  update();
}

void HeadGrid::paintEvent(QPaintEvent* /*event*/) {
  QPainter p(this);
  p.fillRect(rect(), palette().base());
  if (layers_ == 0 || heads_ == 0) {
    p.setPen(QColor(0x5f, 0x66, 0x70));
    p.drawText(rect().adjusted(12, 12, -12, -12), Qt::AlignCenter | Qt::TextWordWrap, emptyText_);
    return;
  }
  const Geometry g = geometry();
  QFont small = font();
  small.setPointSizeF(std::max(6.0, small.pointSizeF() * 0.85));
  p.setFont(small);
  p.setPen(palette().text().color());
  for (int h = 0; h < heads_; ++h)
    p.drawText(QRect(g.left + h * g.cellW, 0, g.cellW, kHeaderH), Qt::AlignCenter, QStringLiteral("h%1").arg(h));
  for (int l = 0; l < layers_; ++l)
    p.drawText(QRect(0, g.top + l * g.cellH, kHeaderW - 4, g.thumb + 2 * kFrame + kGap), Qt::AlignRight | Qt::AlignVCenter,
               QStringLiteral("L%1").arg(l));

  for (int l = 0; l < layers_; ++l) {
    for (int h = 0; h < heads_; ++h) {
      const Cell& cell = cells_[l * heads_ + h];
      const QRect thumb = thumbnailRect(l, h);
      const QRect frame = thumb.adjusted(-kFrame, -kFrame, kFrame, kFrame);
      const QColor frameColor = summaryColor(l, h);
      p.fillRect(frame, frameColor.isValid() ? frameColor : QColor(0xd0, 0xd3, 0xd8));
      if (cell.image.isNull()) {
        p.fillRect(thumb, QColor::fromRgb(kMaskedColor));
      } else {
        p.drawImage(thumb, cell.image);  // nearest-neighbour scaling keeps the cells crisp
      }
      if (l == selectedLayer_ && h == selectedHead_) {
        p.setPen(QPen(palette().highlight().color(), 2.0));
        p.setBrush(Qt::NoBrush);
        p.drawRect(frame.adjusted(-2, -2, 1, 1));
      }
      p.setPen(palette().text().color());
      p.drawText(QRect(frame.left() - kGap / 2, frame.bottom() + 1, frame.width() + kGap, kTextH), Qt::AlignCenter,
                 formatSummary(cell.summary));
    }
  }
  if (layers_ > 0 && heads_ > 0) paintLegend(p, QRect(g.left, g.top + layers_ * g.cellH, width() - g.left, kLegendH));
}

void HeadGrid::paintLegend(QPainter& p, const QRect& area) const {
  // "frame: KL  0.012 [grey ... red] 1.73  (worse)": what the frame colour says, and its range.
  const auto [lo, hi] = summaryRange();
  const double best = higherIsBetter_ ? hi : lo, worst = higherIsBetter_ ? lo : hi;
  const QFontMetrics fm(p.font());
  p.setPen(palette().placeholderText().color());
  int x = area.left();
  const int y = area.top() + 2, h = area.height() - 4;
  auto text = [&](const QString& s) {
    p.drawText(QRect(x, area.top(), fm.horizontalAdvance(s) + 2, area.height()), Qt::AlignVCenter, s);
    x += fm.horizontalAdvance(s) + 6;
  };
  text(tr("frame: %1").arg(summaryName_));
  const bool anyValue =
      fixedRange_ || std::any_of(cells_.begin(), cells_.end(), [](const Cell& c) { return std::isfinite(c.summary); });
  if (!anyValue) {  // e.g. KL on a model whose linear maps could not be measured: no scale to show
    text(tr("not measured on any head"));
    return;
  }
  text(formatSummary(best) + QLatin1Char(' ') + greyWord_);
  const int barW = 90;
  for (int i = 0; i < barW; ++i) {
    p.setPen(badnessColor(double(i) / (barW - 1)));
    p.drawLine(x + i, y, x + i, y + h);
  }
  x += barW + 6;
  p.setPen(palette().placeholderText().color());
  text(formatSummary(worst) + QLatin1Char(' ') + redWord_);
}

void HeadGrid::mousePressEvent(QMouseEvent* event) {
  if (event->button() == Qt::LeftButton) {
    if (auto cell = cellAt(event->position().toPoint())) {
      setSelected(cell->y(), cell->x());
      Q_EMIT headClicked(cell->y(), cell->x());
      return;
    }
  }
  QWidget::mousePressEvent(event);
}

bool HeadGrid::event(QEvent* event) {
  if (event->type() == QEvent::ToolTip) {
    auto* help = static_cast<QHelpEvent*>(event);
    if (auto cell = cellAt(help->pos())) {
      const double v = summary(cell->y(), cell->x());
      QToolTip::showText(help->globalPos(), QStringLiteral("layer %1, head %2\n%3 = %4")
                                                .arg(cell->y())
                                                .arg(cell->x())
                                                .arg(summaryName_)
                                                .arg(std::isnan(v) ? QStringLiteral("n/a") : QString::number(v, 'g', 5)),
                         this);
    } else {
      QToolTip::hideText();
    }
    return true;
  }
  return QWidget::event(event);
}

}  // namespace hh::widgets
