// MainWindow's run side (see main_window.h): the Run menu and tool bar, starting conversions in
// this process (JobRunner) or on several processes through the CLI (ProcessJobRunner), pause and
// cancel, following run files on the dashboard, and the Layer ranking tab's entries.
#include "app/gui/shell/main_window.h"

#include <QAction>
#include <QDateTime>
#include <QDir>
#include <QFileDialog>
#include <QFileInfo>
#include <QLabel>
#include <QMenuBar>
#include <QMessageBox>
#include <QStackedWidget>
#include <QStatusBar>
#include <QTabWidget>
#include <QThread>
#include <QToolBar>

#include "app/gui/common/error_dialog.h"
#include "app/gui/conversion/config_form.h"
#include "app/gui/conversion/conversion_summary.h"
#include "app/gui/conversion/dashboard_view.h"
#include "app/gui/conversion/job_runner.h"
#include "app/gui/conversion/process_job_runner.h"
#include "app/gui/conversion/run_follower.h"
#include "app/gui/experiments/experiment_processes.h"
#include "app/gui/rank/rank_results.h"
#include "app/gui/rank/rank_view.h"
#include "app/gui/runs/run_browser.h"
#include "app/gui/shell/recent_files.h"
#include "engine/config/config_file.h"
#include "engine/runs/run_reader.h"

#include <cstdio>

namespace hh::gui {
namespace {
const char* const kPauseTip = "Pause the job at its next training step; resume or cancel it later (Ctrl+Shift+P)";
}  // namespace

void MainWindow::buildRunControls() {
  runner_ = new JobRunner(this);
  processRunner_ = new ProcessJobRunner(this);
  experimentProcesses_ = new ExperimentProcesses(this);
  startRunFollower();
  // Every runner reports its run files and progress the same way.
  for (JobSignals* jobs : {static_cast<JobSignals*>(runner_), static_cast<JobSignals*>(processRunner_),
                           static_cast<JobSignals*>(experimentProcesses_)}) {
    connect(jobs, &JobSignals::runFileStarted, this, &MainWindow::jobRunFileStarted);
    // The job's progress belongs on its own run file, not on another run the user opened meanwhile.
    connect(jobs, &JobSignals::progress, this, [this](qint64 step, qint64 total, const QString& phase, double eta) {
      if (dashboardFollowsJob_) dashboard_->setJobProgress(step, total, phase, eta);
    });
  }
  // The in-process runner ends a conversion or an experiment (its variants, or the summary of
  // variants run on processes); the CLI runner a conversion.
  connect(runner_, &JobSignals::finished, this,
          [this](const QString& status, const QString& message, const QString& runFile, const QString& exportPath) {
            if (runner_->kind() == QLatin1String("experiment")) return experimentEnded(status, message, runFile);
            conversionEnded(status, message, runFile, exportPath);
          });
  connect(processRunner_, &JobSignals::finished, this, &MainWindow::conversionEnded);
  QMenu* run = menuBar()->addMenu(tr("&Run"));
  const QList<QAction*> starts = addStartActions(run);
  run->addSeparator();
  addRankActions(run);
  run->addSeparator();
  addCancelAndPause(run);

  auto* bar = addToolBar(tr("Run"));
  bar->setObjectName(QStringLiteral("runToolBar"));
  bar->addActions(starts);
  bar->addAction(pauseAction_);
  bar->addAction(cancelAction_);
  wireExperimentProcesses(run);
}

// The run file follower reads on a thread of its own and feeds the dashboard.
void MainWindow::startRunFollower() {
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
}

// New conversion, convert a project, open a run file (the toolbar's too), open an experiment.
QList<QAction*> MainWindow::addStartActions(QMenu* run) {
  QAction* newAction = run->addAction(tr("&New conversion\u2026"), this, &MainWindow::newConversion);
  newAction->setShortcut(QKeySequence::New);
  newAction->setToolTip(tr("Edit every setting of a conversion in a form, then start it"));
  QAction* convert = run->addAction(tr("&Convert a project\u2026"), this, &MainWindow::chooseProject);
  convert->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_R));
  QAction* open = run->addAction(tr("&Open a run file\u2026"), this, &MainWindow::chooseRun);
  open->setShortcut(QKeySequence::Open);
  run->addAction(tr("Run an e&xperiment\u2026"), this, &MainWindow::chooseExperimentToRun)
      ->setToolTip(tr("Run every variant of an experiment file, then show its results"));
  run->addAction(tr("Open an &experiment\u2026"), this, [this] {
    const QString dir = QFileDialog::getExistingDirectory(this, tr("Open an experiment (a folder with summary.json)"),
                                                          QStringLiteral("runs/experiments"));
    if (dir.isEmpty()) return;
    const QString error = openExperiment(dir);
    if (!error.isEmpty()) showErrorDialog(this, tr("Open an experiment"), error);
  });
  return {newAction, convert, open};
}

