// Token-labelled integer ticks with a thinned, "nice" stride (see token_axis_ticker.h).
#include "widgets/token_axis_ticker.h"

#include <algorithm>
#include <cmath>

namespace hh::widgets {

void TokenAxisTicker::setCells(int size, QStringList labels) {
  size_ = std::max(size, 0);
  labels_ = std::move(labels);
}

void TokenAxisTicker::fitTickCount(double pixels, double pixelsPerLabel) {
  const double perLabel = std::max(pixelsPerLabel, 1.0);
  setTickCount(std::max(1, int(pixels / perLabel)));
}

QString TokenAxisTicker::labelFor(int index) const {
  if (index < 0 || index >= labels_.size()) return QString::number(index);
  QString label = labels_.at(index);
  label.replace(QLatin1Char('\n'), QStringLiteral("\\n"));
  label.replace(QLatin1Char('\t'), QStringLiteral("\\t"));
  if (label.size() > kMaxLabelChars) label = label.left(kMaxLabelChars - 1) + QChar(0x2026);
  return label;
}

double TokenAxisTicker::getTickStep(const QCPRange& range) {
  // Smallest stride in the 1-2-5 series that keeps the visible ticks within tickCount.
  const double wanted = std::max(1.0, range.size() / std::max(1, tickCount()));
  double magnitude = 1.0;
  while (true) {
    for (double m : {1.0, 2.0, 5.0}) {
      if (m * magnitude >= wanted) return m * magnitude;
    }
    magnitude *= 10.0;
  }
}

int TokenAxisTicker::getSubTickCount(double /*tickStep*/) { return 0; }

QString TokenAxisTicker::getTickLabel(double tick, const QLocale& /*locale*/, QChar /*formatChar*/,
                                      int /*precision*/) {
  return labelFor(int(std::lround(tick)));
}

QVector<double> TokenAxisTicker::createTickVector(double tickStep, const QCPRange& range) {
  QVector<double> ticks;
  if (size_ <= 0) return ticks;
  const long step = std::max(1L, std::lround(tickStep));
  const long first = std::max(0L, long(std::ceil(range.lower / double(step))) * step);
  const long last = std::min(long(size_) - 1, long(std::floor(range.upper)));
  for (long i = first; i <= last; i += step) ticks.append(double(i));
  return ticks;
}

}  // namespace hh::widgets
