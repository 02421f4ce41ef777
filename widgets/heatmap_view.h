// HeatmapView: one attention matrix as a colour map with a colour bar, token labels on both
// axes, a hover readout, and mouse zoom/pan (wheel zooms, drag pans, double-click resets).
//   setMatrix(rows, cols, values): row-major, row = query i, col = key j; NaN = masked pair
//     (e.g. the upper triangle of causal attention), drawn in the map's neutral grey.
//   setScores(...): optional second matrix of the same size (q.k / sqrt(d)) shown in the readout.
// Large matrices are drawn block-reduced (max for sequential data, largest magnitude for
// diverging data) to at most kMaxDisplayCells per side and no more cells than the plot has
// pixels (a thinner cell could vanish when the image is scaled down). Zooming in re-reduces
// only the visible part (plus a margin for panning), so detail appears down to single cells;
// the readout always reads the full values. Sequential mode spans [min, max] of the finite values with viridis;
// diverging mode spans [-m, m], m = max |value|, with the blue-white-red map. setValueRange fixes the range (e.g. the
// same scale for softmax and linear maps side by side). Values outside the range take the end colours: +Inf the top
// one, -Inf the bottom one. Coordinates: cell (row, col) is centred on plot coordinate (x = col, y = row); row 0 is at
// the top. Plain data only: no Torch, no jobs.
#pragma once
#include <QSharedPointer>
#include <QStringList>
#include <QWidget>

#include <optional>
#include <vector>

#include "widgets/matrix_downsample.h"

class QCustomPlot;
class QCPColorMap;
class QCPColorScale;
class QCPItemText;
class QCPTextElement;
class QLabel;
class QMouseEvent;
class QTimer;

namespace hh::widgets {

class TokenAxisTicker;

class HeatmapView : public QWidget {
  Q_OBJECT

 public:
  enum class ColorMode { Sequential, Diverging };
  static constexpr int kMaxDisplayCells = 512;

  explicit HeatmapView(QWidget* parent = nullptr);
  ~HeatmapView() override;

  // Replaces the matrix (values.size() must be rows * cols, else the view is cleared and false is
  // returned). Scores of another size are dropped. Resets the zoom.
  bool setMatrix(int rows, int cols, std::vector<float> values);
  // The same without a copy: the view keeps a reference to the values (they must not change).
  bool setSharedMatrix(int rows, int cols, SharedValues shared);
  // Scores for the readout; must match the matrix size (returns false otherwise).
  bool setScores(int rows, int cols, std::vector<float> scores);
  // The same without a copy (the values must not change).
  bool setSharedScores(int rows, int cols, SharedValues shared);
  void clearScores();
  // Token labels: queries along the rows (y axis), keys along the columns (x axis).
  void setTokenLabels(QStringList queries, QStringList keys);
  void setColorMode(ColorMode mode);
  void setBlockReduce(BlockReduce reduce);  // default: Max (sequential), AbsMax (diverging)
  void setValueRange(double lo, double hi);
  void setAutoValueRange();
  void setTitle(const QString& title);
  QString title() const;  // empty when none
  void setValueLabel(const QString& label);  // colour bar label, e.g. "weight"
  void setAxisTitles(const QString& keys, const QString& queries);
  // What the hover readout calls a row and a column (default "query", "key"; e.g. "layer", "head").
  void setReadoutNames(const QString& row, const QString& col);
  // Hides the colour bar (e.g. several maps on one shared scale with one legend elsewhere).
  void setColorScaleVisible(bool visible);
  // A line in the middle of the view while there is no matrix (e.g. what to do to get one); the
  // colour bar is hidden meanwhile, since it would describe nothing. Empty: no text.
  void setEmptyText(const QString& text);
  QString emptyText() const { return emptyTextValue_; }
  bool emptyTextShown() const;
  void clear();

  int rows() const { return rows_; }
  int cols() const { return cols_; }
  ColorMode colorMode() const { return mode_; }
  // Display cells (width = columns, height = rows); at most kMaxDisplayCells per side.
  QSize displaySize() const;
  // Source cells per display cell (width = columns per block, height = rows per block).
  QSize displayBlockSize() const;
  // The colour range in force: [lo, hi].
  std::pair<double, double> valueRange() const;
  // Full-resolution value (NaN outside the matrix).
  float valueAt(int row, int col) const;
  std::optional<float> scoreAt(int row, int col) const;
  // The matrix and the scores the view holds (never null; empty when none).
  SharedValues sharedMatrix() const { return values_; }
  SharedValues sharedScores() const { return scores_; }

  // The cell under a position in this widget's coordinates: x = column (key), y = row (query);
  // nullopt outside the plotted cells.
  std::optional<QPoint> cellAt(QPoint widgetPos) const;
  // Centre of cell (row, col) in this widget's coordinates, for the current zoom.
  QPointF cellCenter(int row, int col) const;
  // The text the hover readout shows for a cell.
  QString readoutText(int row, int col) const;

  QCustomPlot* plot() const { return plot_; }
  void resetView();  // zoom to the whole matrix
  void replotNow();  // synchronous replot (normally replots are queued and coalesced)

 Q_SIGNALS:
  void cellHovered(int row, int col, double value);
  void hoverLeft();

 protected:
  bool eventFilter(QObject* watched, QEvent* event) override;

 private:
  void rebuildDisplay(bool force);
  void scheduleRebuild();
  BlockReduce currentReduce() const;
  void applyColorRange();
  void fillColorMap();  // display_ into the colour map, each cell clamped to the colour range
  void updateTickDensity();
  void clampRanges();
  void onMouseMove(QMouseEvent* event);
  void showReadout(QPoint plotPos, const QString& text);
  void hideReadout();
  void requestReplot();
  void updateEmptyState();  // the empty text and the colour bar, after the matrix changed
  bool colorScaleInLayout() const;
  int mapRow() const;  // the layout row of the map (1 below a title, else 0)

  QCustomPlot* plot_ = nullptr;
  QCPColorMap* colorMap_ = nullptr;
  QCPColorScale* colorScale_ = nullptr;
  QCPTextElement* title_ = nullptr;
  QCPItemText* emptyText_ = nullptr;  // created by the first setEmptyText
  QString emptyTextValue_;
  QLabel* readout_ = nullptr;
  QTimer* rebuildTimer_ = nullptr;  // coalesces re-reductions after zoom, pan and resize
  QSharedPointer<TokenAxisTicker> xTicker_, yTicker_;

  int rows_ = 0, cols_ = 0;
  const std::vector<float>& values() const { return *values_; }
  SharedValues values_;  // never null
  const std::vector<float>& scores() const { return *scores_; }
  SharedValues scores_;  // never null; empty: no scores
  QStringList queryLabels_, keyLabels_;
  QString valueLabel_;
  QString rowName_ = QStringLiteral("query"), colName_ = QStringLiteral("key");
  ColorMode mode_ = ColorMode::Sequential;
  std::optional<BlockReduce> reduce_;
  std::optional<std::pair<double, double>> fixedRange_;
  DownsampledMatrix display_;
  BlockReduce displayReduce_ = BlockReduce::Max;
  MatrixRegion displayRegion_;  // the source region display_ reduces
  QSize plannedFor_;  // axis rect size the display was planned for
  QSize tickedFor_;   // axis rect size the tick labels were fitted to
  double dataLo_ = 0.0, dataHi_ = 1.0;  // finite range of the full values
  bool clamping_ = false;
};

}  // namespace hh::widgets
