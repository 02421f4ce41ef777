// The feature-map comparison view: one head's softmax attention and the linear attention of each
// chosen feature map side by side (one shared colour scale, each titled with its KL to softmax,
// entropy H and monotonicity rho), the difference map of one of them against softmax (diverging
// scale around 0; the map picked in a combo box or by clicking its heatmap), the monotonicity
// curves of all of them overlaid, and a metrics table. Hovering any heatmap reads the same
// (query, key) pair from all maps. Shows a ComparisonResult; computes nothing itself.
#pragma once
#include <QWidget>

#include <memory>
#include <vector>

#include "app/gui/comparison/comparison_session.h"
#include "widgets/matrix_downsample.h"

class QComboBox;
class QGridLayout;
class QLabel;
class QTableWidget;

namespace hh::widgets {
class ColorBar;
class CurvePlot;
class HeatmapView;
}  // namespace hh::widgets

namespace hh::gui {

class ComparisonView : public QWidget {
  Q_OBJECT

 public:
  explicit ComparisonView(QWidget* parent = nullptr);

  // Keeps the result (moved in: pass an rvalue to avoid a copy of its T x T matrices); the
  // heatmaps share its matrices and take their colour scales from its 99th percentiles.
  void setResult(ComparisonResult result);
  // A failed computation: keeps the last maps, shows the message.
  void showError(const QString& message);
  const ComparisonResult& result() const { return *result_; }

  // Softmax first, then one per feature map of the result.
  int mapCount() const { return visibleMaps_; }
  hh::widgets::HeatmapView* map(int index) const;
  hh::widgets::HeatmapView* softmaxMap() const { return map(0); }
  hh::widgets::HeatmapView* differenceMap() const { return difference_; }
  hh::widgets::CurvePlot* curvePlot() const { return curves_; }
  QTableWidget* metricsTable() const { return table_; }
  // Which feature map (index into result().maps) the difference map shows.
  int focusedMap() const { return focus_; }
  void setFocusedMap(int index);

 Q_SIGNALS:
  // One-line description of the hovered pair (empty when the pointer left the maps).
  void hoverText(const QString& text);

 private:
  void ensureMapViews(int count);
  void layoutMaps();
  void onHover(int row, int col);
  QWidget* buildMapsRow();
  void buildDifference();
  QWidget* buildMetricsPanel();
  void updateMaps();
  void updateCurves();
  void updateFocusChoices();
  void updateDifference();
  void updateTable();
  // A view of one of result_'s matrices that keeps result_ alive (no copy).
  hh::widgets::SharedValues shared(const std::vector<float>& matrix) const;

  QWidget* mapsBox_ = nullptr;
  QGridLayout* mapsGrid_ = nullptr;
  hh::widgets::ColorBar* colorBar_ = nullptr;
  QList<hh::widgets::HeatmapView*> maps_;  // reused between results; the first visibleMaps_ are shown
  int visibleMaps_ = 0;
  hh::widgets::HeatmapView* difference_ = nullptr;
  QComboBox* focusBox_ = nullptr;
  hh::widgets::CurvePlot* curves_ = nullptr;
  QTableWidget* table_ = nullptr;
  QLabel* source_ = nullptr;
  QLabel* hover_ = nullptr;
  std::shared_ptr<const ComparisonResult> result_;  // never null
  int focus_ = 0;
};

}  // namespace hh::gui
