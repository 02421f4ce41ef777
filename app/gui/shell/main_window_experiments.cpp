// MainWindow: running an experiment from the workbench (Run > Run an experiment…).
#include <QAction>
#include <QDir>
#include <QFileDialog>
#include <QFileInfo>
#include <QInputDialog>
#include <QLabel>
#include <QMenu>
#include <QSettings>
#include <QStatusBar>
#include <QThread>

#include "app/gui/common/error_dialog.h"
#include "app/gui/conversion/dashboard_view.h"
#include "app/gui/conversion/job_runner.h"
#include "app/gui/experiments/experiment_processes.h"
#include "app/gui/runs/run_browser.h"
#include "app/gui/shell/main_window.h"
#include "engine/config/config_file.h"
#include "engine/config/experiment_config.h"
#include "engine/jobs/experiment_job.h"

namespace hh::gui {
namespace {

// Whether `path` lies in the run folder of variant `name` of `config`.
bool isInsideRunDir(const QString& path, const jobs::ExperimentConfig& config, const QString& name) {
  const QString dir =
      QDir(QString::fromStdString(jobs::variantConfig(config, name.toStdString()).at("run_dir").get<std::string>()))
          .absolutePath();
  return QDir::cleanPath(QFileInfo(path).absoluteFilePath()).startsWith(dir + QLatin1Char('/'));
}

QString summaryFolder(const jobs::ExperimentConfig& config) {
  return QDir(QString::fromStdString(config.runDir)).absolutePath();
}

// When the experiment's summary.json was last written (invalid: none yet).
QDateTime summaryTime(const jobs::ExperimentConfig& config) {
  const QFileInfo summary(QDir(summaryFolder(config)).filePath(QStringLiteral("summary.json")));
  return summary.exists() ? summary.lastModified() : QDateTime();
}

}  // namespace

QString MainWindow::startExperiment(const QString& projectPath, int parallel) {
  if (jobRunning()) return tr("a job is already running");
  jobs::ExperimentConfig config;
  jobs::ExperimentOptions options;
  options.resume = true;  // a variant cancelled earlier continues from its checkpoint
  std::vector<std::string> pending;
  try {
    config = jobs::parseConfigFile(projectPath.toStdString(), "", jobs::experimentConfigFromJson);
    pending = jobs::pendingVariants(config, options);
  } catch (const std::exception& e) {
    const QString what = QString::fromStdString(e.what());
    return what.contains(projectPath) ? what : tr("%1: %2").arg(projectPath, what);
  }
  dashboard_->clear();
  runningExperiment_ = config;
  processExperimentCancelled_ = false;
  summaryShown_ = summaryTime(config);
  QStringList names;
  for (const auto& name : pending) names << QString::fromStdString(name);
  pendingVariants_ = names;
  inProcessVariant_.clear();
  if (parallel > 1 && pending.size() > 1) {
    const QString error = experimentProcesses_->start(projectPath, config, names, parallel);
    if (!error.isEmpty()) return error;
  } else if (!runner_->startExperiment(config, options)) {
    return tr("a job is already running");
  }
  const bool reusing = pending.size() < config.variants.size();
  statusBar()->showMessage(tr("Experiment %1: %2 variants, %3 to run%4%5")
                               .arg(QString::fromStdString(config.name))
                               .arg(config.variants.size())
                               .arg(pending.size())
                               .arg(reusing ? tr(" (the others done earlier, reused)") : QString())
                               .arg(experimentProcesses_->running() ? tr(", %1 at a time").arg(parallel) : QString()));
  cancelAction_->setEnabled(true);
  if (pending.empty()) showExperiments();  // nothing to follow: the summary comes at once
  return {};
}

void MainWindow::wireExperimentProcesses(QMenu* run) {
  followMenu_ = run->addMenu(tr("&Follow a running variant"));
  followMenu_->setObjectName(QStringLiteral("followVariantMenu"));
  followMenu_->setToolTip(tr("Which of the variants running on processes the dashboard follows"));
  followMenu_->setEnabled(false);
  connect(followMenu_, &QMenu::aboutToShow, this, &MainWindow::fillFollowMenu);
  connect(experimentProcesses_, &ExperimentProcesses::variantsChanged, this, [this] {
    showExperimentProcesses();
    refreshRunningExperiment();
  });
  connect(experimentProcesses_, &ExperimentProcesses::runningChanged, this, [this](bool running) {
    processStatus_->setVisible(running);
    followMenu_->setEnabled(running);
  });
  connect(experimentProcesses_, &ExperimentProcesses::childrenEnded, this, &MainWindow::experimentChildrenEnded);
}

// A checkable entry per running variant, the followed one checked; choosing one shows it on the
// dashboard.
void MainWindow::fillFollowMenu() {
  followMenu_->clear();
  const QString followed = experimentProcesses_->followedVariant();
  for (const QString& name : experimentProcesses_->runningVariants()) {
    QAction* action = followMenu_->addAction(name);
    action->setCheckable(true);
    action->setChecked(name == followed);
    connect(action, &QAction::triggered, this, [this, name] {
      if (!experimentProcesses_->followVariant(name)) return;  // ended meanwhile
      showDashboard();
      statusBar()->showMessage(tr("The dashboard follows %1").arg(name));
    });
  }
  if (followMenu_->isEmpty()) followMenu_->addAction(tr("(none running)"))->setEnabled(false);
}

void MainWindow::showExperimentProcesses() {
  const QStringList names = experimentProcesses_->runningVariants();
  processStatus_->setText(tr("%1 of %2 variants running, %3 ended%4")
                              .arg(names.size())
                              .arg(experimentProcesses_->variantsTotal())
                              .arg(experimentProcesses_->variantsEnded())
                              .arg(experimentProcesses_->paused() ? tr(", paused") : QString()));
  processStatus_->setToolTip(tr("Running, each in a process of its own: %1. Run > Follow a running variant picks "
                                "the one the dashboard shows. Pause makes each wait at its next step and starts no "
                                "other; Cancel stops every one within a step (a second Cancel force-stops).")
                                 .arg(names.join(QStringLiteral(", "))));
}

void MainWindow::refreshRunningExperiment() {
  const QDateTime written = summaryTime(runningExperiment_);
  const QString folder = summaryFolder(runningExperiment_);
  const bool showsIt = QFileInfo(experiments_->folder()) == QFileInfo(folder);
  // Another experiment on the tab is left alone. A summary being replaced is read the next time
  // (the writer renames it into place).
  if (written.isValid() && written != summaryShown_ && (showsIt || experiments_->folder().isEmpty())) {
    summaryShown_ = written;
    if (showsIt) {
      experiments_->reload();
    } else {
      experiments_->open(folder);
    }
  }
  updateLiveRows();
}

void MainWindow::noteInProcessVariant(const QString& runFile) {
  for (const QString& name : pendingVariants_)
    if (isInsideRunDir(runFile, runningExperiment_, name)) inProcessVariant_ = name;
  refreshRunningExperiment();
}

void MainWindow::updateLiveRows() {
  if (QFileInfo(experiments_->folder()) != QFileInfo(summaryFolder(runningExperiment_))) return;
  QStringList running = experimentProcesses_->runningVariants();
  QStringList ended = experimentProcesses_->running() ? experimentProcesses_->endedVariants() : QStringList();
  if (runner_->running() && !inProcessVariant_.isEmpty()) {
    running << inProcessVariant_;
    ended << pendingVariants_.mid(0, pendingVariants_.indexOf(inProcessVariant_));  // in order, one at a time
  }
  const QStringList listed = experiments_->variantNames();
  std::vector<std::pair<QString, QString>> rows;
  for (const QString& name : pendingVariants_) {
    // One the summary lists is shown live only until it ends in this run (it ran before: its
    // last record was a cancel or a failure); one it does not list, until it is listed.
    if (listed.contains(name) && ended.contains(name)) continue;
    rows.emplace_back(name, running.contains(name) ? tr("running") : tr("waiting"));
  }
  experiments_->setLiveRows(rows);
}

// The processes have ended: the summary is written from the variants' records on the job runner
// (as the CLI's launcher does), and its end is the experiment's (experimentEnded).
void MainWindow::experimentChildrenEnded(const QStringList& ran, const QMap<QString, QString>& failures,
                                         bool cancelled) {
  pendingVariants_.clear();  // every process has ended: none runs or waits
  experiments_->setLiveRows({});
  jobs::ExperimentOptions options;
  options.summaryOnly = true;
  for (const auto& name : ran) options.ranInChildren.push_back(name.toStdString());
  for (auto it = failures.begin(); it != failures.end(); ++it)
    options.childFailures[it.key().toStdString()] = it.value().toStdString();
  processExperimentCancelled_ = cancelled;
  if (!runner_->startExperiment(runningExperiment_, options))
    experimentEnded(QStringLiteral("failed"), tr("the summary could not start: a job is already running"), {});
}

int MainWindow::askParallel(const QString& path) {
  jobs::ExperimentOptions options;
  options.resume = true;
  int pending = 0, variants = 0;
  try {
    const auto config = jobs::parseConfigFile(path.toStdString(), "", jobs::experimentConfigFromJson);
    pending = static_cast<int>(jobs::pendingVariants(config, options).size());
    variants = static_cast<int>(config.variants.size());
  } catch (const std::exception&) {
    return 1;  // startExperiment says why
  }
  if (pending < 2) return 1;
  QSettings settings;
  const int remembered = settings.value(QStringLiteral("experiments/parallel"), 0).toInt();
  const int most = std::min(pending, 64);
  const int suggested =
      std::clamp(remembered > 0 ? remembered : ExperimentProcesses::defaultParallel(pending), 1, most);
  bool ok = false;
  const int chosen = QInputDialog::getInt(
      this, tr("Run an experiment"),
      tr("%1: %2 of its %3 variants to run.\n\nVariants at once (each in a process of its own, this machine's %4 "
         "cores shared out; 1 runs them one after another in the workbench):")
          .arg(QFileInfo(path).fileName())
          .arg(pending)
          .arg(variants)
          .arg(QThread::idealThreadCount()),
      suggested, 1, most, 1, &ok);
  if (!ok) return 0;
  settings.setValue(QStringLiteral("experiments/parallel"), chosen);
  return chosen;
}

void MainWindow::chooseExperimentToRun() {
  const QString path = QFileDialog::getOpenFileName(this, tr("Run an experiment"), QStringLiteral("projects/experiments"),
                                                    tr("Experiment files (*.json)"));
  if (path.isEmpty()) return;
  const int parallel = askParallel(path);
  if (parallel < 1) return;
  const QString error = startExperiment(path, parallel);
  if (!error.isEmpty()) showErrorDialog(this, tr("Run an experiment"), error);
}

// The summary lists what finished, also after a cancel or a failed variant: it opens on the
// Experiments tab in every case it was written.
void MainWindow::experimentEnded(const QString& reported, const QString& message, const QString& summary) {
  // Variants cancelled before they had written a record are absent, not cancelled, in the summary.
  const QString status = processExperimentCancelled_ ? QStringLiteral("cancelled") : reported;
  processExperimentCancelled_ = false;
  pendingVariants_.clear();  // no variant runs or waits any more: the summary says how each ended
  experiments_->setLiveRows({});
  cancelAction_->setEnabled(false);
  if (dashboardFollowsJob_) dashboard_->setJobEnded(status);
  jobRunFile_.clear();
  statusBar()->showMessage(tr("Experiment %1: %2").arg(status, message));
  if (!summary.isEmpty() && QFileInfo::exists(summary)) {
    const QString error = openExperiment(summary);
    if (!error.isEmpty()) showErrorDialog(this, tr("Experiment"), error);
  }
  if (status == QLatin1String("failed")) showErrorDialog(this, tr("Experiment failed"), message);
  browser_->refresh();
  Q_EMIT jobFinished(status, message);
}

}  // namespace hh::gui
