// ConversionSummaryView: what a finished conversion came to, at a glance (the page the
// "Conversion dashboard" tab turns to when a conversion ends, or when a convert run file is
// opened):
//   - a headline: status, teacher, feature map and rule, wall time;
//   - the quality before and after (perplexity, or accuracy for classification) with the change,
//     and the KL to softmax before and after distillation on the distillation's probe text;
//   - every feature map the evaluate stage measured on the evaluation text (KL, entropy,
//     monotonicity), best first, the converted model's own maps marked;
//   - the converted model's per-head KL as a layer x head map with the best and worst heads
//     named;
//   - where things are: the exported model (open it in the inspector), the convert run file, and
//     the stages' run files (open their curves on the dashboard).
// Plain data in (ConversionResult); the owner acts on the requests it emits.
#pragma once
#include <QWidget>

#include "app/gui/conversion/conversion_result.h"

class QLabel;
class QPushButton;
class QTableWidget;

namespace hh::widgets {
class HeatmapView;
}

namespace hh::gui {

class ConversionSummaryView : public QWidget {
  Q_OBJECT

 public:
  explicit ConversionSummaryView(QWidget* parent = nullptr);

  void setResult(const ConversionResult& result);
  const ConversionResult& result() const { return result_; }

  // For tests and screenshots.
  QString headlineText() const;
  QString qualityText() const;
  QString klText() const;
  QString headsText() const;
  QTableWidget* mapTable() const { return maps_; }
  widgets::HeatmapView* headMap() const { return heads_; }
  QPushButton* inspectButton() const { return inspect_; }
  QPushButton* distillCurvesButton() const { return distillCurves_; }

 Q_SIGNALS:
  void openModelRequested(const QString& folder);
  void openRunRequested(const QString& runFile);

 private:
  void createTexts();
  void createTables();
  void createLinks();
  void fillMaps();
  void fillHeads();
  void fillPaths();

  ConversionResult result_;
  QLabel* headline_ = nullptr;
  QLabel* quality_ = nullptr;
  QLabel* kl_ = nullptr;
  QTableWidget* maps_ = nullptr;
  widgets::HeatmapView* heads_ = nullptr;
  QLabel* headList_ = nullptr;
  QLabel* paths_ = nullptr;
  QPushButton* inspect_ = nullptr;
  QPushButton* distillCurves_ = nullptr;
  QPushButton* finetuneCurves_ = nullptr;
  QPushButton* evaluateRun_ = nullptr;
};

}  // namespace hh::gui
