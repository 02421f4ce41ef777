// Workbench main window: settings tool bar, comparison view, export, status bar (see
// main_window.h).
#include "app/gui/main_window.h"

#include <QAction>
#include <QApplication>
#include <QCloseEvent>
#include <QDateTime>
#include <QDockWidget>
#include <QFile>
#include <QFileDialog>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QLabel>
#include <QMenuBar>
#include <QMessageBox>
#include <QPushButton>
#include <QSettings>
#include <QShortcut>
#include <QStatusBar>
#include <QTabWidget>
#include <QThread>
#include <QThreadPool>
#include <QTimer>
#include <QToolBar>
#include <QVBoxLayout>

#include "app/gui/comparison_controls.h"
#include "app/gui/comparison_view.h"
#include "app/gui/error_dialog.h"
#include "app/gui/config_form.h"
#include "app/gui/dashboard_view.h"
#include "app/gui/experiment_view.h"
#include "app/gui/export_dialogs.h"
#include "app/gui/generation_view.h"
#include "app/gui/inspector_view.h"
#include "app/gui/job_runner.h"
#include "app/gui/model_session.h"
#include "app/gui/model_tree.h"
#include "app/gui/recent_files.h"
#include "engine/jobs/config_file.h"
#include "engine/runs/run_reader.h"
#include "app/gui/run_browser.h"
#include "app/gui/run_follower.h"
#include "engine/core/runtime.h"
#include "widgets/figure_export.h"

#include <cstdio>
#include <cstdlib>

