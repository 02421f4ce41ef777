// MainWindow's files side (see main_window.h): opening model folders and project files, recent
// files, the per-project layout, exporting views and weights, the memory readout.
#include "app/gui/shell/main_window.h"

#include <QCloseEvent>
#include <QDir>
#include <QFile>
#include <QFileDialog>
#include <QFileInfo>
#include <QLabel>
#include <QMessageBox>
#include <QSettings>
#include <QStackedWidget>
#include <QStatusBar>
#include <QTabWidget>
#include <QThreadPool>
#include <QTimer>

#include "app/gui/common/error_dialog.h"
#include "app/gui/common/export_dialogs.h"
#include "app/gui/comparison/comparison_controls.h"
#include "app/gui/comparison/comparison_view.h"
#include "app/gui/conversion/dashboard_view.h"
#include "app/gui/generation/generation_view.h"
#include "app/gui/inspector/inspector_view.h"
#include "app/gui/inspector/model_session.h"
#include "app/gui/rank/rank_view.h"
#include "app/gui/runs/run_browser.h"
#include "app/gui/shell/model_tree.h"
#include "app/gui/shell/recent_files.h"
#include "engine/config/config_file.h"
#include "engine/core/process_memory.h"
#include "widgets/figure_export.h"

namespace hh::gui {

void MainWindow::exportFigure() {
  QWidget* page = tabs_->currentWidget();
  // The suggested file name says what the current tab shows.
  const QString name = page == inspector_        ? QStringLiteral("inspector")
                       : page == conversionPage_ ? QStringLiteral("conversion")
                       : page == browser_        ? QStringLiteral("runs")
                       : page == comparisonPage_ ? QStringLiteral("comparison")
                       : page == generationView_ ? QStringLiteral("generation")
                       : page == rank_           ? QStringLiteral("rank")
                                       : tabs_->tabText(tabs_->currentIndex()).remove(QLatin1Char('&')).toLower();
  const QString path = QFileDialog::getSaveFileName(this, tr("Export the view"), name + QStringLiteral(".png"),
                                                    tr("PNG image (*.png);;SVG drawing (*.svg);;PDF document (*.pdf)"));
  if (path.isEmpty()) return;
  QWidget* target = page == comparisonPage_ ? view_ : page;
  const auto format = hh::widgets::figureFormatFromPath(path);
  auto chosen = askFigureOptions(this, target->size(), !format || *format == hh::widgets::FigureFormat::Png);
  if (!chosen) return;
  hh::widgets::FigureExportOptions options = *chosen;
  options.title = windowTitle();
  const hh::widgets::ExportResult r = hh::widgets::exportFigure(target, path, options);
  if (!r.ok) {
    showErrorDialog(this, tr("Export figure"), r.error);
  } else {
    statusBar()->showMessage(tr("Saved %1").arg(path), 5000);
  }
}

void MainWindow::updateMemory() {
  const int64_t bytes = residentBytes();  // 0 where the platform does not say
  if (bytes > 0) memory_->setText(tr("memory %1 MB").arg(double(bytes) / (1024.0 * 1024.0), 0, 'f', 0));
}

void MainWindow::openModel(const QString& folder, bool showInspector) {
  if (showInspector) tabs_->setCurrentWidget(inspector_);
  ++loading_;
  statusBar()->showMessage(tr("Loading %1\u2026").arg(folder));
  modelTree_->showError(tr("Loading %1\u2026").arg(folder));
  auto session = session_;
  const ComputeChoice choice = inspector_->computeChoice();
  pool_->start([this, session, folder, choice] {
    QString error;
    ModelSummary summary = session->load(folder, &error, choice);
    QMetaObject::invokeMethod(
        this,
        [this, summary = std::move(summary), error, folder] {
          --loading_;
          QTimer::singleShot(0, this, &MainWindow::reloadIfAsked);
          if (!error.isEmpty()) {
            modelTree_->showError(tr("Could not open %1").arg(folder), {error});
            statusBar()->showMessage(error, 15000);
            showErrorDialog(this, tr("Open model folder"), error);
            Q_EMIT modelLoaded(error);
            return;
          }
          modelFolder_ = folder;
          if (rank_->modelFolder().isEmpty() && !rank_->running()) rank_->setModelFolder(folder);
          modelTree_->setSummary(summary);
          inspector_->modelLoaded(summary);
          controls_->setModel(summary.layers, summary.heads, summary.converted());
          recent_->add(QStringLiteral("model"), folder);
          setWindowTitle(tr("%1 \u2014 Hedgehog Workbench").arg(QFileInfo(folder).fileName()));
          statusBar()->showMessage(tr("Loaded %1: %2 on %3").arg(folder, summary.description, summary.device), 8000);
          Q_EMIT modelLoaded(QString());
          inspector_->inspect();  // show the default text's attention straight away
        },
        Qt::QueuedConnection);
  });
}

QString MainWindow::openProject(const QString& path) {
  jobs::ConvertConfig config;
  try {
    config = jobs::convertConfigFromJson(jobs::readConfigFile(path.toStdString(), "convert"));
  } catch (const std::exception& e) {
    const QString what = QString::fromStdString(e.what());
    return what.contains(path) ? what : tr("%1: %2").arg(path, what);
  }
  if (config.modelDir.empty()) return tr("%1: no \"model\"").arg(path);
  saveLayout();
  project_ = path;
  restoreLayout();
  recent_->add(QStringLiteral("project"), path);
  openModel(QString::fromStdString(config.modelDir), /*showInspector=*/false);
  return {};
}

void MainWindow::exportWeights() {
  // The session's summary is the model in place: while a load (or an export) is queued or running,
  // the dialog would offer that model's name for whatever the worker holds once it gets there.
  if (loading_ > 0) {
    QMessageBox::information(
        this, tr("Export weights"),
        tr("A model folder is loading or being written: export once the status bar says it is done."));
    return;
  }
  if (!session_->loaded()) {
    QMessageBox::information(this, tr("Export weights"), tr("Open a model folder first (File > Open model folder)."));
    return;
  }
  const ModelSummary summary = session_->summary();
  WeightsExportDialog dialog(QDir::cleanPath(summary.folder) + QStringLiteral("-export"), summary.converted(), this);
  if (dialog.exec() != QDialog::Accepted || dialog.output().isEmpty()) return;
  if (QFileInfo::exists(dialog.output()) &&
      QMessageBox::question(this, tr("Export weights"), tr("%1 exists. Replace it?").arg(dialog.output()),
                            QMessageBox::Yes | QMessageBox::No, QMessageBox::No) != QMessageBox::Yes)
    return;
  exportWeightsTo(dialog.output(), dialog.dtype(), dialog.adaptersOnly());
}

void MainWindow::exportWeightsTo(const QString& output, const QString& dtype, bool adaptersOnly) {
  statusBar()->showMessage(tr("Writing %1\u2026").arg(output));
  auto session = session_;
  ++loading_;
  pool_->start([this, session, output, dtype, adaptersOnly] {
    const QString error = session->exportModel(output, dtype, adaptersOnly);
    QMetaObject::invokeMethod(
        this,
        [this, error, output] {
          --loading_;
          QTimer::singleShot(0, this, &MainWindow::reloadIfAsked);
          if (!error.isEmpty()) showErrorDialog(this, tr("Export weights"), error);
          else statusBar()->showMessage(tr("Wrote %1").arg(output), 10000);
          Q_EMIT weightsExported(error);
        },
        Qt::QueuedConnection);
  });
}

void MainWindow::chooseModel() {
  const QString folder = QFileDialog::getExistingDirectory(this, tr("Open a model folder (config.json + safetensors)"),
                                                           QStringLiteral("projects"));
  if (!folder.isEmpty()) openModel(folder);
}

void MainWindow::chooseProjectToOpen() {
  const QString path = QFileDialog::getOpenFileName(this, tr("Open a project"), QStringLiteral("projects"),
                                                    tr("Project files (*.json)"));
  if (!path.isEmpty()) openProjectReporting(path);
}

void MainWindow::openProjectReporting(const QString& path) {
  const QString error = openProject(path);
  if (!error.isEmpty()) showErrorDialog(this, tr("Open project"), error);
}

void MainWindow::openRecent(const QString& kind, const QString& path) {
  if (kind == QLatin1String("model")) {
    openModel(path);
  } else if (kind == QLatin1String("project")) {
    openProjectReporting(path);
  } else if (kind == QLatin1String("run")) {
    openRun(path);
  }
}

QString MainWindow::layoutKey() const {
  const QString id = project_.isEmpty() ? QStringLiteral("default") : QFileInfo(project_).absoluteFilePath();
  return QStringLiteral("layout/") + QString::fromLatin1(id.toUtf8().toBase64(QByteArray::Base64UrlEncoding));
}

void MainWindow::saveLayout() {
  QSettings settings;
  settings.setValue(layoutKey(), saveState());
  settings.setValue(layoutKey() + QStringLiteral("/tab"), tabs_->currentIndex());
}

void MainWindow::restoreLayout() {
  QSettings settings;
  const QByteArray state = settings.value(layoutKey()).toByteArray();
  if (!state.isEmpty()) restoreState(state);
  const QVariant tab = settings.value(layoutKey() + QStringLiteral("/tab"));
  if (tab.isValid()) tabs_->setCurrentIndex(tab.toInt());
}

void MainWindow::reloadIfAsked() {
  if (loading_ > 0 || !reloadWhenIdle_ || modelFolder_.isEmpty()) return;
  reloadWhenIdle_ = false;
  openModel(modelFolder_, false);  // on the device and precision chosen while it was busy
}

void MainWindow::closeEvent(QCloseEvent* event) {
  // Closing stops what runs (the destructor cancels it): the user says so first.
  QStringList running;
  if (jobRunning()) running << tr("a conversion");
  if (rank_->running()) running << tr("a layer ranking");
  if (generationView_->running()) running << tr("a generation");
  if (!running.isEmpty()) {
    QMessageBox ask(QMessageBox::Question, tr("Quit"),
                    tr("%1 is running. Quit and cancel it? (A conversion's run file keeps every step so far.)")
                        .arg(running.join(tr(" and "))),
                    QMessageBox::Yes | QMessageBox::No, this);
    ask.setObjectName(QStringLiteral("quitWhileRunning"));
    ask.setDefaultButton(QMessageBox::No);
    if (ask.exec() != QMessageBox::Yes) {
      event->ignore();
      return;
    }
  }
  saveLayout();
  QSettings().setValue(QStringLiteral("window/geometry"), saveGeometry());
  QMainWindow::closeEvent(event);
}

}  // namespace hh::gui
