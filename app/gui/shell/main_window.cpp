// Workbench main window: settings tool bar, comparison view, export, status bar (see
// main_window.h).
#include "app/gui/shell/main_window.h"

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
#include <QStackedWidget>
#include <QTabWidget>
#include <QThread>
#include <QThreadPool>
#include <QTimer>
#include <QToolBar>
#include <QVBoxLayout>

#include "app/gui/common/error_dialog.h"
#include "app/gui/common/export_dialogs.h"
#include "app/gui/comparison/comparison_controls.h"
#include "app/gui/comparison/comparison_view.h"
#include "app/gui/conversion/config_form.h"
#include "app/gui/conversion/conversion_summary.h"
#include "app/gui/conversion/dashboard_view.h"
#include "app/gui/conversion/job_runner.h"
#include "app/gui/conversion/process_job_runner.h"
#include "app/gui/conversion/run_follower.h"
#include "app/gui/experiments/experiment_processes.h"
#include "app/gui/experiments/experiment_view.h"
#include "app/gui/generation/generation_view.h"
#include "app/gui/inspector/inspector_view.h"
#include "app/gui/inspector/model_session.h"
#include "app/gui/rank/rank_view.h"
#include "app/gui/runs/run_browser.h"
#include "app/gui/shell/model_tree.h"
#include "app/gui/shell/recent_files.h"
#include "engine/config/config_file.h"
#include "engine/core/runtime.h"
#include "engine/runs/run_reader.h"
#include "widgets/figure_export.h"

#include <cstdio>
#include <cstdlib>