namespace hh::gui {
namespace {
constexpr int kComputeDelayMs = 150;  // after the last edit
}  // namespace

MainWindow::MainWindow(QWidget* parent) : QMainWindow(parent) {
  // The engine works on background threads; leave one core to the GUI thread so that it keeps
  // painting under load (HH_NUM_THREADS, when set, is obeyed as it is; jobs' initRuntime keeps it).
  if (const int hardware = hh::runtimeInfo().hardwareThreads; hardware > 1) hh::setDefaultThreadCount(hardware - 1);
  setWindowTitle(QStringLiteral("Hedgehog Workbench"));
  setWindowIcon(QIcon(QStringLiteral(":/icons/hedgehog.svg")));
  pool_ = new QThreadPool(this);
  pool_->setMaxThreadCount(1);
  pool_->setExpiryTimeout(-1);  // one long-lived thread, so the settings below stay with it
  // The pool's thread runs engine work: give it the same thread settings (they are per thread).
  const int engineThreads = at::get_num_threads();
  pool_->start([engineThreads] { hh::applyThreadCount(engineThreads); });
  session_ = std::make_shared<ModelSession>();

  inspector_ = new InspectorView(session_, pool_);
  view_ = new ComparisonView;
  controls_ = new ComparisonControls(featureMapNames());
  comparisonPage_ = new QWidget;
  {
    auto* layout = new QVBoxLayout(comparisonPage_);
    layout->setContentsMargins(0, 6, 0, 0);
    auto* row = new QHBoxLayout;
    row->addWidget(controls_);
    row->addStretch(1);
    auto* compute = new QPushButton(tr("Recompute"));
    compute->setToolTip(tr("Recompute the comparison (F5)"));
    connect(compute, &QPushButton::clicked, this, &MainWindow::startCompute);
    row->addWidget(compute);
    layout->addLayout(row);
    layout->addWidget(view_, 1);
    auto* f5 = new QShortcut(QKeySequence(Qt::Key_F5), comparisonPage_);
    connect(f5, &QShortcut::activated, this, &MainWindow::startCompute);
  }
  dashboard_ = new DashboardView;
  browser_ = new RunBrowser;
  tabs_ = new QTabWidget;
  tabs_->addTab(inspector_, tr("Attention inspector"));
  tabs_->addTab(comparisonPage_, tr("Feature-map comparison"));
  tabs_->addTab(dashboard_, tr("Conversion dashboard"));
  tabs_->addTab(browser_, tr("Runs"));
  experiments_ = new ExperimentView;
  tabs_->addTab(experiments_, tr("Experiments"));
  generationView_ = new GenerationView;
  tabs_->addTab(generationView_, tr("Generation"));
  connect(generationView_, &GenerationView::statusMessage, this, [this](const QString& text) {
    statusBar()->showMessage(text, 8000);
  });
  connect(browser_, &RunBrowser::runActivated, this, &MainWindow::openRun);
  browser_->refresh();
  setCentralWidget(tabs_);

  modelTree_ = new ModelTree;
  modelDock_ = new QDockWidget(tr("Model"), this);
  modelDock_->setObjectName(QStringLiteral("modelDock"));
  modelDock_->setWidget(modelTree_);
  addDockWidget(Qt::LeftDockWidgetArea, modelDock_);
  connect(modelTree_, &ModelTree::headActivated, this, [this](int layer, int head) {
    showInspector();
    inspector_->showHead(layer, head);
  });
  connect(inspector_, &InspectorView::compareRequested, this, [this](int layer, int head) {
    controls_->showModelHead(layer, head);
    showComparison();
  });
  connect(inspector_, &InspectorView::statusMessage, this, [this](const QString& text) {
    statusBar()->showMessage(text, 8000);
  });
  connect(inspector_, &InspectorView::inspected, this, [this] {
    // A new text changes every model head's q, k: refresh a comparison that shows one.
    if (controls_->settings().modelHead) scheduleCompute();
  });

  computeTimer_ = new QTimer(this);
  computeTimer_->setSingleShot(true);
  computeTimer_->setInterval(kComputeDelayMs);
  connect(computeTimer_, &QTimer::timeout, this, &MainWindow::startCompute);
  connect(controls_, &ComparisonControls::settingsChanged, this, &MainWindow::scheduleCompute);
  connect(view_, &ComparisonView::hoverText, this, [this](const QString& text) {
    if (text.isEmpty()) {
      statusBar()->clearMessage();
    } else {
      statusBar()->showMessage(text);
    }
  });

  buildMenus();
  buildRunControls();
  buildHelpMenu();
  buildStatusBar();
  resize(1500, 950);
  QSettings settings;
  if (settings.contains(QStringLiteral("window/geometry")))
    restoreGeometry(settings.value(QStringLiteral("window/geometry")).toByteArray());
  restoreLayout();
  scheduleCompute();
}

MainWindow::~MainWindow() {
  ++generation_;           // drop anything still in flight
  pool_->waitForDone();    // its lambda refers to this window
  runner_->cancel();
  runner_->wait(-1);
  followerThread_->quit();
  followerThread_->wait();
}

void MainWindow::setSettings(const ComparisonSettings& settings) {
  controls_->setSettings(settings);
  scheduleCompute();
}

bool MainWindow::busy() const {
  return running_ > 0 || computeTimer_->isActive() || loading_ > 0 || inspector_->busy();
}

void MainWindow::buildMenus() {
  QMenu* file = menuBar()->addMenu(tr("&File"));
  QAction* openModelAction = file->addAction(tr("Open &model folder\u2026"), this, &MainWindow::chooseModel);
  openModelAction->setShortcut(QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_O));
  QAction* openProjectAction = file->addAction(tr("Open &project\u2026"), this, &MainWindow::chooseProjectToOpen);
  openProjectAction->setShortcut(QKeySequence(Qt::CTRL | Qt::ALT | Qt::Key_O));
  recent_ = new RecentFiles(file->addMenu(tr("&Recent")), this);
  connect(recent_, &RecentFiles::openRequested, this, &MainWindow::openRecent);
  file->addSeparator();
  QAction* exportAction = file->addAction(tr("&Export the view\u2026"), this, &MainWindow::exportFigure);
  exportAction->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_E));
  exportAction->setToolTip(tr("Save the current tab as PNG, SVG or PDF"));
  file->addAction(tr("Export &weights of the model\u2026"), this, &MainWindow::exportWeights);
  file->addSeparator();
  QAction* quit = file->addAction(tr("&Quit"), qApp, &QApplication::closeAllWindows);
  quit->setShortcut(QKeySequence::Quit);
  QMenu* view = menuBar()->addMenu(tr("&View"));
  const QList<QWidget*> pages{inspector_, comparisonPage_, dashboard_, browser_, experiments_};
  for (int i = 0; i < pages.size(); ++i) {
    QAction* a = view->addAction(tabs_->tabText(i), this, [this, page = pages[i]] { tabs_->setCurrentWidget(page); });
    a->setShortcut(QKeySequence(Qt::CTRL | Qt::Key(Qt::Key_1 + i)));
  }
  view->addSeparator();
  view->addAction(modelDock_->toggleViewAction());
}

