// HeadGrid: a layers x heads grid of small attention thumbnails, one per head, each framed in a
// colour that encodes a per-head summary number (entropy, KL, Spearman...) which is also
// printed under the thumbnail. Clicking a thumbnail emits headClicked(layer, head).
// Cheap by design: each thumbnail is a QImage of at most kThumbCells x kThumbCells pixels
// (block max of the head's matrix, per-thumbnail viridis range, NaN in the masked grey), drawn
// scaled with QPainter; no QCustomPlot per head. Summary colours use the viridis map over the
// summaries' common range (or a fixed range), reversed with setSummaryHigherIsBetter(false)
// so that "good" is always the bright end. Plain data only.
#pragma once
#include <QImage>
#include <QPainter>
#include <QString>
#include <QStringList>
#include <QVector>
#include <QWidget>

#include <cmath>
#include <optional>
#include <vector>

namespace hh::widgets {

class HeadGrid : public QWidget {
  Q_OBJECT

 public:
  static constexpr int kThumbCells = 64;  // thumbnail resolution (pixels per side, at most)

  explicit HeadGrid(QWidget* parent = nullptr);

  // Resizes the grid, dropping every cell.
  void setGridSize(int layers, int heads);
  // Sets one head's thumbnail and summary (the grid grows to include it). values: rows x cols
  // row-major (size mismatch: the thumbnail is left empty). summary NaN: no number shown.
  void setCell(int layer, int head, int rows, int cols, const std::vector<float>& values, double summary);
  // Updates only the number of one head (e.g. a new KL during training).
  void setSummary(int layer, int head, double summary);
  void setSummaryName(const QString& name);  // e.g. "KL"; shown in tooltips and the corner
  void setSummaryRange(double lo, double hi); // fixed colour range for the frames
  void setAutoSummaryRange();
  void setSummaryHigherIsBetter(bool higherIsBetter);
  // The words the legend puts after the grey end's number and the red end's (default "best" and
  // "worst"; e.g. "sharp" and "diffuse" for an entropy, which is neither good nor bad).
  void setLegendWords(const QString& greyEnd, const QString& redEnd);
  QStringList legendWords() const { return {greyWord_, redWord_}; }
  void setSelected(int layer, int head);      // highlighted cell; (-1, -1) for none
  void clear();
  // A line in the middle of an empty grid (no layers yet), e.g. why there is nothing to show.
  void setEmptyText(const QString& text);
  QString emptyText() const { return emptyText_; }

  int layers() const { return layers_; }
  int heads() const { return heads_; }
  double summary(int layer, int head) const;
  QImage thumbnail(int layer, int head) const;
  // The frame colour of a head: light grey for the best summary, amber, red for the worst (a
  // legend under the grid says which summary and its range). Invalid colour when the summary is
  // not finite (NaN, +-Inf: drawn as "no value"); the range is over the finite summaries only.
  QColor summaryColor(int layer, int head) const;
  // Cell under a position in widget coordinates: x = head, y = layer.
  std::optional<QPoint> cellAt(QPoint pos) const;
  // The rectangle of a head's thumbnail (inside its frame), in widget coordinates.
  QRect thumbnailRect(int layer, int head) const;

  QSize sizeHint() const override;
  QSize minimumSizeHint() const override;

 Q_SIGNALS:
  void headClicked(int layer, int head);

 protected:
  void paintEvent(QPaintEvent* event) override;
  void paintLegend(QPainter& p, const QRect& area) const;
  void mousePressEvent(QMouseEvent* event) override;
  bool event(QEvent* event) override;  // tooltips

 private:
  struct Cell {
    QImage image;                 // empty until set
    double summary = std::nan("");
  };
  struct Geometry {
    int left = 0, top = 0;  // origin of the grid of cells
    int cellW = 0, cellH = 0;
    int thumb = 0;          // thumbnail side in pixels
  };
  Geometry geometry() const;
  Cell* cellPtr(int layer, int head);
  const Cell* cellPtr(int layer, int head) const;
  std::pair<double, double> summaryRange() const;

  int layers_ = 0, heads_ = 0;
  QVector<Cell> cells_;  // layer-major
  QString summaryName_ = QStringLiteral("summary");
  QString emptyText_;
  QString greyWord_ = tr("best"), redWord_ = tr("worst");
  std::optional<std::pair<double, double>> fixedRange_;
  bool higherIsBetter_ = true;
  int selectedLayer_ = -1, selectedHead_ = -1;
};

}  // namespace hh::widgets
