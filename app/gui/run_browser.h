// RunBrowser: the run files under a folder (runs/ by default, searched recursively) as a sortable
// table: file, kind, status (interrupted when a run says running but no writer holds it), start
// time, model, feature map, steps, and the last value of the headline metrics. The scan reads
// only headers and last rows and runs on a worker thread; double-clicking a row asks for that
// run on the dashboard. Files that are not run files are listed with the reason instead.
#pragma once
#include <QString>
#include <QWidget>

#include <map>
#include <vector>

class QLabel;
class QLineEdit;
class QTableWidget;
class QThreadPool;

namespace hh::gui {

struct RunSummary {
  QString path;
  QString kind, status, started, model, featureMap, error;
  qint64 lastStep = 0;
  std::map<QString, double> finals;  // headline metric -> last value
};

// The metrics shown as columns, in order.
const QStringList& runBrowserMetrics();
// Every *.h5 under `folder` (recursively), newest first. Plain function: no widgets involved.
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

 public Q_SLOTS:
  void refresh();

 Q_SIGNALS:
  void runActivated(const QString& path);
  void scanned(int runs);

 private:
  void show(const std::vector<RunSummary>& runs, int generation);

  QLineEdit* folder_ = nullptr;
  QLabel* summary_ = nullptr;
  QTableWidget* table_ = nullptr;
  QThreadPool* pool_ = nullptr;
  int generation_ = 0;
};

}  // namespace hh::gui
