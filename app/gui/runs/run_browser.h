// RunBrowser: the run files under a folder (runs/ by default, searched recursively) as a sortable
// table: file, kind, status (interrupted when a run says running but no writer holds it), start
// time, model, feature map, steps, and the last value of the headline metrics. The scan reads
// only headers and last rows and runs on a worker thread; double-clicking a row asks for that
// run on the dashboard. Files that are not run files are listed with the reason instead.
// A resumed job's files (run.h5 and its run-resumed-<S>.h5 continuations) are one row: the run,
// named by its first file, with the last file's status and every file's rows joined at the resume
// steps (engine/runs/run_chain.h); the overlay and the CSV export read it the same way.
// With several rows selected: "Overlay" draws their loss / val_loss (or kl_mean) curves on one
// plot under the table (RunOverlay, curves read on the worker thread), and "Export CSV..." writes
// one row per selected run with its last metric values, or their whole traces with one row per
// step (run_table_csv.h).
#pragma once
#include <QString>
#include <QWidget>

#include <map>
#include <vector>

#include "app/gui/common/latest_only.h"

class QLabel;
class QLineEdit;
class QPushButton;
class QTableWidget;
class QThreadPool;

namespace hh::gui {

class RunOverlay;

struct RunSummary {
  QString path;       // the run's first file
  QStringList chain;  // its files in order, path first (one file for a run never resumed)
  QString runId, kind, status, started, model, featureMap, error;
  qint64 lastStep = 0;
  std::map<QString, double> finals;      // headline metric -> last value
  std::map<QString, double> lastValues;  // every scalar series -> its last value
};

// The metrics shown as columns, in order.
const QStringList& runBrowserMetrics();
// Every run under `folder` (recursively): each *.h5 file, a resumed run's files as one; the run
// written to last first. Plain function: no widgets involved.
std::vector<RunSummary> scanRuns(const QString& folder);

class RunBrowser : public QWidget {
  Q_OBJECT

 public:
  explicit RunBrowser(QWidget* parent = nullptr);
  ~RunBrowser() override;

  void setFolder(const QString& folder);  // and rescans
  QString folder() const;
  int rowCount() const;
  QTableWidget* table() const { return table_; }
  RunOverlay* overlay() const { return overlay_; }

  // The files of the selected rows, in table order.
  QStringList selectedPaths() const;
  // The summaries of the last scan for these files (files not in it are left out).
  std::vector<RunSummary> summariesOf(const QStringList& paths) const;
  // Overlays these runs' curves (read on the worker thread; overlayReady() when drawn).
  void overlayRuns(const QStringList& paths);
  // Writes the CSV of these runs to `file`; an empty string, or why it failed (a run file that
  // cannot be read fails the traces export, naming it, and nothing is written).
  enum class CsvShape { LastValues, Traces };
  QString exportCsv(const QString& file, const QStringList& paths, CsvShape shape) const;

 public Q_SLOTS:
  void refresh();

 Q_SIGNALS:
  void runActivated(const QString& path);
  void scanned(int runs);
  void overlayReady(int runs);

 private:
  QTableWidget* makeTable();
  void makeCsvButton();
  void show(const std::vector<RunSummary>& runs);
  void chooseCsvFile(CsvShape shape);
  void reselect(const QStringList& paths);  // the rows of these run files, after a refill
  QString shownName(const QString& path) const;

  QLineEdit* folder_ = nullptr;
  QLabel* summary_ = nullptr;
  QTableWidget* table_ = nullptr;
  QPushButton* overlayButton_ = nullptr;
  QPushButton* csvButton_ = nullptr;
  RunOverlay* overlay_ = nullptr;
  QThreadPool* pool_ = nullptr;
  std::vector<RunSummary> runs_;  // the last scan shown
  LatestOnly scans_, overlays_;  // only the newest scan and overlay are shown
};

}  // namespace hh::gui
