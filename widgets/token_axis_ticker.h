// Axis ticker for matrix plots whose cells are tokens: ticks sit on integer cell indices, the
// label of tick i is token i (or the index when no labels are set), and labels are thinned to a
// "nice" integer stride (1, 2, 5, 10, 20, 50, ...) so that at most tickCount() of them fall in
// the visible range. The owner sets tickCount from the axis length in pixels (see
// fitTickCount) whenever the axis is resized or zoomed.
#pragma once
#include <QStringList>

#include "widgets/qcp.h"

namespace hh::widgets {

class TokenAxisTicker : public QCPAxisTicker {
 public:
  // Labels longer than this are elided with a trailing "…".
  static constexpr int kMaxLabelChars = 14;

  TokenAxisTicker() = default;

  // size: number of cells along the axis (ticks only on 0 .. size-1); labels may be shorter
  // (missing ones show the index).
  void setCells(int size, QStringList labels);
  int cellCount() const { return size_; }
  const QStringList& labels() const { return labels_; }

  // tickCount for an axis of `pixels` length when each label needs `pixelsPerLabel`.
  void fitTickCount(double pixels, double pixelsPerLabel);

  // The label shown for cell i (elided token or index).
  QString labelFor(int index) const;

 protected:
  double getTickStep(const QCPRange& range) override;
  int getSubTickCount(double tickStep) override;
  QString getTickLabel(double tick, const QLocale& locale, QChar formatChar, int precision) override;
  QVector<double> createTickVector(double tickStep, const QCPRange& range) override;

 private:
  int size_ = 0;
  QStringList labels_;
};

}  // namespace hh::widgets
