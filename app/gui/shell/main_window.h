// The workbench main window. Tabs: the attention inspector (a loaded model on a text), the
// feature-map comparison (its settings above it), the conversion dashboard (a run file followed
// live) and the run browser (runs/). A "Model" dock with the loaded model's tree and pre-flight
// report. File menu: open a model folder or a project file, recent files, export the current
// view as PNG / SVG / PDF. Run menu and tool bar: convert a project file (the CLI's
// `hedgehog convert` config), open a run file, pause / cancel the job. A conversion runs in this
// process on a worker thread (JobRunner), or, on several processes, as `hedgehog convert --nproc N`
// (ProcessJobRunner; paused by signal); the dashboard follows either's run files (main_window_runs.cpp).
// Layer ranking tab (Run > Rank layers…, Open a ranking…): the rank job on the model, a
// layers x heads heatmap of how hard each head is to convert, and a per-layer plan whose
// "Convert with this plan…" opens the New conversion form prefilled (app/gui/rank/rank_view.h).
// Status bar: compute device, Torch threads, resident memory, "Converting on N processes".
// Window geometry and the dock layout are kept in QSettings, the layout per project (or model
// folder).
// Engine work runs on a one-thread pool (never on the GUI thread); comparison edits are
// coalesced by a short timer and a result that an edit has overtaken is dropped.
#pragma once
#include <QDateTime>
#include <QMainWindow>
#include <QMap>
#include <QStringList>

#include <memory>

#include "app/gui/common/latest_only.h"
#include "app/gui/comparison/comparison_session.h"
#include "engine/config/experiment_config.h"
#include "engine/jobs/convert_job.h"

class QDockWidget;
class QLabel;
class QMenu;
class QStackedWidget;
class QTabWidget;
class QThread;
class QThreadPool;
class QTimer;

namespace hh::gui {

class ComparisonControls;
class ComparisonView;
class ConversionSummaryView;
class DashboardView;
class InspectorView;
class JobRunner;
class JobSignals;
class ProcessJobRunner;
class RankView;
class ModelSession;
class ModelTree;
class RecentFiles;
class ExperimentProcesses;
class ExperimentView;
class GenerationView;
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
  ComparisonControls* comparisonControls() const { return controls_; }
  InspectorView* inspector() const { return inspector_; }
  ModelTree* modelTree() const { return modelTree_; }

  // Loads a model folder on the worker (modelLoaded follows); its tree fills the Model dock and
  // the inspector and comparison can use it. Opening one shows the inspector at once, whatever
  // tab the window reopened on; a project opens its model without leaving the tab its layout
  // restored (showInspector false).
  void openModel(const QString& folder, bool showInspector = true);
  // A project file (the convert config): loads its model and makes it the current project
  // (its dock layout is restored; Run > Convert runs it).
  QString openProject(const QString& path);
  // The menu actions on a chosen path: as above, and a failure is shown in an error dialog.
  void openProjectReporting(const QString& path);
  void convertProjectReporting(const QString& path);
  // File > Export weights to `output` (float32 | float16 | bfloat16) on the worker; a failure is
  // shown in an error dialog; weightsExported follows.
  void exportWeightsTo(const QString& output, const QString& dtype, bool adaptersOnly);
  void showInspector();
  void showComparison();
  // Whether a computation, model load or inspection is queued or running.
  bool busy() const;

