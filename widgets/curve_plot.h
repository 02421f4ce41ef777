// CurvePlot: several named (x, y) series on one pair of axes, with a legend, axis labels and an
// optional shaded band y ± spread per series (e.g. a monotonicity curve: mean weight per score
// bin ± its standard deviation). NaN y values leave gaps. Series can also grow point by point
// (appendPoint) for live curves such as a loss.
// Replots are coalesced: every change starts a single-shot timer (kReplotDelayMs) and the plot
// redraws once when it fires, however many changes came in between (STYLE.md habit 4). A plot
// that is not visible (a hidden tab) does not redraw then: it remembers that it is stale and
// redraws once when it is shown. replotNow() always redraws.
// Axes rescale to the data on each replot unless the user has zoomed or panned (double-click
// goes back to automatic); +-Inf values are not drawn and left out of the range, so one diverged
// point does not freeze the axes. Plain data only.
#pragma once
#include <QColor>
#include <QVector>
#include <QWidget>

class QCustomPlot;
class QCPGraph;
class QCPItemText;
class QCPLayoutGrid;
class QCPTextElement;
class QTimer;

namespace hh::widgets {

class CurvePlot : public QWidget {
  Q_OBJECT

 public:
  static constexpr int kReplotDelayMs = 40;

  explicit CurvePlot(QWidget* parent = nullptr);

  // Adds a series and returns its index. xs and ys must have the same length (the shorter one
  // sets the length otherwise); spread, if given, must have it too (ignored if not). An invalid
  // colour picks the next one of a colour-blind-safe palette.
  int addSeries(const QString& name, const QVector<double>& xs, const QVector<double>& ys,
                const QVector<double>& spread = {}, QColor color = QColor());
  // Appends one point (no spread) to series `index`.
  void appendPoint(int index, double x, double y);
  // Appends points (no spread; xs ascending and after the series' last x) without re-sorting or
  // copying what the series already holds: the cheap way to grow a live trace.
  void appendPoints(int index, const QVector<double>& xs, const QVector<double>& ys);
  // Replaces a series' data (same rules as addSeries).
  void setSeriesData(int index, const QVector<double>& xs, const QVector<double>& ys,
                     const QVector<double>& spread = {});
  void clear();
  // How a series is drawn: a line with point markers (the default), a line only (long traces such
  // as a loss), or markers only (sparse measurements such as a held-out loss). width: line pen.
  enum class SeriesStyle { LineAndPoints, Line, Points };
  void setSeriesStyle(int index, SeriesStyle style, double width = 2.0);
  // The dash of series `index`'s line (e.g. the repeats of one variant in one colour).
  void setSeriesDash(int index, Qt::PenStyle dash);
  // Renames series `index` in the legend (nothing for an index out of range).
  void setSeriesName(int index, const QString& name);

  void setTitle(const QString& title);
  void setAxisLabels(const QString& x, const QString& y);
  void setLogY(bool enabled);
  // The legend shows while `visible` and a series has a point.
  void setLegendVisible(bool visible);
  // Whether the legend stands outside the axes, to their right (no corner inside was free of data).
  bool legendOutside() const { return legendOutside_; }
  // A line in the middle of the axes while no series has a point (e.g. what the run lacks);
  // empty: nothing.
  void setEmptyText(const QString& text);
  QString emptyText() const { return emptyTextValue_; }
  bool emptyTextShown() const;

  int seriesCount() const { return int(series_.size()); }
  QString seriesName(int index) const;
  QColor seriesColor(int index) const;
  int pointCount(int index) const;
  QVector<double> seriesValues(int index) const;  // y of each point, in x order
  bool hasSpread(int index) const;
  // Number of replots done so far (tests check the coalescing).
  int replotCount() const { return replotCount_; }
  bool replotPending() const;

  QCustomPlot* plot() const { return plot_; }
  bool staleWhileHidden() const { return staleWhileHidden_; }
  void replotNow();     // cancel the pending timer and replot now
  void rescaleAxes();   // fit the data and return to automatic rescaling

 private:
  struct Series {
    QCPGraph* line = nullptr;
    QCPGraph* upper = nullptr;  // band edges (null without spread); the fill runs upper -> lower
    QCPGraph* lower = nullptr;
  };
  void setBand(Series& s, const QVector<double>& xs, const QVector<double>& ys, const QVector<double>& spread);
  void scheduleReplot();
  void onReplotTimer();
  void doReplot();
  void fitAxesToData();            // automatic rescaling: the finite points of the visible graphs
  // Moves the legend where it hides no data: the emptiest inside corner; with every corner taken,
  // above the data (the y range raised by the legend's height) when it is short, else outside the
  // axes, to their right.
  void placeLegendAwayFromData();
  void putLegendInside(Qt::Alignment corner);
  void putLegendOutside();

 protected:
  void showEvent(QShowEvent* event) override;

 private:
  QCustomPlot* plot_ = nullptr;
  QCPTextElement* title_ = nullptr;
  QTimer* replotTimer_ = nullptr;
  QCPItemText* emptyText_ = nullptr;
  QString emptyTextValue_;
  QVector<Series> series_;
  bool autoRescale_ = true;
  bool legendWanted_ = true;
  QCPLayoutGrid* legendColumn_ = nullptr;  // right of the axes while the legend is outside: it, then a filler
  bool legendOutside_ = false;
  bool staleWhileHidden_ = false;
  int replotCount_ = 0;
  int paletteNext_ = 0;
};

// The i-th colour of the palette used for series (Okabe-Ito, colour-blind safe), cycling.
QColor seriesPaletteColor(int i);

}  // namespace hh::widgets
