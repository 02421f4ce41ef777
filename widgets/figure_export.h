// Figure export: any QWidget to PNG, SVG or PDF, the format taken from the file suffix unless
// given. A QCustomPlot (or a widget whose plot() is one, found as its only QCustomPlot child) is
// re-laid out at the requested size and painted as vectors into SVG and PDF; other widgets are
// rendered with QWidget::render, scaled to the requested size.
//   size  : PNG: pixels (times scale; at most 20000 a side). SVG and PDF: the page in points,
//           the figure laid out over as many 1/96-inch layout pixels (600 x 400 pt: 800 x 533).
//           Empty = the widget's size: its pixels for a PNG, a page of them at 96 dpi for SVG
//           and PDF (1200 pixels = 900 points).
//   scale : PNG only, pixel multiplier (2.0 = twice the pixels, for 192-dpi figures); the PNG
//           says 96 x scale dpi in its metadata.
// The file is written under a temporary name next to the target and renamed into place on
// success (QSaveFile), so a failed export never leaves a half-written figure.
#pragma once
#include <QSize>
#include <QString>

#include <optional>

class QWidget;

namespace hh::widgets {

enum class FigureFormat { Png, Svg, Pdf };

struct FigureExportOptions {
  std::optional<FigureFormat> format;  // default: from the suffix (.png, .svg, .pdf)
  QSize size;                          // default: the widget's size
  double scale = 1.0;                  // PNG pixel multiplier, in (0, 8]
  QString title;                       // SVG/PDF document title
};

struct ExportResult {
  bool ok = false;
  QString error;  // empty on success; otherwise names the file and the reason
  explicit operator bool() const { return ok; }
};

// Format for a file name's suffix (case-insensitive), or nullopt.
std::optional<FigureFormat> figureFormatFromPath(const QString& path);
QString figureFormatName(FigureFormat format);  // "png", "svg", "pdf"

ExportResult exportFigure(QWidget* widget, const QString& path, const FigureExportOptions& options = {});

}  // namespace hh::widgets
