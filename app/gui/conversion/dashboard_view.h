// DashboardView: a run as it happens (or after), fed by RunFollower updates. Shows
//   - the run's kind, file, status and a progress bar (step / planned steps, or the in-process
//     job's own progress with ETA when the workbench runs it);
//   - the loss: the raw trace faint, an exponential moving average over it (smoothing slider,
//     0 = raw), the held-out loss as points; the learning rate beside it;
//   - a layer x head grid coloured by the latest per-head table (KL, entropy of the linear or
//     softmax weights, monotonicity; chosen in a combo box); clicking a head shows its snapshot;
//   - softmax and linear attention on the probe text for the chosen (layer, head), refreshed at
//     every snapshot, with their monotonicity curves (mean weight per q.k/sqrt(d) bin) overlaid
//     when the run stores curves;
//   - a step slider over the stored snapshots: moving it shows the grid and the probe maps as they
//     were at that snapshot's step (read by the follower on its thread); while the run is live
//     the slider follows the latest snapshot unless the user moved it away from the end;
//   - Pause / Resume while this process runs the job (the button asks; the owner of the job
//     answers with setPaused), and "paused" in the status;
//   - the run's log lines.
// Plain data in; nothing here blocks on the file (the follower reads it on its own thread).
// Cheap while live: the loss and learning-rate traces grow by appending (the smoothed trace is
// extended, not recomputed), plots redraw at most once per CurvePlot::kReplotDelayMs and not at
// all while hidden, and the grid and maps are redrawn only when a new table row or snapshot
// arrives (or, if they arrived while the dashboard was hidden, once when it is shown).
#pragma once
#include <QElapsedTimer>
#include <QWidget>

#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "app/gui/conversion/run_follower.h"

class QComboBox;
class QLabel;
class QPlainTextEdit;
class QProgressBar;
class QPushButton;
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
  // The job ended (completed | failed | cancelled): the bar says so at the last step it reached,
  // with no ETA left on it.
  void setJobEnded(const QString& status);
  QString progressText() const;
  void clear();

  // For tests and screenshots.
  int64_t lastStep() const { return lastStep_; }
  QString path() const { return path_; }  // the run file shown ("" when none)
  int lossPointCount() const { return int(lossSteps_.size()); }
  QString statusText() const;
  widgets::HeadGrid* headGrid() const { return grid_; }
  QComboBox* tableChoice() const { return tableChoice_; }
  widgets::CurvePlot* lossPlot() const { return loss_; }
  widgets::HeatmapView* softmaxMap() const { return softmaxMap_; }
  widgets::HeatmapView* linearMap() const { return linearMap_; }
  QString mapsTitleText() const;  // the line above the maps: which head, which step
  widgets::CurvePlot* monotonicityPlot() const { return mono_; }
  void setSmoothing(double weight);  // EMA weight in [0, 0.99]
  QSlider* stepSlider() const { return stepSlider_; }
  QPushButton* pauseButton() const { return pause_; }
  int snapshotCount() const { return int(snapshotSteps_.size()); }
  bool followingLatest() const { return followLatest_; }
  // Step of the snapshot on screen (-1 when none).
  int64_t shownSnapshotStep() const;
  // Wires a follower to this view (updates in, snapshot requests out, snapshots back), queued
  // when the follower lives on another thread.
  void attachFollower(RunFollower* follower);

 public Q_SLOTS:
  void applyUpdate(const hh::gui::RunUpdate& update);
  void showPair(int layer, int head);
  void showSnapshotAt(const hh::gui::SnapshotAtStep& loaded);
  // Whether this process runs a job (shows the Pause button) and whether it is paused.
  void setJobRunning(bool running);
  void setPaused(bool paused);
  // Whether the run shown is the job's own: the Pause button and the paused status belong on it
  // only, not on another run opened meanwhile.
  void setShowsJob(bool shows);

 Q_SIGNALS:
  void pauseRequested();
  void resumeRequested();
  void snapshotRequested(qint64 index);

 protected:
  void showEvent(QShowEvent* event) override;

 private:
  void createWidgets();   // dashboard_layout.cpp
  void arrangeWidgets();  // dashboard_layout.cpp
  void addTableChoices();
  void syncTableChoices();  // the tables the shown run has, and a choice among them
  void updateEmptyTexts();  // what the grid and the curves say while they have nothing to show
  void appendLoss(const runs::ScalarSeries& series);
  void showHeldOutTeacherKl();  // a run with val_kl: the held-out points and the legend follow it
  void rebuildSmoothed();
  void refreshGrid();
  void refreshMaps();
  void refreshCurves();
  void refreshStatus();
  void onStepSlider(int index);
  void updateStepLabel();
  const std::map<std::string, runs::TableSeries>& shownTables() const;
  const std::optional<runs::Snapshot>& shownSnapshot() const;
  const std::optional<runs::CurveSet>& shownCurves() const;

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
  widgets::CurvePlot* mono_ = nullptr;
  QPlainTextEdit* log_ = nullptr;
  QPushButton* pause_ = nullptr;
  QSlider* stepSlider_ = nullptr;
  QLabel* stepLabel_ = nullptr;

  QString path_, fileStatus_;
  bool jobProgress_ = false, jobRunning_ = false, paused_ = false, showsJob_ = true;
  int64_t jobStep_ = 0, jobTotal_ = 0;  // the job's last progress report
  QString jobPhase_;
  int64_t plannedSteps_ = 0, lastStep_ = 0;
  static constexpr double kNoAverage = std::numeric_limits<double>::quiet_NaN();  // before the first finite loss
  double smoothedLoss(double average, double loss) const;  // the running average after one more loss
  double smoothingWeight_ = 0.9, ema_ = kNoAverage;
  bool heldOutTeacherKl_ = false;  // the held-out points are val_kl (a finetuning on teacher_kl)
  QVector<double> lossSteps_, lossValues_;
  std::map<std::string, runs::TableSeries> tables_;  // latest row of each table
  std::optional<runs::Snapshot> snapshot_;           // latest snapshot
  // The step slider: snapshot steps so far, and what it shows when not following the latest.
  std::vector<int64_t> snapshotSteps_;
  bool followLatest_ = true;
  int64_t requestedIndex_ = -1;  // asked of the follower, not answered yet (-1: none)
  QElapsedTimer requestClock_;
  std::map<std::string, runs::TableSeries> pickedTables_;
  std::optional<runs::Snapshot> pickedSnapshot_;
  std::optional<runs::CurveSet> curves_, pickedCurves_;  // latest, and at the slider's snapshot
  std::vector<runs::LayerHead> curvePairs_;
  QStringList curveLabels_;
  int64_t pickedIndex_ = -1;
  bool gridStale_ = false, mapsStale_ = false;  // changed while hidden
  bool noLinearMap_ = false;  // the shown snapshot has no linear map (a softmax model's training)
  std::vector<runs::LayerHead> pairs_;
  QStringList tokens_;
  int pairIndex_ = 0;
};

}  // namespace hh::gui
