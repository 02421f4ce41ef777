// ExperimentView: the results of an experiment (`hedgehog experiment`, engine/jobs/experiment_job.h)
// read from its folder: summary.json and every variant's run files. Shows
//   - a table: one row per variant (status, wall time, every final metric), and with repeats, above
//     them, a row per declared variant with each metric's mean +- sample sd over its completed
//     repeats and, with a baseline, a row per other variant against it repeat by repeat; a
//     right-click on the header chooses the metric columns shown;
//   - a scatter of one metric against another, a point per variant (default: attention entropy
//     against test accuracy, the Hedgehog paper's Fig. 4, when the runs have them); with repeats
//     a declared variant's repeats are one series, one colour;
//   - one scalar over steps for every variant on one plot (loss, accuracy, val_loss, ...); with
//     repeats a declared variant's runs share its colour, a dash each;
//   - the last attention snapshot of a chosen (layer, head) for every variant side by side (the
//     weights each model uses: linear where the layer is linear, softmax otherwise; the paper's
//     Fig. 2).
// A run's row opens that run on the dashboard (double-click or its context menu: runRequested).
// exportFigures writes the three plots as PNG (what the results pages show). Everything is read
// when the folder is opened (finished runs: a few small reads), on the calling thread.
#pragma once
#include <QSet>
#include <QString>
#include <QStringList>
#include <QWidget>

#include <map>
#include <set>
#include <utility>
#include <vector>

class QComboBox;
class QMenu;
class QGridLayout;
class QLabel;
class QTableWidget;

namespace hh::widgets {
class CurvePlot;
class HeatmapView;
}  // namespace hh::widgets

namespace hh::gui {

class ExperimentView : public QWidget {
  Q_OBJECT

 public:
  explicit ExperimentView(QWidget* parent = nullptr);

  // Opens <dir>/summary.json (or a summary.json path). Returns an error message, empty on success.
  QString open(const QString& path);
  // Reads the open experiment again (its summary is rewritten as each variant ends), keeping the
  // chosen scatter axes, scalar and head where they are still there. Returns an error or empty.
  QString reload();
  // The folder of the experiment shown (absolute; empty before one is opened).
  QString folder() const { return dir_; }
  // The variants of a running experiment that have not ended in this run, each with where it
  // stands ("running", "waiting"), until set again (empty: none). One not in the summary yet is a
  // grey row after the runs; one in it (run again after a cancel or a failure) keeps its row, its
  // status greyed: "running (last: cancelled)".
  void setLiveRows(const std::vector<std::pair<QString, QString>>& rows);
  int liveRowCount() const;          // the grey rows of variants not in the summary
  QStringList variantNames() const;  // the summary's runs, in its order
  // The run file a row of the table opens: a run's run.h5, else its first stage's (a convert
  // variant's distill/run.h5 when it has no run.h5 of its own); "" for the mean and baseline rows
  // and a run without run files.
  QString runFileOf(int row) const;
  // Writes scatter.png, curves.png and maps.png (only when the runs have attention snapshots)
  // into `dir` (created); returns an error or empty.
  QString exportFigures(const QString& dir, int width = 1200, int height = 700);
  // Picks the plotted quantities by name (metric keys, scalar names, "layer,head"); false if absent.
  bool setScatterAxes(const QString& x, const QString& y);
  bool setCurveScalar(const QString& name);
  bool setMapPair(int layer, int head);

  // The table's metric columns: hidden ones stay hidden when another experiment is opened.
  void setMetricColumnShown(const QString& name, bool shown);
  QStringList hiddenMetricColumns() const;
  // Hides every metric column but these (in the table's order); false if one is not a column.
  bool showOnlyMetricColumns(const QStringList& names);
  // The header's context menu: a checkable entry per metric column, then "Show every column".
  void fillColumnMenu(QMenu* menu);

 Q_SIGNALS:
  // A run's row was double-clicked, or "Open the run on the dashboard" chosen from its context
  // menu (the main window opens the file).
  void runRequested(const QString& runFile);

 public:
  // For tests.
  int variantCount() const { return int(variants_.size()); }
  int groupCount() const { return int(groups_.size()); }
  QTableWidget* table() const { return table_; }
  widgets::CurvePlot* scatterPlot() const { return scatter_; }
  widgets::CurvePlot* curvePlot() const { return curves_; }
  std::vector<widgets::HeatmapView*> maps() const { return maps_; }

 private:
  struct Variant {
    QString name, status, runDir;
    double seconds = 0;
    std::map<QString, double> metrics;
  };
  struct Group {  // summary.json's "groups" (engine/jobs/experiment_groups.h)
    QString name;
    QStringList runs;  // its repeats' variant names
    int completed = 0;
    std::map<QString, std::pair<double, double>> meanSd;
    QString baseline;                            // "" for the baseline itself, or without one
    std::map<QString, QString> againstBaseline;  // metric -> "difference mean +- sd, p, lower / higher"
  };
  void arrange();
  void fillTable();
  void fillGroupRows(const std::set<QString>& keys);
  void fillBaselineRows(const std::set<QString>& keys);
  int baselineRowCount() const;
  // Opens `path`, keeping the choices `kept` (x, y, scalar, pair; reload()) where they are there.
  QString openKeeping(const QString& path, const QStringList& kept);
  // The combo boxes' items, each's choice `kept` (same order) where there, else a default.
  void fillChoices(const QStringList& kept);
  void requestRun(int row);  // runRequested for that row's run file, if it has one
  void refreshScatter();
  void refreshCurves();
  void refreshMaps();

  static constexpr int kFixedColumns = 3;  // variant, status, seconds; the metrics follow
  QString dir_;
  QSet<QString> hiddenColumns_;
  std::vector<Variant> variants_;
  std::vector<std::pair<QString, QString>> liveRows_;  // (name, state): see setLiveRows
  bool listed(const QString& name) const;              // a run of the summary
  QString liveStateOf(const QString& name) const;      // "" when not live
  std::vector<Group> groups_;
  QLabel* title_ = nullptr;
  QTableWidget* table_ = nullptr;
  QComboBox* xChoice_ = nullptr;
  QComboBox* yChoice_ = nullptr;
  QComboBox* scalarChoice_ = nullptr;
  QComboBox* pairChoice_ = nullptr;
  widgets::CurvePlot* scatter_ = nullptr;
  widgets::CurvePlot* curves_ = nullptr;
  QWidget* mapsPanel_ = nullptr;
  QGridLayout* mapsGrid_ = nullptr;
  std::vector<widgets::HeatmapView*> maps_;
};

}  // namespace hh::gui
