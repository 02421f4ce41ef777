// Workbench main window: settings tool bar, comparison view, export, status bar (see
// main_window.h).
#include "app/gui/main_window.h"

#include <QAction>
#include <QApplication>
#include <QFileDialog>
#include <QLabel>
#include <QMenuBar>
#include <QMessageBox>
#include <QStatusBar>
#include <QTabWidget>
#include <QThread>
#include <QThreadPool>
#include <QTimer>
#include <QToolBar>

#include "app/gui/comparison_controls.h"
#include "app/gui/comparison_view.h"
#include "app/gui/dashboard_view.h"
#include "app/gui/job_runner.h"
#include "engine/jobs/config_file.h"
#include "app/gui/run_browser.h"
#include "app/gui/run_follower.h"
#include "engine/core/runtime.h"
#include "widgets/figure_export.h"

#include <cstdio>

namespace hh::gui {
namespace {
constexpr int kComputeDelayMs = 150;  // after the last edit
}  // namespace

MainWindow::MainWindow(QWidget* parent) : QMainWindow(parent) {
  setWindowTitle(QStringLiteral("Hedgehog Workbench"));
  setWindowIcon(QIcon(QStringLiteral(":/icons/hedgehog.svg")));

  view_ = new ComparisonView;
  dashboard_ = new DashboardView;
  tabs_ = new QTabWidget;
  tabs_->addTab(view_, tr("Feature-map comparison"));
  tabs_->addTab(dashboard_, tr("Conversion dashboard"));
  browser_ = new RunBrowser;
  tabs_->addTab(browser_, tr("Runs"));
  connect(browser_, &RunBrowser::runActivated, this, &MainWindow::openRun);
  browser_->refresh();
  setCentralWidget(tabs_);

  auto* bar = addToolBar(tr("Comparison"));
  bar->setObjectName(QStringLiteral("comparisonToolBar"));
  bar->setMovable(false);
  controls_ = new ComparisonControls(featureMapNames());
  bar->addWidget(controls_);
  bar->addSeparator();
  QAction* compute = bar->addAction(tr("Recompute"));
  compute->setShortcut(QKeySequence(Qt::Key_F5));
  compute->setToolTip(tr("Recompute the comparison (F5)"));
  connect(compute, &QAction::triggered, this, &MainWindow::startCompute);

  pool_ = new QThreadPool(this);
  pool_->setMaxThreadCount(1);
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
  buildStatusBar();
  resize(1500, 950);
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

bool MainWindow::busy() const { return running_ > 0 || computeTimer_->isActive(); }

void MainWindow::buildMenus() {
  QMenu* file = menuBar()->addMenu(tr("&File"));
  QAction* exportAction = file->addAction(tr("&Export figure\u2026"), this, &MainWindow::exportFigure);
  exportAction->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_E));
  file->addSeparator();
  QAction* quit = file->addAction(tr("&Quit"), qApp, &QApplication::closeAllWindows);
  quit->setShortcut(QKeySequence::Quit);
  QMenu* help = menuBar()->addMenu(tr("&Help"));
  help->addAction(tr("&About"), this, [this] {
    const hh::RuntimeInfo info = hh::runtimeInfo();
    QMessageBox::about(this, tr("About Hedgehog Workbench"),
                       tr("<b>Hedgehog Workbench</b> %1<br>Linear attentions that mimic softmax "
                          "(Zhang et al., ICLR 2024).<br>Torch %2 on %3.")
                           .arg(QString::fromLatin1(hh::engineVersion()), QString::fromStdString(info.torchVersion),
                                QString::fromStdString(info.device)));
  });
}

void MainWindow::buildRunControls() {
  runner_ = new JobRunner(this);
  follower_ = new RunFollower;
  followerThread_ = new QThread(this);
  follower_->moveToThread(followerThread_);
  connect(followerThread_, &QThread::finished, follower_, &QObject::deleteLater);
  connect(this, &MainWindow::followRequested, follower_, &RunFollower::follow);
  connect(follower_, &RunFollower::updated, dashboard_, &DashboardView::applyUpdate);
  connect(follower_, &RunFollower::failed, this, [this](const QString& message) {
    statusBar()->showMessage(tr("Run file: %1").arg(message), 10000);
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
            if (!runFile.isEmpty()) std::fprintf(stdout, "run file: %s\n", qPrintable(runFile));
            if (!exportPath.isEmpty()) std::fprintf(stdout, "exported model: %s\n", qPrintable(exportPath));
            std::fflush(stdout);
            browser_->refresh();
            Q_EMIT jobFinished(status, message);
          });

  QMenu* run = menuBar()->addMenu(tr("&Run"));
  QAction* convert = run->addAction(tr("&Convert a project\u2026"), this, &MainWindow::chooseProject);
  convert->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_R));
  QAction* open = run->addAction(tr("&Open a run file\u2026"), this, &MainWindow::chooseRun);
  open->setShortcut(QKeySequence::Open);
  cancelAction_ = run->addAction(tr("C&ancel the job"), this, &MainWindow::cancelJob);
  cancelAction_->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_Period));
  cancelAction_->setEnabled(false);
  auto* bar = addToolBar(tr("Run"));
  bar->setObjectName(QStringLiteral("runToolBar"));
  bar->addAction(convert);
  bar->addAction(open);
  bar->addAction(cancelAction_);
}

void MainWindow::showDashboard() {
  tabs_->setCurrentWidget(dashboard_);
}

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
  dashboard_->clear();
  if (!runner_->startConvert(config)) return tr("a job is already running");
  cancelAction_->setEnabled(true);
  showDashboard();
  statusBar()->showMessage(tr("Converting %1 (%2)").arg(QString::fromStdString(config.modelDir), projectPath));
  return {};
}

void MainWindow::openRun(const QString& path) {
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
  if (path.isEmpty()) return;
  const QString error = startConversion(path);
  if (!error.isEmpty()) QMessageBox::warning(this, tr("Convert"), error);
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
  for (QLabel* label : {computeStatus_, device, threads, version}) {
    label->setContentsMargins(8, 0, 8, 0);
    statusBar()->addPermanentWidget(label);
  }
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
  pool_->start([this, settings, generation] {
    ComparisonResult result = computeComparison(settings);
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

void MainWindow::exportFigure() {
  const QString path = QFileDialog::getSaveFileName(this, tr("Export figure"), QStringLiteral("comparison.png"),
                                                    tr("PNG image (*.png);;SVG drawing (*.svg);;PDF document (*.pdf)"));
  if (path.isEmpty()) return;
  hh::widgets::FigureExportOptions options;
  options.title = windowTitle();
  const hh::widgets::ExportResult r = hh::widgets::exportFigure(view_, path, options);
  if (!r.ok) {
    QMessageBox::warning(this, tr("Export figure"), r.error);
  } else {
    statusBar()->showMessage(tr("Saved %1").arg(path), 5000);
  }
}

}  // namespace hh::gui