void MainWindow::buildHelpMenu() {
  QMenu* help = menuBar()->addMenu(tr("&Help"));
  help->addAction(tr("&About"), this, [this] {
    const hh::RuntimeInfo info = hh::runtimeInfo();
    QMessageBox::about(this, tr("About Hedgehog Workbench"),
                       tr("<b>Hedgehog Workbench</b> %1<br>Linear attentions that mimic softmax "
                          "(Zhang et al., ICLR 2024).<br>Torch %2 on %3.")
                           .arg(QString::fromLatin1(hh::engineVersion()), QString::fromStdString(info.torchVersion),
                                QString::fromStdString(info.device)));
  });
  help->addAction(tr("&Keyboard shortcuts"), this, [this] {
    // Every menu action that has a shortcut, as a table.
    QString rows;
    for (QAction* menu : menuBar()->actions()) {
      if (!menu->menu()) continue;
      for (QAction* a : menu->menu()->actions())
        if (!a->shortcut().isEmpty())
          rows += QStringLiteral("<tr><td><b>%1</b></td><td>%2</td></tr>")
                      .arg(a->shortcut().toString(QKeySequence::NativeText).toHtmlEscaped(),
                           a->text().remove(QLatin1Char('&')).toHtmlEscaped());
    }
    rows += tr("<tr><td><b>F5</b></td><td>Recompute the comparison</td></tr>"
               "<tr><td><b>Ctrl+Return</b></td><td>Inspect the text</td></tr>"
               "<tr><td><b>wheel / drag / double-click</b></td><td>zoom / pan / reset a heatmap</td></tr>");
    QMessageBox::information(this, tr("Keyboard shortcuts"), QStringLiteral("<table cellspacing='6'>%1</table>").arg(rows));
  });
}

void MainWindow::buildRunControls() {
  runner_ = new JobRunner(this);
  follower_ = new RunFollower;
  followerThread_ = new QThread(this);
  follower_->moveToThread(followerThread_);
  connect(followerThread_, &QThread::finished, follower_, &QObject::deleteLater);
  connect(this, &MainWindow::followRequested, follower_, &RunFollower::follow);
  dashboard_->attachFollower(follower_);  // updates in; the step slider's snapshot reads out and back
  connect(follower_, &RunFollower::failed, this, [this](const QString& message) {
    statusBar()->showMessage(tr("Run file: %1").arg(message), 10000);
    showErrorDialog(this, tr("Run file"), message);
  });
  followerThread_->start();

  connect(runner_, &JobRunner::runFileStarted, this, [this](const QString& path) {
    Q_EMIT followRequested(path);
    showDashboard();
  });
  connect(runner_, &JobRunner::progress, dashboard_, &DashboardView::setJobProgress);
  connect(runner_, &JobRunner::finished, this,
          [this](const QString& status, const QString& message, const QString& runFile, const QString& exportPath) {
            cancelAction_->setEnabled(false);
            QString text = tr("Conversion %1: %2").arg(status, message);
            if (!exportPath.isEmpty()) text += tr(" | exported model: %1").arg(exportPath);
            statusBar()->showMessage(text);
            if (status == QLatin1String("failed")) showErrorDialog(this, tr("Conversion failed"), message);
            if (!runFile.isEmpty()) std::fprintf(stdout, "run file: %s\n", qPrintable(runFile));
            if (!exportPath.isEmpty()) std::fprintf(stdout, "exported model: %s\n", qPrintable(exportPath));
            std::fflush(stdout);
            browser_->refresh();
            Q_EMIT jobFinished(status, message);
          });

  QMenu* run = menuBar()->addMenu(tr("&Run"));
  QAction* newAction = run->addAction(tr("&New conversion\u2026"), this, &MainWindow::newConversion);
  newAction->setShortcut(QKeySequence::New);
  newAction->setToolTip(tr("Edit every setting of a conversion in a form, then start it"));
  QAction* convert = run->addAction(tr("&Convert a project\u2026"), this, &MainWindow::chooseProject);
  convert->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_R));
  QAction* open = run->addAction(tr("&Open a run file\u2026"), this, &MainWindow::chooseRun);
  open->setShortcut(QKeySequence::Open);
  run->addAction(tr("Open an &experiment\u2026"), this, [this] {
    const QString dir = QFileDialog::getExistingDirectory(this, tr("Open an experiment (a folder with summary.json)"),
                                                          QStringLiteral("runs/experiments"));
    if (dir.isEmpty()) return;
    const QString error = openExperiment(dir);
    if (!error.isEmpty()) showErrorDialog(this, tr("Open an experiment"), error);
  });
  cancelAction_ = run->addAction(tr("C&ancel the job"), this, &MainWindow::cancelJob);
  cancelAction_->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_Period));
  cancelAction_->setEnabled(false);
  // Pause / resume: the menu action and the dashboard's button both toggle the runner; the
  // runner's pausedChanged updates both (the job stops at its next step; cancel still works).
  QAction* pauseAction = run->addAction(tr("&Pause the job"));
  pauseAction->setObjectName(QStringLiteral("pauseJobAction"));
  pauseAction->setShortcut(QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_P));
  pauseAction->setEnabled(false);
  connect(pauseAction, &QAction::triggered, this, [this] { runner_->paused() ? runner_->resume() : runner_->pause(); });
  connect(dashboard_, &DashboardView::pauseRequested, runner_, &JobRunner::pause);
  connect(dashboard_, &DashboardView::resumeRequested, runner_, &JobRunner::resume);
  connect(runner_, &JobRunner::runningChanged, dashboard_, &DashboardView::setJobRunning);
  connect(runner_, &JobRunner::runningChanged, pauseAction, &QAction::setEnabled);
  connect(runner_, &JobRunner::pausedChanged, dashboard_, &DashboardView::setPaused);
  connect(runner_, &JobRunner::pausedChanged, this, [this, pauseAction](bool paused) {
    pauseAction->setText(paused ? tr("&Resume the job") : tr("&Pause the job"));
    if (runner_->running()) statusBar()->showMessage(paused ? tr("Paused (the job waits at its next step)") : tr("Resumed"));
  });
  auto* bar = addToolBar(tr("Run"));
  bar->setObjectName(QStringLiteral("runToolBar"));
  bar->addAction(newAction);
  bar->addAction(convert);
  bar->addAction(open);
  bar->addAction(pauseAction);
  bar->addAction(cancelAction_);
}

