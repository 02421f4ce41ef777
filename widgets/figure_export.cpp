// Figure export to PNG / SVG / PDF through QSaveFile (see figure_export.h).
#include "widgets/figure_export.h"

#include <QFileInfo>
#include <QImage>
#include <QLayout>
#include <QPageSize>
#include <QPainter>
#include <QPdfWriter>
#include <QSaveFile>
#include <QSvgGenerator>
#include <QWidget>

#include "widgets/qcp.h"


namespace hh::widgets {
namespace {

constexpr double kMaxScale = 8.0;
constexpr int kMaxSide = 20000;  // pixels or points along one side
constexpr double kLayoutDpi = 96.0;  // a layout pixel is 1/96 inch (scale 1 = 96 dpi)
constexpr double kPointsPerInch = 72.0;
constexpr double kMetresPerInch = 0.0254;

// The QCustomPlot that stands for the whole widget: the widget itself, or its only QCustomPlot
// child when that child fills it (HeatmapView, CurvePlot).
QCustomPlot* plotFor(QWidget* widget) {
  if (auto* plot = qobject_cast<QCustomPlot*>(widget)) return plot;
  const auto plots = widget->findChildren<QCustomPlot*>();
  if (plots.size() == 1 && plots.front()->size() == widget->size()) return plots.front();
  return nullptr;
}

// Paints the figure into `device` over a w x h canvas: vectors for a QCustomPlot, QWidget::render
// scaled to the canvas otherwise.
void paintFigure(QWidget* widget, QCustomPlot* plot, QPaintDevice* device, QSize canvas, bool vector) {
  if (plot) {
    QCPPainter painter(device);
    if (vector) {
      painter.setMode(QCPPainter::pmVectorized);
      painter.setMode(QCPPainter::pmNoCaching);
    }
    painter.setWindow(0, 0, canvas.width(), canvas.height());
    plot->toPainter(&painter, canvas.width(), canvas.height());
    painter.end();
    plot->replot(QCustomPlot::rpQueuedReplot);  // the on-screen layout follows the widget again
    return;
  }
  QPainter painter(device);
  painter.setWindow(0, 0, canvas.width(), canvas.height());
  painter.scale(double(canvas.width()) / std::max(widget->width(), 1), double(canvas.height()) / std::max(widget->height(), 1));
  widget->render(&painter, QPoint(), QRegion(), QWidget::DrawWindowBackground | QWidget::DrawChildren);
  painter.end();
}

ExportResult failure(const QString& path, const QString& reason) {
  return ExportResult{false, QStringLiteral("cannot export figure to '%1': %2").arg(path, reason)};
}

}  // namespace

std::optional<FigureFormat> figureFormatFromPath(const QString& path) {
  const QString suffix = QFileInfo(path).suffix().toLower();
  if (suffix == QLatin1String("png")) return FigureFormat::Png;
  if (suffix == QLatin1String("svg")) return FigureFormat::Svg;
  if (suffix == QLatin1String("pdf")) return FigureFormat::Pdf;
  return std::nullopt;
}

QString figureFormatName(FigureFormat format) {
  switch (format) {
    case FigureFormat::Png: return QStringLiteral("png");
    case FigureFormat::Svg: return QStringLiteral("svg");
    case FigureFormat::Pdf: return QStringLiteral("pdf");
  }
  return {};
}

ExportResult exportFigure(QWidget* widget, const QString& path, const FigureExportOptions& options) {
  if (!widget) return failure(path, QStringLiteral("no widget given"));
  const std::optional<FigureFormat> format = options.format ? options.format : figureFormatFromPath(path);
  if (!format) return failure(path, QStringLiteral("unknown format (use a .png, .svg or .pdf file name)"));
  if (!(options.scale > 0.0 && options.scale <= kMaxScale))
    return failure(path, QStringLiteral("scale %1 outside (0, %2]").arg(options.scale).arg(kMaxScale));

  // Lay out a widget that was never shown so its children have their sizes.
  widget->ensurePolished();
  if (widget->layout()) widget->layout()->activate();
  const QSize asked = options.size.isEmpty() ? widget->size() : options.size;
  if (asked.isEmpty() || asked.width() > kMaxSide || asked.height() > kMaxSide)
    return failure(path, QStringLiteral("bad size %1 x %2").arg(asked.width()).arg(asked.height()));
  // SVG and PDF: a page of `asked` points (the widget's own size: its pixels at kLayoutDpi),
  // the figure laid out over as many layout pixels as cover it.
  const bool vector = *format != FigureFormat::Png;
  const QSizeF pagePoints = options.size.isEmpty() ? QSizeF(asked) * (kPointsPerInch / kLayoutDpi) : QSizeF(asked);
  const QSize canvas = vector ? (pagePoints * (kLayoutDpi / kPointsPerInch)).toSize() : asked;
  const QSize pixels = canvas * options.scale;
  if (*format == FigureFormat::Png && (pixels.width() > kMaxSide || pixels.height() > kMaxSide))
    return failure(path, QStringLiteral("a PNG of %1 x %2 pixels (size x scale) is more than %3 a side")
                             .arg(pixels.width())
                             .arg(pixels.height())
                             .arg(kMaxSide));
  QCustomPlot* plot = plotFor(widget);

  QSaveFile file(path);
  if (!file.open(QIODevice::WriteOnly)) return failure(path, file.errorString());

  bool written = true;
  switch (*format) {
    case FigureFormat::Png: {
      QImage image;
      if (plot) {
        image = plot->toPixmap(canvas.width(), canvas.height(), options.scale).toImage();
        plot->replot(QCustomPlot::rpQueuedReplot);
      } else {
        image = QImage(canvas * options.scale, QImage::Format_ARGB32_Premultiplied);
        image.fill(Qt::white);
        paintFigure(widget, nullptr, &image, canvas, false);
      }
      const int dotsPerMetre = qRound(kLayoutDpi * options.scale / kMetresPerInch);  // scale 2: 192 dpi
      image.setDotsPerMeterX(dotsPerMetre);
      image.setDotsPerMeterY(dotsPerMetre);
      written = !image.isNull() && image.save(&file, "PNG");
      break;
    }
    case FigureFormat::Svg: {
      QSvgGenerator svg;
      svg.setOutputDevice(&file);
      svg.setSize(canvas);
      svg.setViewBox(QRect(QPoint(0, 0), canvas));
      svg.setResolution(int(kLayoutDpi));  // width and height in mm: the page in points
      svg.setTitle(options.title);
      svg.setDescription(QStringLiteral("Hedgehog Workbench figure"));
      paintFigure(widget, plot, &svg, canvas, vector);
      break;
    }
    case FigureFormat::Pdf: {
      QPdfWriter pdf(&file);
      pdf.setResolution(int(kLayoutDpi));
      pdf.setTitle(options.title);
      pdf.setCreator(QStringLiteral("Hedgehog Workbench"));
      pdf.setPageSize(QPageSize(pagePoints, QPageSize::Point, QString(), QPageSize::ExactMatch));
      pdf.setPageMargins(QMarginsF(0, 0, 0, 0));
      paintFigure(widget, plot, &pdf, canvas, true);
      break;
    }
  }
  if (!written) {
    file.cancelWriting();
    return failure(path, QStringLiteral("could not encode the image"));
  }
  if (!file.commit()) return failure(path, file.errorString());
  return ExportResult{true, QString()};
}

}  // namespace hh::widgets