  // Starts the conversion a project file describes and follows it on the dashboard. Returns an
  // empty string, or why it could not start (unreadable or invalid file, a job already running,
  // for processes > 1 the CLI missing). processes > 1: data-parallel on that many local processes
  // through the CLI (ProcessJobRunner); 1: in this process (JobRunner).
  QString startConversion(const QString& projectPath, int processes = 1);
  // Starts a conversion from a config (e.g. the New conversion form); same as above.
  QString startConversionWith(const jobs::ConvertConfig& config, const QString& label, int processes = 1);
  // Whether a conversion runs (in this process or through the CLI).
  bool jobRunning() const;
  // Run > New conversion: the config form, prefilled from the project and the loaded model.
  void newConversion();
  // The form prefilled with `initial` (e.g. a plan from the Layer ranking tab); its Start starts
  // the conversion as startConversionWith does.
  void newConversionWith(const jobs::ConvertConfig& initial);
  // What the New conversion form starts from: the project's config, the loaded model in it.
  jobs::ConvertConfig conversionDefaults() const;
  // Shows a run file on the dashboard (following it while it grows).
  void openRun(const QString& path);
  void cancelJob();
  DashboardView* dashboard() const { return dashboard_; }
  ConversionSummaryView* conversionSummary() const { return summary_; }
  // Shows the summary of the convert run file `path` on the conversion tab; returns an error or
  // empty.
  QString showConversionSummary(const QString& path);
  // Whether the conversion tab shows the summary (else the dashboard).
  bool showingSummary() const;
  JobRunner* jobRunner() const { return runner_; }
  ProcessJobRunner* processJobRunner() const { return processRunner_; }
  RunBrowser* runBrowser() const { return browser_; }
  void showDashboard();
  void showRuns();
  void showGeneration();
  void showExperiments();
  // Opens an experiment folder (summary.json) on the Experiments tab; returns an error or empty.
  QString openExperiment(const QString& path);
  // Runs an experiment project file (engine/jobs/experiment_job.h): with parallel = 1 in this
  // process, variant after variant; with parallel > 1 (and more than one variant to run) that many
  // at a time, each in a process of the CLI (ExperimentProcesses). The dashboard follows a
  // running variant's run file, Cancel stops every running one within a step, and the Experiments
  // tab shows the summary when the last has ended. Variants done earlier with the same config are
  // reused, and one left unfinished continues from its checkpoint, so a cancelled experiment
  // started again goes on where it stopped. Returns an empty string, or why it could not start
  // (unreadable or invalid file, a job already running, the CLI missing).
  QString startExperiment(const QString& projectPath, int parallel = 1);
  ExperimentProcesses* experimentProcesses() const { return experimentProcesses_; }
  // Run > Run an experiment: how many variants of the experiment file to run at once, asked when more than one is to
  // run (the last answer is the next default); 1 when at most one is or the file does not parse (startExperiment then
  // says why); 0 when the user declines.
  int askParallel(const QString& path);
  ExperimentView* experiments() const { return experiments_; }
  // Run > Rank layers…: the Layer ranking tab, its model folder set to the loaded model (unless
  // a ranking runs).
  void showRank();
  // Shows a saved rank.json on the Layer ranking tab; returns an error or empty.
  QString openRanking(const QString& path);
  RankView* rankView() const { return rank_; }
  GenerationView* generation() const { return generationView_; }

 Q_SIGNALS:
  // A computation finished and its result is on screen (or its error is shown).
  void comparisonReady();
  // A model folder finished loading (error empty) or failed.
  void modelLoaded(const QString& error);
  // The job finished, in-process or multi-process (status completed | failed | cancelled).
  void jobFinished(const QString& status, const QString& message);
  // An export of weights finished (error empty) or failed.
  void weightsExported(const QString& error);
  // Internal: asks the follower (on its own thread) to follow a file.
  void followRequested(const QString& path);