void MainWindow::addRankActions(QMenu* run) {
  QAction* rank = run->addAction(tr("Ran&k layers\u2026"), this, &MainWindow::showRank);
  rank->setToolTip(tr("Rank the model's layers by how hard they are to convert, and choose a per-layer plan"));
  run->addAction(tr("Open a ran&king\u2026"), this, [this] {
    const QString path = QFileDialog::getOpenFileName(this, tr("Open a ranking"), QStringLiteral("runs/rank"),
                                                      tr("Rankings (rank.json);;JSON files (*.json)"));
    if (path.isEmpty()) return;
    const QString error = openRanking(path);
    if (!error.isEmpty()) showErrorDialog(this, tr("Open a ranking"), error);
  });
  connect(rank_, &RankView::convertRequested, this,
          [this] { newConversionWith(rank_->results()->conversionConfig()); });
}

// Cancel, and pause / resume: the menu action and the dashboard's button both toggle the job that
// runs (activeJob()); its pausedChanged updates both (the job waits at its next step; cancel still
// works). Every runner pauses: the in-process one in its cancel poll, the CLI's processes by signal.
void MainWindow::addCancelAndPause(QMenu* run) {
  cancelAction_ = run->addAction(tr("C&ancel the job"), this, &MainWindow::cancelJob);
  cancelAction_->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_Period));
  cancelAction_->setEnabled(false);
  pauseAction_ = run->addAction(tr("&Pause the job"));
  pauseAction_->setObjectName(QStringLiteral("pauseJobAction"));
  pauseAction_->setShortcut(QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_P));
  pauseAction_->setToolTip(tr(kPauseTip));
  pauseAction_->setEnabled(false);
  connect(pauseAction_, &QAction::triggered, this, [this] {
    JobSignals* job = activeJob();
    job->paused() ? job->resume() : job->pause();
  });
  connect(dashboard_, &DashboardView::pauseRequested, this, [this] { activeJob()->pause(); });
  connect(dashboard_, &DashboardView::resumeRequested, this, [this] { activeJob()->resume(); });
  for (JobSignals* job : {static_cast<JobSignals*>(runner_), static_cast<JobSignals*>(processRunner_),
                          static_cast<JobSignals*>(experimentProcesses_)}) {
    connect(job, &JobSignals::runningChanged, dashboard_, &DashboardView::setJobRunning);
    connect(job, &JobSignals::runningChanged, pauseAction_, &QAction::setEnabled);
    connect(job, &JobSignals::pausedChanged, dashboard_, &DashboardView::setPaused);
    connect(job, &JobSignals::pausedChanged, this, [this](bool paused) {
      pauseAction_->setText(paused ? tr("&Resume the job") : tr("&Pause the job"));
      if (jobRunning())
        statusBar()->showMessage(paused ? tr("Paused (the job waits at its next step)") : tr("Resumed"));
      if (experimentProcesses_->running()) showExperimentProcesses();
    });
  }
  connect(processRunner_, &ProcessJobRunner::runningChanged, this, &MainWindow::processJobRunningChanged);
  processStatus_ = new QLabel;
  processStatus_->setObjectName(QStringLiteral("processStatus"));
  processStatus_->setContentsMargins(8, 0, 8, 0);
  processStatus_->hide();
  statusBar()->addPermanentWidget(processStatus_);
}

// The runner whose job runs now (the in-process one when none does).
JobSignals* MainWindow::activeJob() const {
  if (processRunner_->running()) return processRunner_;
  if (experimentProcesses_->running()) return experimentProcesses_;
  return runner_;
}

void MainWindow::setDashboardFollowsJob(bool follows) {
  dashboardFollowsJob_ = follows;
  dashboard_->setShowsJob(follows);
}

