// MainWindow: running an experiment from the workbench (Run > Run an experiment…).
#include <QAction>
#include <QFileDialog>
#include <QFileInfo>
#include <QStatusBar>

#include "app/gui/common/error_dialog.h"
#include "app/gui/conversion/dashboard_view.h"
#include "app/gui/conversion/job_runner.h"
#include "app/gui/runs/run_browser.h"
#include "app/gui/shell/main_window.h"
#include "engine/config/config_file.h"
#include "engine/config/experiment_config.h"
#include "engine/jobs/experiment_job.h"

namespace hh::gui {

QString MainWindow::startExperiment(const QString& projectPath) {
  if (jobRunning()) return tr("a job is already running");
  jobs::ExperimentConfig config;
  jobs::ExperimentOptions options;
  options.resume = true;  // a variant cancelled earlier continues from its checkpoint
  size_t pending = 0;
  try {
    config = jobs::parseConfigFile(projectPath.toStdString(), "", jobs::experimentConfigFromJson);
    pending = jobs::pendingVariants(config, options).size();
  } catch (const std::exception& e) {
    const QString what = QString::fromStdString(e.what());
    return what.contains(projectPath) ? what : tr("%1: %2").arg(projectPath, what);
  }
  dashboard_->clear();
  if (!runner_->startExperiment(config, options)) return tr("a job is already running");
  statusBar()->showMessage(tr("Experiment %1: %2 variants, %3 to run (the others done earlier, reused)")
                               .arg(QString::fromStdString(config.name))
                               .arg(config.variants.size())
                               .arg(pending));
  cancelAction_->setEnabled(true);
  if (pending == 0) showExperiments();  // nothing to follow: the summary comes at once
  return {};
}

void MainWindow::chooseExperimentToRun() {
  const QString path = QFileDialog::getOpenFileName(this, tr("Run an experiment"), QStringLiteral("projects/experiments"),
                                                    tr("Experiment files (*.json)"));
  if (path.isEmpty()) return;
  const QString error = startExperiment(path);
  if (!error.isEmpty()) showErrorDialog(this, tr("Run an experiment"), error);
}

// The summary lists what finished, also after a cancel or a failed variant: it opens on the
// Experiments tab in every case it was written.
void MainWindow::experimentEnded(const QString& status, const QString& message, const QString& summary) {
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