void MainWindow::showDashboard() {
  tabs_->setCurrentWidget(dashboard_);
}

void MainWindow::showGeneration() { tabs_->setCurrentWidget(generationView_); }

void MainWindow::showRuns() {
  tabs_->setCurrentWidget(browser_);
}

QString MainWindow::startConversion(const QString& projectPath) {
  if (runner_->running()) return tr("a job is already running");
  jobs::ConvertConfig config;
  try {
    config = jobs::convertConfigFromJson(jobs::readConfigFile(projectPath.toStdString(), "convert"));
    if (config.modelDir.empty()) return tr("%1: no \"model\"").arg(projectPath);
    if (config.runDir.empty()) config.runDir = "runs/convert";
  } catch (const std::exception& e) {
    const QString what = QString::fromStdString(e.what());
    return what.startsWith(projectPath) ? what : tr("%1: %2").arg(projectPath, what);
  }
  return startConversionWith(config, projectPath);
}

QString MainWindow::startConversionWith(const jobs::ConvertConfig& config, const QString& label) {
  if (runner_->running()) return tr("a job is already running");
  dashboard_->clear();
  if (!runner_->startConvert(config)) return tr("a job is already running");
  cancelAction_->setEnabled(true);
  showDashboard();
  statusBar()->showMessage(tr("Converting %1 (%2)").arg(QString::fromStdString(config.modelDir), label));
  return {};
}

void MainWindow::newConversion() {
  jobs::ConvertConfig initial;
  if (!project_.isEmpty()) {
    try {
      initial = jobs::convertConfigFromJson(jobs::readConfigFile(project_.toStdString(), "convert"));
    } catch (const std::exception&) {
      // The project changed on disk since it was opened: start from the defaults.
    }
  }
  if (!modelFolder_.isEmpty()) initial.modelDir = modelFolder_.toStdString();
  if (initial.runDir.empty()) initial.runDir = "runs/convert";
  ConversionDialog dialog(initial, this);
  if (dialog.exec() != QDialog::Accepted) return;
  const QString error = startConversionWith(dialog.config(), tr("from the form"));
  if (!error.isEmpty()) showErrorDialog(this, tr("Convert"), error);
}