void MainWindow::jobRunFileStarted(const QString& path) {
  // In an experiment run in this process a run file starts after the variant before has ended;
  // the variant it belongs to is the one running now.
  if (runner_->running() && runner_->kind() == QLatin1String("experiment")) noteInProcessVariant(path);
  const bool firstStage = jobRunFile_.isEmpty();
  setDashboardFollowsJob(true);
  jobRunFile_ = path;
  Q_EMIT followRequested(path);
  if (firstStage) showDashboard();  // later stages do not pull the user away from another tab
}

void MainWindow::conversionEnded(const QString& status, const QString& message, const QString& runFile,
                                 const QString& exportPath) {
  cancelAction_->setEnabled(false);
  if (dashboardFollowsJob_) dashboard_->setJobEnded(status);
  jobRunFile_.clear();
  QString text = tr("Conversion %1: %2").arg(status, message);
  if (!exportPath.isEmpty()) text += tr(" | exported model: %1").arg(exportPath);
  statusBar()->showMessage(text);
  if (status == QLatin1String("failed")) showErrorDialog(this, tr("Conversion failed"), message);
  // A completed conversion ends on its summary (the stages' curves stay a click away).
  if (status == QLatin1String("completed") && !runFile.isEmpty()) showConversionSummary(runFile);
  if (!runFile.isEmpty()) std::fprintf(stdout, "run file: %s\n", qPrintable(runFile));
  if (!exportPath.isEmpty()) std::fprintf(stdout, "exported model: %s\n", qPrintable(exportPath));
  std::fflush(stdout);
  browser_->refresh();
  Q_EMIT jobFinished(status, message);
}

void MainWindow::processJobRunningChanged(bool running) {
  // While the CLI runs the status bar says how many processes work.
  processStatus_->setText(tr("Converting on %1 processes").arg(processRunner_->processes()));
  processStatus_->setToolTip(
      tr("Pause makes every process wait at its next training step; Cancel stops them all "
         "at the same step (a second Cancel force-stops)"));
  processStatus_->setVisible(running);
}

bool MainWindow::jobRunning() const {
  return runner_->running() || processRunner_->running() || experimentProcesses_->running();
}

void MainWindow::showDashboard() {
  conversionPage_->setCurrentWidget(dashboard_);
  tabs_->setCurrentWidget(conversionPage_);
}

QString MainWindow::showConversionSummary(const QString& path) {
  QString error;
  const ConversionResult result = readConversionResult(path, &error);
  if (result.runFile.isEmpty()) return error;
  summary_->setResult(result);
  conversionPage_->setCurrentWidget(summary_);
  tabs_->setCurrentWidget(conversionPage_);
  return {};
}

bool MainWindow::showingSummary() const { return conversionPage_->currentWidget() == summary_; }

void MainWindow::showRuns() {
  tabs_->setCurrentWidget(browser_);
}

QString MainWindow::startConversion(const QString& projectPath, int processes) {
  if (jobRunning()) return tr("a job is already running");
  jobs::ConvertConfig config;
  try {
    config = jobs::convertConfigFromJson(jobs::readConfigFile(projectPath.toStdString(), "convert"));
    if (config.modelDir.empty()) return tr("%1: no \"model\"").arg(projectPath);
    if (config.runDir.empty()) config.runDir = "runs/convert";
  } catch (const std::exception& e) {
    const QString what = QString::fromStdString(e.what());
    return what.startsWith(projectPath) ? what : tr("%1: %2").arg(projectPath, what);
  }
  return startConversionWith(config, projectPath, processes);
}

QString MainWindow::startConversionWith(const jobs::ConvertConfig& config, const QString& label, int processes) {
  if (jobRunning()) return tr("a job is already running");
  if (processes > 1) {
    const QString error = processRunner_->startConvert(config, processes);
    if (!error.isEmpty()) return error;
    dashboard_->clear();
    statusBar()->showMessage(tr("Converting %1 (%2) on %3 processes; project file %4")
                                 .arg(QString::fromStdString(config.modelDir), label)
                                 .arg(processes)
                                 .arg(processRunner_->projectFile()));
  } else {
    dashboard_->clear();
    if (!runner_->startConvert(config)) return tr("a job is already running");
    statusBar()->showMessage(tr("Converting %1 (%2)").arg(QString::fromStdString(config.modelDir), label));
  }
  cancelAction_->setEnabled(true);
  showDashboard();
  return {};
}

