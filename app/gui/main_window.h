// The workbench main window: two tabs, the feature-map comparison (its settings in a tool bar)
// the conversion dashboard (a run file followed live) and the run browser (runs/); a Run menu and tool bar to convert a
// project file (the CLI's `hedgehog convert` config), open a run file and cancel the job; a File
// menu (export the comparison as PNG / SVG / PDF) and a status bar with the compute device and
// Torch's thread count.
// Computations run on a one-thread pool (never on the GUI thread); edits are coalesced by a
// short timer and a result that an edit has overtaken is dropped.
#pragma once
#include <QMainWindow>

#include "app/gui/attention_comparison.h"

class QLabel;
class QTabWidget;
class QThread;
class QThreadPool;
class QTimer;

namespace hh::gui {

class ComparisonControls;
class ComparisonView;
class DashboardView;
class JobRunner;
class RunBrowser;
class RunFollower;

class MainWindow : public QMainWindow {
  Q_OBJECT

 public:
  explicit MainWindow(QWidget* parent = nullptr);
  ~MainWindow() override;

  // Applies settings (e.g. from the command line) and recomputes.
  void setSettings(const ComparisonSettings& settings);
  ComparisonView* comparisonView() const { return view_; }
  // Whether a computation is queued or running.
  bool busy() const;

  // Starts the conversion a project file describes and follows it on the dashboard. Returns an
  // empty string, or why it could not start (unreadable or invalid file, a job already running).
  QString startConversion(const QString& projectPath);
  // Shows a run file on the dashboard (following it while it grows).
  void openRun(const QString& path);
  void cancelJob();
  DashboardView* dashboard() const { return dashboard_; }
  JobRunner* jobRunner() const { return runner_; }
  RunBrowser* runBrowser() const { return browser_; }
  void showDashboard();
  void showRuns();

 Q_SIGNALS:
  // A computation finished and its result is on screen (or its error is shown).
  void comparisonReady();
  // The in-process job finished (status completed | failed | cancelled).
  void jobFinished(const QString& status, const QString& message);
  // Internal: asks the follower (on its own thread) to follow a file.
  void followRequested(const QString& path);

 private:
  void buildMenus();
  void buildStatusBar();
  void scheduleCompute();
  void startCompute();
  void onComputed(const ComparisonResult& result, int generation);
  void exportFigure();
  void buildRunControls();
  void chooseProject();
  void chooseRun();

  ComparisonControls* controls_ = nullptr;
  ComparisonView* view_ = nullptr;
  QLabel* computeStatus_ = nullptr;
  QTimer* computeTimer_ = nullptr;
  QThreadPool* pool_ = nullptr;
  QTabWidget* tabs_ = nullptr;
  DashboardView* dashboard_ = nullptr;
  RunBrowser* browser_ = nullptr;
  JobRunner* runner_ = nullptr;
  RunFollower* follower_ = nullptr;
  QThread* followerThread_ = nullptr;
  QAction* cancelAction_ = nullptr;
  int generation_ = 0;  // bumped by every request; only the latest result is shown
  int running_ = 0;
};

}  // namespace hh::gui