namespace hh::gui {
namespace {
constexpr int kComputeDelayMs = 150;  // after the last edit
}  // namespace

MainWindow::MainWindow(QWidget* parent) : QMainWindow(parent) {
  setWindowTitle(QStringLiteral("Hedgehog Workbench"));
  setWindowIcon(QIcon(QStringLiteral(":/icons/hedgehog.svg")));
  startEngineThread();
  session_ = std::make_shared<ModelSession>();
  inspector_ = new InspectorView(session_, pool_);
  view_ = new ComparisonView;
  controls_ = new ComparisonControls(featureMapNames());
  buildComparisonPage();
  buildTabs();
  buildModelDock();
  connectViews();
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

void MainWindow::startEngineThread() {
  // The engine works on background threads; leave one core to the GUI thread so that it keeps
  // painting under load (HH_NUM_THREADS, when set, is obeyed as it is; jobs' initRuntime keeps it).
  if (const int hardware = hh::runtimeInfo().hardwareThreads; hardware > 1) hh::setDefaultThreadCount(hardware - 1);
  pool_ = new QThreadPool(this);
  pool_->setMaxThreadCount(1);
  pool_->setExpiryTimeout(-1);  // one long-lived thread, so the settings below stay with it
  // The pool's thread runs engine work: give it the same thread settings (they are per thread).
  const int engineThreads = hh::runtimeInfo().intraOpThreads;
  pool_->start([engineThreads] { hh::applyThreadCount(engineThreads); });
}

// The comparison controls with Recompute (F5) above the comparison view.
void MainWindow::buildComparisonPage() {
  comparisonPage_ = new QWidget;
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

// Every tab: the inspector, the comparison, the conversion (the dashboard while a run goes on, a
// finished conversion's summary after), the runs, the experiments, generation and layer ranking.
void MainWindow::buildTabs() {
  dashboard_ = new DashboardView;
  summary_ = new ConversionSummaryView;
  conversionPage_ = new QStackedWidget;
  conversionPage_->addWidget(dashboard_);
  conversionPage_->addWidget(summary_);
  connect(summary_, &ConversionSummaryView::openModelRequested, this, [this](const QString& folder) { openModel(folder); });
  connect(summary_, &ConversionSummaryView::openRunRequested, this, &MainWindow::openRun);
  browser_ = new RunBrowser;
  tabs_ = new QTabWidget;
  tabs_->addTab(inspector_, tr("Attention inspector"));
  tabs_->addTab(comparisonPage_, tr("Feature-map comparison"));
  tabs_->addTab(conversionPage_, tr("Conversion dashboard"));
  tabs_->addTab(browser_, tr("Runs"));
  experiments_ = new ExperimentView;
  connect(experiments_, &ExperimentView::runRequested, this, &MainWindow::openRun);
  tabs_->addTab(experiments_, tr("Experiments"));
  generationView_ = new GenerationView;
  tabs_->addTab(generationView_, tr("Generation"));
  connect(generationView_, &GenerationView::statusMessage, this, [this](const QString& text) {
    statusBar()->showMessage(text, 8000);
  });
  rank_ = new RankView;
  tabs_->addTab(rank_, tr("Layer ranking"));
  connect(rank_, &RankView::statusMessage, this, [this](const QString& text) { statusBar()->showMessage(text, 8000); });
  connect(browser_, &RunBrowser::runActivated, this, &MainWindow::openRun);
  browser_->refresh();
  setCentralWidget(tabs_);
}

void MainWindow::buildModelDock() {
  modelTree_ = new ModelTree;
  modelDock_ = new QDockWidget(tr("Model"), this);
  modelDock_->setObjectName(QStringLiteral("modelDock"));
  modelDock_->setWidget(modelTree_);
  addDockWidget(Qt::LeftDockWidgetArea, modelDock_);
  connect(modelTree_, &ModelTree::headActivated, this, [this](int layer, int head) {
    showInspector();
    inspector_->showHead(layer, head);
  });
}

// What one view asks of another (a head to inspect or compare, a new text, a new device), the
// comparison's recompute timer, and hover readouts on the status bar.
void MainWindow::connectViews() {
  connect(inspector_, &InspectorView::compareRequested, this, [this](int layer, int head) {
    controls_->showModelHead(layer, head);
    showComparison();
  });
  connect(inspector_, &InspectorView::computeChoiceChanged, this, [this] {
    if (loading_ > 0)
      reloadWhenIdle_ = true;  // after the load or export under way (reloadIfAsked)
    else if (!modelFolder_.isEmpty())
      openModel(modelFolder_, false);
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
}

MainWindow::~MainWindow() {
  comparisons_.drop();     // drop anything still in flight
  inspector_->cancelInspection();  // a long inspection stops within a head's work, not at its end
  pool_->waitForDone();    // its lambda refers to this window
  runner_->cancel();
  runner_->wait(-1);
  disconnect(processRunner_, nullptr, this, nullptr);  // its finished() would reach a window going away
  if (!processRunner_->cancelRequested()) processRunner_->cancel();  // a second one would force-stop
  processRunner_->wait(-1);
  disconnect(experimentProcesses_, nullptr, this, nullptr);  // no summary for a window going away
  if (!experimentProcesses_->cancelRequested()) experimentProcesses_->cancel();
  experimentProcesses_->wait(-1);
  followerThread_->quit();
  followerThread_->wait();
}

void MainWindow::setSettings(const ComparisonSettings& settings) {
  controls_->setSettings(settings);
  scheduleCompute();
}

bool MainWindow::busy() const {
  return running_ > 0 || computeTimer_->isActive() || loading_ > 0 || inspector_->busy() || generationView_->loading();
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
  const QList<QWidget*> pages{inspector_, comparisonPage_, conversionPage_, browser_, experiments_, generationView_, rank_};
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

void MainWindow::buildStatusBar() {
  const hh::RuntimeInfo info = hh::runtimeInfo();
  computeStatus_ = new QLabel;
  auto* device = new QLabel(tr("device: %1").arg(QString::fromStdString(info.device)));
  device->setToolTip(tr("Where conversions and training run unless their form says otherwise (device \"auto\")"));
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
  comparisons_.drop();  // whatever is running now is out of date
  computeTimer_->start();
  computeStatus_->setText(tr("computing\u2026"));
}

void MainWindow::startCompute() {
  computeTimer_->stop();
  const ComparisonSettings settings = controls_->settings();
  ++running_;
  computeStatus_->setText(tr("computing\u2026"));
  auto session = session_;
  comparisons_.run(
      pool_, this,
      [settings, session] {
        return settings.modelHead ? session->headComparison(settings.layer, settings.head, settings)
                                  : computeComparison(settings);
      },
      [this](ComparisonResult result) { onComputed(std::move(result)); }, [this] { --running_; });
}

// The result is moved into the view: its T x T matrices are shared, not copied.
void MainWindow::onComputed(ComparisonResult result) {
  if (!result.error.isEmpty()) {
    view_->showError(result.error);
    computeStatus_->setText(tr("failed"));
  } else {
    const double milliseconds = result.milliseconds;
    view_->setResult(std::move(result));
    computeStatus_->setText(tr("%1 ms").arg(milliseconds, 0, 'f', 1));
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
void MainWindow::showGeneration() { tabs_->setCurrentWidget(generationView_); }
void MainWindow::showExperiments() { tabs_->setCurrentWidget(experiments_); }

}  // namespace hh::gui