jobs::ConvertConfig MainWindow::conversionDefaults() const {
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
  return initial;
}

void MainWindow::newConversion() { newConversionWith(conversionDefaults()); }

void MainWindow::newConversionWith(const jobs::ConvertConfig& initial) {
  ConversionDialog dialog(initial, this);
  // A start that is refused (a job running, an output folder that holds other files) opens the
  // form again with its edits, instead of losing them.
  while (dialog.exec() == QDialog::Accepted) {
    const QString runDir = QString::fromStdString(dialog.config().runDir);
    if (!QDir(runDir).isEmpty() &&
        QMessageBox::question(
            this, tr("Convert"),
            tr("%1 holds an earlier run; its run files and exported model will be replaced. Go on?").arg(runDir),
            QMessageBox::Yes | QMessageBox::No, QMessageBox::No) != QMessageBox::Yes)
      continue;
    const QString error = startConversionWith(dialog.config(), tr("from the form"), dialog.processes());
    if (error.isEmpty()) return;
    showErrorDialog(this, tr("Convert"), error);
  }
}

void MainWindow::showRank() {
  if (!rank_->running() && !modelFolder_.isEmpty()) rank_->setModelFolder(modelFolder_);
  tabs_->setCurrentWidget(rank_);
}

QString MainWindow::openRanking(const QString& path) {
  const QString error = rank_->openRanking(path);
  if (error.isEmpty()) tabs_->setCurrentWidget(rank_);
  return error;
}

void MainWindow::openRun(const QString& path) {
  // A file the user picked is checked here, so a bad one gets its dialog at once. One that does
  // not exist yet or changed in the last seconds may be a run a job is starting to write: the
  // follower waits for it and reports it (also by a dialog) if it never becomes readable.
  const QFileInfo info(path);
  const bool settled = info.exists() && info.lastModified().secsTo(QDateTime::currentDateTime()) > 5;
  if (!info.exists() && !info.absoluteDir().exists()) {  // a typo, or a run since deleted: nothing to wait for
    showErrorDialog(this, tr("Open a run file"),
                    tr("%1: no such file, and no folder %2 to wait for it in").arg(path, info.absolutePath()));
    return;
  }
  if (!info.exists()) statusBar()->showMessage(tr("Waiting for %1 to be written\u2026").arg(path));
  if (info.exists()) {
    try {
      const auto run = runs::RunReader::open(path.toStdString());
      // A conversion that has ended opens on its summary.
      if (run.header().kind == "convert" && runs::isTerminal(run.status()) && showConversionSummary(path).isEmpty()) {
        recent_->add(QStringLiteral("run"), path);
        return;
      }
    } catch (const std::exception& e) {
      if (settled) {
        const QString what = QString::fromStdString(e.what());
        showErrorDialog(this, tr("Open a run file"), what.contains(path) ? what : tr("%1: %2").arg(path, what));
        return;
      }
    }
  }
  recent_->add(QStringLiteral("run"), path);
  // Another run: the job's progress stays off it until the job's next stage starts its own file.
  setDashboardFollowsJob(jobRunning() && !jobRunFile_.isEmpty() && QFileInfo(path) == QFileInfo(jobRunFile_));
  dashboard_->clear();
  Q_EMIT followRequested(path);
  showDashboard();
}

void MainWindow::cancelJob() {
  if (experimentProcesses_->running()) {
    const bool again = experimentProcesses_->cancelRequested();  // the second cancel force-stops
    experimentProcesses_->cancel();
    statusBar()->showMessage(again ? tr("Force-stopping the variants\u2026 (their last checkpoints are kept)")
                                   : tr("Cancelling the running variants\u2026 (each stops within a step and keeps a "
                                        "checkpoint; cancel again to force-stop)"));
    return;
  }
  if (processRunner_->running()) {
    const bool again = processRunner_->cancelRequested();  // the second cancel force-stops
    processRunner_->cancel();
    statusBar()->showMessage(
        again ? tr("Force-stopping\u2026 (every process ends now; this step's checkpoint may be lost)")
              : tr("Cancelling\u2026 (every process stops at the same step; cancel again to force-stop)"));
    return;
  }
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

}  // namespace hh::gui