void MainWindow::openRun(const QString& path) {
  // A file the user picked is checked here, so a bad one gets its dialog at once. One that does
  // not exist yet or changed in the last seconds may be a run a job is starting to write: the
  // follower waits for it and reports it (also by a dialog) if it never becomes readable.
  const QFileInfo info(path);
  const bool settled = info.exists() && info.lastModified().secsTo(QDateTime::currentDateTime()) > 5;
  if (settled) {
    try {
      runs::RunReader::open(path.toStdString());
    } catch (const std::exception& e) {
      const QString what = QString::fromStdString(e.what());
      showErrorDialog(this, tr("Open a run file"), what.contains(path) ? what : tr("%1: %2").arg(path, what));
      return;
    }
  }
  recent_->add(QStringLiteral("run"), path);
  dashboard_->clear();
  Q_EMIT followRequested(path);
  showDashboard();
}

void MainWindow::cancelJob() {
  if (!runner_->running()) return;
  runner_->cancel();
  statusBar()->showMessage(tr("Cancelling\u2026 (the job stops within a step)"));
}

void MainWindow::chooseProject() {
  const QString path = QFileDialog::getOpenFileName(this, tr("Convert a project"), QStringLiteral("projects"),
                                                    tr("Project files (*.json)"));
  if (!path.isEmpty()) convertProjectReporting(path);
}

void MainWindow::convertProjectReporting(const QString& path) {
  const QString error = startConversion(path);
  if (!error.isEmpty()) showErrorDialog(this, tr("Convert"), error);
}

void MainWindow::chooseRun() {
  const QString path = QFileDialog::getOpenFileName(this, tr("Open a run file"), QStringLiteral("runs"),
                                                    tr("Run files (*.h5)"));
  if (!path.isEmpty()) openRun(path);
}

void MainWindow::buildStatusBar() {
  const hh::RuntimeInfo info = hh::runtimeInfo();
  computeStatus_ = new QLabel;
  auto* device = new QLabel(tr("device: %1").arg(QString::fromStdString(info.device)));
  auto* threads = new QLabel(tr("Torch threads: %1 of %2").arg(info.intraOpThreads).arg(info.hardwareThreads));
  auto* version = new QLabel(tr("Torch %1").arg(QString::fromStdString(info.torchVersion)));
  memory_ = new QLabel;
  memory_->setToolTip(tr("Resident memory of the workbench (the engine included)"));
  for (QLabel* label : {computeStatus_, device, threads, memory_, version}) {
    label->setContentsMargins(8, 0, 8, 0);
    statusBar()->addPermanentWidget(label);
  }
  auto* timer = new QTimer(this);
  connect(timer, &QTimer::timeout, this, &MainWindow::updateMemory);
  timer->start(2000);
  updateMemory();
}

void MainWindow::scheduleCompute() {
  ++generation_;  // whatever is running now is out of date
  computeTimer_->start();
  computeStatus_->setText(tr("computing\u2026"));
}

void MainWindow::startCompute() {
  computeTimer_->stop();
  const int generation = ++generation_;
  const ComparisonSettings settings = controls_->settings();
  ++running_;
  computeStatus_->setText(tr("computing\u2026"));
  auto session = session_;
  pool_->start([this, settings, generation, session] {
    ComparisonResult result = settings.modelHead ? session->headComparison(settings.layer, settings.head, settings)
                                                 : computeComparison(settings);
    QMetaObject::invokeMethod(this, [this, result = std::move(result), generation] { onComputed(result, generation); },
                              Qt::QueuedConnection);
  });
}

void MainWindow::onComputed(const ComparisonResult& result, int generation) {
  --running_;
  if (generation != generation_) return;  // overtaken by a newer request
  if (!result.error.isEmpty()) {
    view_->showError(result.error);
    computeStatus_->setText(tr("failed"));
  } else {
    view_->setResult(result);
    computeStatus_->setText(tr("%1 ms").arg(result.milliseconds, 0, 'f', 1));
  }
  Q_EMIT comparisonReady();
}

QString MainWindow::openExperiment(const QString& path) {
  const QString error = experiments_->open(path);
  if (error.isEmpty()) tabs_->setCurrentWidget(experiments_);
  return error;
}

void MainWindow::showInspector() { tabs_->setCurrentWidget(inspector_); }
void MainWindow::showComparison() { tabs_->setCurrentWidget(comparisonPage_); }

}  // namespace hh::gui
