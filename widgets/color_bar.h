// ColorBar: a vertical colour scale on its own, for a row of heatmaps that share one scale (the
// feature-map comparison): beside the maps rather than inside one of them, so every map gets the
// same width. Viridis from `lo` (bottom) to `hi` (top), a few ticks, and a rotated label.
#pragma once
#include <QString>
#include <QWidget>

namespace hh::widgets {

class ColorBar : public QWidget {
  Q_OBJECT

 public:
  explicit ColorBar(QWidget* parent = nullptr);

  void setRange(double lo, double hi);
  void setLabel(const QString& label);
  double lo() const { return lo_; }
  double hi() const { return hi_; }
  QSize sizeHint() const override;
  QSize minimumSizeHint() const override;

 protected:
  void paintEvent(QPaintEvent* event) override;

 private:
  double lo_ = 0.0, hi_ = 1.0;
  QString label_;
};

}  // namespace hh::widgets
