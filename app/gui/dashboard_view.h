// DashboardView: a run as it happens (or after), fed by RunFollower updates. Shows
//   - the run's kind, file, status and a progress bar (step / planned steps, or the in-process
//     job's own progress with ETA when the workbench runs it);
//   - the loss: the raw trace faint, an exponential moving average over it (smoothing slider,
//     0 = raw), the held-out loss as points; the learning rate beside it;
//   - a layer x head grid coloured by the latest per-head table (KL, entropy of the linear or
//     softmax weights, monotonicity; chosen in a combo box); clicking a head shows its snapshot;
//   - softmax and linear attention on the probe text for the chosen (layer, head), refreshed at
//     every snapshot;
//   - the run's log lines.
// Plain data in; nothing here blocks on the file (the follower reads it on its own thread).
#pragma once
#include <QWidget>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "app/gui/run_follower.h"

class QComboBox;
class QLabel;
class QPlainTextEdit;
class QProgressBar;
class QSlider;

namespace hh::widgets {
class CurvePlot;
class HeadGrid;
class HeatmapView;
}  // namespace hh::widgets

namespace hh::gui {

class DashboardView : public QWidget {
  Q_OBJECT

 public:
  explicit DashboardView(QWidget* parent = nullptr);

  // Progress reported by a job this process runs (overrides the step / planned-steps estimate).
  void setJobProgress(int64_t step, int64_t total, const QString& phase, double etaSeconds);
  void clear();

  // For tests and screenshots.
  int64_t lastStep() const { return lastStep_; }
  int lossPointCount() const { return int(lossSteps_.size()); }
  QString statusText() const;
  widgets::HeadGrid* headGrid() const { return grid_; }
  widgets::CurvePlot* lossPlot() const { return loss_; }
  widgets::HeatmapView* softmaxMap() const { return softmaxMap_; }
  widgets::HeatmapView* linearMap() const { return linearMap_; }
  void setSmoothing(double weight);  // EMA weight in [0, 0.99]

 public Q_SLOTS:
  void applyUpdate(const hh::gui::RunUpdate& update);
  void showPair(int layer, int head);

 private:
  void rebuildLoss();
  void refreshGrid();
  void refreshMaps();

  QLabel* title_ = nullptr;
  QLabel* status_ = nullptr;
  QProgressBar* progress_ = nullptr;
  widgets::CurvePlot* loss_ = nullptr;
  widgets::CurvePlot* lr_ = nullptr;
  QSlider* smoothing_ = nullptr;
  QComboBox* tableChoice_ = nullptr;
  widgets::HeadGrid* grid_ = nullptr;
  widgets::HeatmapView* softmaxMap_ = nullptr;
  widgets::HeatmapView* linearMap_ = nullptr;
  QLabel* mapsTitle_ = nullptr;
  QPlainTextEdit* log_ = nullptr;

  bool jobProgress_ = false;
  int64_t plannedSteps_ = 0, lastStep_ = 0;
  double smoothingWeight_ = 0.9;
  QVector<double> lossSteps_, lossValues_, valSteps_, valValues_, lrSteps_, lrValues_;
  std::map<std::string, runs::TableSeries> tables_;
  std::optional<runs::Snapshot> snapshot_;
  std::vector<runs::LayerHead> pairs_;
  QStringList tokens_;
  int pairIndex_ = 0;
};

}  // namespace hh::gui
