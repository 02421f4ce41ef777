// A colour scale beside a row of heatmaps; see color_bar.h.
#include "widgets/color_bar.h"

#include <QFontMetrics>
#include <QPainter>

#include "widgets/colormap.h"

namespace hh::widgets {
namespace {
constexpr int kBarWidth = 12;
constexpr int kTicks = 5;
constexpr int kMargin = 8;
}  // namespace

ColorBar::ColorBar(QWidget* parent) : QWidget(parent) {
  setSizePolicy(QSizePolicy::Fixed, QSizePolicy::Expanding);
}

void ColorBar::setRange(double lo, double hi) {
  lo_ = lo;
  hi_ = hi > lo ? hi : lo + 1.0;
  update();
}

void ColorBar::setLabel(const QString& label) {
  label_ = label;
  updateGeometry();
  update();
}

QSize ColorBar::sizeHint() const {
  const QFontMetrics fm(font());
  return {kBarWidth + 3 * kMargin + fm.horizontalAdvance(QStringLiteral("0.000")) + fm.height(), 200};
}

QSize ColorBar::minimumSizeHint() const { return {sizeHint().width(), 80}; }

void ColorBar::paintEvent(QPaintEvent*) {
  QPainter painter(this);
  const QFontMetrics fm(font());
  const int top = kMargin + fm.height() / 2, bottom = height() - kMargin - fm.height() / 2;
  const int span = std::max(1, bottom - top);
  for (int y = top; y <= bottom; ++y) {  // bottom = lo, top = hi
    painter.setPen(viridisAt(double(bottom - y) / span));
    painter.drawLine(kMargin, y, kMargin + kBarWidth, y);
  }
  painter.setPen(palette().color(QPalette::WindowText));
  painter.drawRect(kMargin, top, kBarWidth, span);
  for (int i = 0; i < kTicks; ++i) {
    const double t = double(i) / (kTicks - 1);
    const int y = bottom - int(t * span);
    painter.drawLine(kMargin + kBarWidth, y, kMargin + kBarWidth + 3, y);
    const QString text = QString::number(lo_ + t * (hi_ - lo_), 'g', 3);
    painter.drawText(kMargin + kBarWidth + 5, y + fm.ascent() / 2 - 1, text);
  }
  if (!label_.isEmpty()) {  // along the right edge, reading upwards
    painter.save();
    painter.translate(width() - 2, (top + bottom) / 2 + fm.horizontalAdvance(label_) / 2);
    painter.rotate(-90);
    painter.drawText(0, 0, fm.elidedText(label_, Qt::ElideRight, span));
    painter.restore();
  }
}

}  // namespace hh::widgets
