// The central "attention comparison" view: softmax, linear and difference heatmaps of one head
// side by side (softmax and linear on one shared colour scale, the difference on a diverging
// scale around 0), the two monotonicity curves overlaid, and the head's metrics (KL, entropy,
// Spearman). Hovering any heatmap shows the same (query, key) pair's numbers from all three.
// Shows a ComparisonResult; computes nothing itself.
#pragma once
#include <QWidget>

#include "app/gui/attention_comparison.h"

class QLabel;

namespace hh::widgets {
class CurvePlot;
class HeatmapView;
}  // namespace hh::widgets

namespace hh::gui {

class ComparisonView : public QWidget {
  Q_OBJECT

 public:
  explicit ComparisonView(QWidget* parent = nullptr);

  void setResult(const ComparisonResult& result);
  // A failed computation: keeps the last maps, shows the message.
  void showError(const QString& message);
  const ComparisonResult& result() const { return result_; }

  hh::widgets::HeatmapView* softmaxMap() const { return softmax_; }
  hh::widgets::HeatmapView* linearMap() const { return linear_; }
  hh::widgets::HeatmapView* differenceMap() const { return difference_; }
  hh::widgets::CurvePlot* curvePlot() const { return curves_; }

 Q_SIGNALS:
  // One-line description of the hovered pair (empty when the pointer left the maps).
  void hoverText(const QString& text);

 private:
  void onHover(int row, int col);
  void updateMetrics();

  hh::widgets::HeatmapView* softmax_ = nullptr;
  hh::widgets::HeatmapView* linear_ = nullptr;
  hh::widgets::HeatmapView* difference_ = nullptr;
  hh::widgets::CurvePlot* curves_ = nullptr;
  QLabel* metrics_ = nullptr;
  QLabel* hover_ = nullptr;
  ComparisonResult result_;
};

}  // namespace hh::gui
