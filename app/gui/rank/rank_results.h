// RankResultsPanel: a layer ranking (engine/jobs/rank_job.h, a finished rank job or a saved
// rank.json) and the per-layer plan chosen from it, on the workbench's Layer ranking tab.
//   - a layers x heads heatmap (rows "L0".., columns the heads) of the relative output error, or
//     of KL(softmax || linear) by the "Show" toggle, each cell's value printed in it when it fits;
//     the rows the plan keeps are starred ("L2 ★") and outlined;
//   - the layers hardest first: rank, layer, mean output error, mean KL, and the layer's spec in
//     the plan (kept layers in bold on an amber background);
//   - the budget k (0 .. L) and what those layers keep (softmax, hedgehog_window(64), ...; any
//     spec may be typed, checked with the engine's parser); the plan is recomputed live with
//     jobs::proposePlan from the hardest-first order: the k hardest keep, the others get the
//     attention the ranking tried, and is shown per layer and as the CLI's --plan list;
//   - "Convert with this plan…": emits convertRequested(); conversionConfig() is the convert
//     config it means (the ranked model and data, the plan).
// No job runs here; the panel only reads what it is given.
#pragma once
#include <QString>
#include <QStringList>
#include <QWidget>

#include <string>
#include <vector>

#include "engine/config/convert_config.h"
#include "engine/config/rank_config.h"
#include "engine/jobs/rank_job.h"

class QCPItemText;
class QCPLayer;
class QComboBox;
class QLabel;
class QPushButton;
class QSpinBox;
class QTreeWidget;

namespace hh::widgets {
class HeatmapView;
}

namespace hh::gui {

// The convert config a plan from a ranking means: the ranked model and data, the plan (which
// replaces feature_map / rule / window / layers), run_dir runs/convert; the rest default.
jobs::ConvertConfig conversionConfigForPlan(const jobs::RankConfig& ranked, const std::vector<std::string>& plan);

class RankResultsPanel : public QWidget {
  Q_OBJECT

 public:
  enum class Metric { OutputError, Kl };
  // The keep-as choices offered (any other spec can be typed).
  static QStringList keepAsChoices();

  explicit RankResultsPanel(QWidget* parent = nullptr);

  // Shows a ranking; the budget and keep-as start from the config's keep and keep_as.
  void setRanking(const jobs::RankResult& result, const jobs::RankConfig& config);
  void clear();
  bool hasRanking() const { return hasRanking_; }
  const jobs::RankResult& result() const { return result_; }
  const jobs::RankConfig& rankConfig() const { return config_; }

  void setMetric(Metric metric);
  Metric metric() const;
  void setBudget(int k);
  int budget() const;
  void setKeepAs(const QString& spec);
  QString keepAs() const;
  // The plan shown (one spec per layer; empty when there is no ranking or keep-as is not a spec).
  const std::vector<std::string>& plan() const { return plan_; }
  // The convert config of the plan shown (conversionConfigForPlan).
  jobs::ConvertConfig conversionConfig() const;
  // The heatmap's row labels ("L0", "L1 ★", ...).
  QStringList rowLabels() const;

  widgets::HeatmapView* heatmap() const { return heatmap_; }
  QTreeWidget* layerList() const { return list_; }
  QSpinBox* budgetBox() const { return budget_; }
  QComboBox* keepAsBox() const { return keepAs_; }
  QComboBox* metricBox() const { return metric_; }
  QLabel* planLabel() const { return planLabel_; }
  QLabel* summaryLabel() const { return summary_; }
  QPushButton* convertButton() const { return convert_; }

 Q_SIGNALS:
  void convertRequested();
  // The plan shown changed (budget, keep-as, a new ranking).
  void planChanged();

 private:
  QWidget* buildMapSide();
  QWidget* buildPlanSide();
  void showMetric();
  void fillList();
  void updatePlan();
  void markKeptLayers();
  // The heatmap's decorations (on their own QCP layer): every cell's value printed in it while
  // cells are large enough (fitCellTexts, before each replot), and the kept rows outlined.
  void decorateMap();
  void annotateCells(QCPLayer* layer);
  void fitCellTexts();
  void outlineKeptRows(QCPLayer* layer);
  bool kept(int layer) const;

  widgets::HeatmapView* heatmap_ = nullptr;
  QComboBox* metric_ = nullptr;
  QTreeWidget* list_ = nullptr;
  QSpinBox* budget_ = nullptr;
  QComboBox* keepAs_ = nullptr;
  QLabel* attention_ = nullptr;
  QLabel* planLabel_ = nullptr;
  QLabel* summary_ = nullptr;
  QPushButton* convert_ = nullptr;
  jobs::RankResult result_;
  jobs::RankConfig config_;
  std::vector<std::string> plan_;
  std::vector<QCPItemText*> cellTexts_;
  bool hasRanking_ = false;
};

}  // namespace hh::gui
