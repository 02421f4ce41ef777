// RunOverlay: the training curves of several runs on one CurvePlot (the run browser's "Overlay"),
// one colour per run, with a legend naming each run. A combo box picks what is drawn:
//   - "loss and val_loss": per run its loss as a line and, if it has one, its held-out loss as
//     points in the same colour;
//   - "kl_mean": per run its mean KL to softmax (runs without it are left out);
// (the two have different scales, hence one at a time). Losses of different kinds of run are on
// different scales (a distillation's KL-plus-CE near 55, a finetuning's cross-entropy near 6):
// "relative to each run's first loss" divides every run's loss and held-out loss by its first
// finite non-zero loss, so they share one axis; it is ticked by itself when the runs shown are of
// more than one kind, and the note says so. The curves are read off the GUI thread with
// readRunCurves() and handed over as plain data; a killed run's file that a continuation took
// over is read up to the step the continuation resumed from, so the two are drawn end to end.
#pragma once
#include <QString>
#include <QVector>
#include <QWidget>

#include <cstdint>
#include <map>
#include <vector>

class QCheckBox;
class QComboBox;
class QLabel;

namespace hh::widgets {
class CurvePlot;
}

namespace hh::gui {

struct RunCurves {
  QString path, label;  // label: what the legend calls the run
  QString kind;         // the run file's kind (distill, finetune, train, ...)
  QString error;        // non-empty: the file could not be read
  struct Curve {
    QVector<double> steps, values;  // [N]
  };
  std::map<QString, Curve> curves;  // by scalar name; only the names the file has
};

// The scalar series an overlay can draw.
const QStringList& overlayScalars();
// Reads overlayScalars() of one run: the file at `path` and the continuations written after it
// (never throws; error says what failed).
RunCurves readRunCurves(const QString& path, const QString& label);

class RunOverlay : public QWidget {
  Q_OBJECT

 public:
  enum class Metric { Loss, KlMean };

  explicit RunOverlay(QWidget* parent = nullptr);

  void setRuns(std::vector<RunCurves> runs);
  void setMetric(Metric metric);
  Metric metric() const;
  void setRelative(bool relative);
  bool relative() const;
  widgets::CurvePlot* plot() const { return plot_; }
  int runCount() const { return int(runs_.size()); }
  // Series index of a run's curve in plot() (-1 when not drawn), e.g. for tests.
  int seriesOf(int run, const QString& scalar) const;

 private:
  void redraw();

  QComboBox* metric_ = nullptr;
  QCheckBox* relative_ = nullptr;
  QLabel* note_ = nullptr;
  widgets::CurvePlot* plot_ = nullptr;
  std::vector<RunCurves> runs_;
  std::map<std::pair<int, QString>, int> series_;  // (run, scalar) -> series index
};

}  // namespace hh::gui
