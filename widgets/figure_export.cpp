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
  const QSize canvas = options.size.isEmpty() ? widget->size() : options.size;
  if (canvas.isEmpty() || canvas.width() > kMaxSide || canvas.height() > kMaxSide)
    return failure(path, QStringLiteral("bad size %1 x %2").arg(canvas.width()).arg(canvas.height()));
  const QSize pixels = canvas * options.scale;
  if (*format == FigureFormat::Png && (pixels.width() > kMaxSide || pixels.height() > kMaxSide))
    return failure(path, QStringLiteral("a PNG of %1 x %2 pixels (size x scale) is more than %3 a side")
                             .arg(pixels.width())
                             .arg(pixels.height())
                             .arg(kMaxSide));
  QCustomPlot* plot = plotFor(widget);

  QSaveFile file(path);
  if (!file.open(QIODevice::WriteOnly)) return failure(path, file.errorString());

  const int dpi = widget->logicalDpiX() > 0 ? widget->logicalDpiX() : 96;
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
      written = !image.isNull() && image.save(&file, "PNG");
      break;
    }
    case FigureFormat::Svg: {
      QSvgGenerator svg;
      svg.setOutputDevice(&file);
      svg.setSize(canvas);
      svg.setViewBox(QRect(QPoint(0, 0), canvas));
      svg.setResolution(dpi);
      svg.setTitle(options.title);
      svg.setDescription(QStringLiteral("Hedgehog Workbench figure"));
      paintFigure(widget, plot, &svg, canvas, true);
      break;
    }
    case FigureFormat::Pdf: {
      QPdfWriter pdf(&file);
      pdf.setResolution(dpi);
      pdf.setTitle(options.title);
      pdf.setCreator(QStringLiteral("Hedgehog Workbench"));
      const QSizeF points(canvas.width() * 72.0 / dpi, canvas.height() * 72.0 / dpi);
      pdf.setPageSize(QPageSize(points, QPageSize::Point, QString(), QPageSize::ExactMatch));
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