 private:
  void startEngineThread();  // the one pool thread for engine work, with its thread settings
  void buildComparisonPage();
  void buildTabs();
  void buildModelDock();
  void connectViews();
  void buildMenus();
  void buildHelpMenu();
  void buildStatusBar();
  void scheduleCompute();
  void startCompute();
  void onComputed(ComparisonResult result);
  void exportFigure();
  void exportWeights();
  void buildRunControls();  // the Run menu and toolbar, the job runners and the run file follower
  void startRunFollower();
  QList<QAction*> addStartActions(QMenu* run);
  void addRankActions(QMenu* run);
  void addCancelAndPause(QMenu* run);
  void setDashboardFollowsJob(bool follows);  // and the dashboard's Pause button with it
  // Every runner's runFileStarted; the end of a conversion, and of an experiment.
  void jobRunFileStarted(const QString& path);
  void conversionEnded(const QString& status, const QString& message, const QString& runFile,
                       const QString& exportPath);
  void experimentEnded(const QString& status, const QString& message, const QString& summary);
  void chooseExperimentToRun();
  // The experiment processes' status bar count, live rows and summary; Run > Follow a running variant.
  void wireExperimentProcesses(QMenu* run);
  void fillFollowMenu();
  void experimentChildrenEnded(const QStringList& ran, const QMap<QString, QString>& failures, bool cancelled);
  void showExperimentProcesses();  // the status bar's "N of M variants running, K ended"
  // The Experiments tab follows the running experiment's summary.json as variants end (each
  // rewrites it): reloaded when the tab shows that experiment, opened when it shows none; the
  // tab on screen stays the one the user chose.
  void refreshRunningExperiment();
  // The Experiments tab's grey rows for the running experiment's variants not in its summary yet
  // (running, or waiting for their turn), when the tab shows that experiment.
  void updateLiveRows();
  // A run file of the experiment running in this process has started: its variant runs now.
  void noteInProcessVariant(const QString& runFile);
  void processJobRunningChanged(bool running);
  JobSignals* activeJob() const;
  void chooseProject();
  void chooseRun();
  void chooseModel();
  void chooseProjectToOpen();
  void openRecent(const QString& kind, const QString& path);
  void updateMemory();
  QString layoutKey() const;
  void saveLayout();
  void restoreLayout();

 protected:
  void closeEvent(QCloseEvent* event) override;
  void reloadIfAsked();  // a reload asked for while busy, once nothing loads

 private:
  ComparisonControls* controls_ = nullptr;
  ComparisonView* view_ = nullptr;
  QLabel* computeStatus_ = nullptr;
  QTimer* computeTimer_ = nullptr;
  QThreadPool* pool_ = nullptr;
  QTabWidget* tabs_ = nullptr;
  QStackedWidget* conversionPage_ = nullptr;  // the dashboard, or the summary of a finished conversion
  DashboardView* dashboard_ = nullptr;
  ConversionSummaryView* summary_ = nullptr;
  RunBrowser* browser_ = nullptr;
  ExperimentView* experiments_ = nullptr;
  GenerationView* generationView_ = nullptr;
  RankView* rank_ = nullptr;
  JobRunner* runner_ = nullptr;
  ProcessJobRunner* processRunner_ = nullptr;
  ExperimentProcesses* experimentProcesses_ = nullptr;
  QMenu* followMenu_ = nullptr;  // Run > Follow a running variant (enabled while variants run on processes)
  // The experiment running (its summary job, when its variants ran on processes, needs it), and
  // whether the user cancelled the processes (the summary's own status may not say so).
  jobs::ExperimentConfig runningExperiment_;
  bool processExperimentCancelled_ = false;
  QDateTime summaryShown_;  // the running experiment's summary.json as the Experiments tab last read it
  QStringList pendingVariants_;  // what the running experiment runs, in order
  QString inProcessVariant_;     // the one the in-process runner runs now
  QAction* pauseAction_ = nullptr;
  QLabel* processStatus_ = nullptr;  // "Converting on N processes" while one runs
  RunFollower* follower_ = nullptr;
  QThread* followerThread_ = nullptr;
  QAction* cancelAction_ = nullptr;
  std::shared_ptr<ModelSession> session_;
  InspectorView* inspector_ = nullptr;
  QWidget* comparisonPage_ = nullptr;
  ModelTree* modelTree_ = nullptr;
  QDockWidget* modelDock_ = nullptr;
  RecentFiles* recent_ = nullptr;
  QLabel* memory_ = nullptr;
  QString project_;      // the current project file ("" = none)
  QString modelFolder_;  // the loaded model folder ("" = none)
  bool dashboardFollowsJob_ = false;  // the dashboard shows the running job's run file
  QString jobRunFile_;                // the job's current stage's run file
  int loading_ = 0;      // model loads queued or running
  bool reloadWhenIdle_ = false;  // the device or precision changed while loading_ > 0
  LatestOnly comparisons_;  // only the newest comparison is shown
  int running_ = 0;
};

}  // namespace hh::gui
