// Figure export: PNG loads back at the requested size (times the scale), SVG and PDF carry
// their signatures, for a bare QCustomPlot-backed widget and a plain composite widget; bad
// suffixes and unwritable paths fail with a message and leave no file behind; SVG and PDF pages
// have the size asked in points, a PNG at scale 2 says 192 dpi.
#include <QDir>
#include <QFile>
#include <QLabel>
#include <QRegularExpression>
#include <QTemporaryDir>
#include <QVBoxLayout>

#include <cmath>

#include "tests/support/hh_test.h"
#include "widgets/curve_plot.h"
#include "widgets/figure_export.h"
#include "widgets/heatmap_view.h"

namespace test_figure_export {

using namespace hh::widgets;

namespace {
QByteArray head(const QString& path, int n) {
  QFile f(path);
  if (!f.open(QIODevice::ReadOnly)) return {};
  return f.read(n);
}
}  // namespace

class TestFigureExport : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void heatmapToPngSvgPdf() {
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    HeatmapView view;
    view.resize(400, 300);
    view.setMatrix(3, 3, {0, 1, 2, 3, 4, 5, 6, 7, 8});
    view.setTitle("softmax");
    view.replotNow();

    const QString png = dir.filePath("map.png");
    FigureExportOptions o;
    o.size = QSize(320, 240);
    o.scale = 2.0;
    ExportResult r = exportFigure(&view, png, o);
    QVERIFY2(r.ok, qPrintable(r.error));
    QImage back(png);
    QCOMPARE(back.size(), QSize(640, 480));

    const QString svg = dir.filePath("map.svg");
    r = exportFigure(&view, svg);
    QVERIFY2(r.ok, qPrintable(r.error));
    const QByteArray s = head(svg, 4096);
    QVERIFY(s.startsWith("<?xml") || s.contains("<svg"));

    const QString pdf = dir.filePath("map.pdf");
    r = exportFigure(&view, pdf);
    QVERIFY2(r.ok, qPrintable(r.error));
    QVERIFY(head(pdf, 4).startsWith("%PDF"));
    QVERIFY(QFileInfo(pdf).size() > 500);
  }

  // The sizes typed for a PDF or SVG are points (the dialog says "pt"); they were taken as
  // pixels at 96 dpi (600 x 400 asked: a 450 x 300 pt page). A PNG at scale 2 says 192 dpi.
  void vectorPagesAreInPointsAndPngKnowsItsDpi() {
    QTemporaryDir dir;
    CurvePlot plot;
    plot.resize(600, 400);
    plot.addSeries("a", {1, 2, 3}, {1, 4, 9});
    plot.replotNow();
    FigureExportOptions o;
    o.size = QSize(600, 400);
    const QString pdf = dir.filePath("fig.pdf");
    QVERIFY(exportFigure(&plot, pdf, o).ok);
    const QByteArray pdfText = head(pdf, 1 << 20);
    const QRegularExpressionMatch box = QRegularExpression(QStringLiteral("/MediaBox \\[\\s*0 0 ([0-9.]+) ([0-9.]+)"))
                                            .match(QString::fromLatin1(pdfText));
    QVERIFY2(box.hasMatch(), "no MediaBox");
    QCOMPARE(qRound(box.captured(1).toDouble()), 600);
    QCOMPARE(qRound(box.captured(2).toDouble()), 400);
    const QString svg = dir.filePath("fig.svg");
    QVERIFY(exportFigure(&plot, svg, o).ok);
    const QRegularExpressionMatch mm =
        QRegularExpression(QStringLiteral("width=\"([0-9.]+)mm\" height=\"([0-9.]+)mm\""))
            .match(QString::fromUtf8(head(svg, 4096)));
    QVERIFY2(mm.hasMatch(), "no width in mm");
    QVERIFY(std::abs(mm.captured(1).toDouble() - 600 * 25.4 / 72) < 0.5);  // 211.7 mm
    QVERIFY(std::abs(mm.captured(2).toDouble() - 400 * 25.4 / 72) < 0.5);
    o.scale = 2.0;
    const QString png = dir.filePath("fig.png");
    QVERIFY(exportFigure(&plot, png, o).ok);
    const QImage image(png);
    QCOMPARE(image.size(), QSize(1200, 800));
    QCOMPARE(qRound(image.dotsPerMeterX() * 0.0254), 192);
    QCOMPARE(qRound(image.dotsPerMeterY() * 0.0254), 192);
  }

  void compositeWidgetAndDefaultSize() {
    QTemporaryDir dir;
    QWidget panel;
    auto* layout = new QVBoxLayout(&panel);
    layout->addWidget(new QLabel("KL 0.12"));
    auto* curve = new CurvePlot;
    curve->addSeries("softmax", {0, 1, 2}, {0.1, 0.3, 0.6});
    layout->addWidget(curve);
    panel.resize(360, 280);
    const QString png = dir.filePath("panel.png");
    ExportResult r = exportFigure(&panel, png);
    QVERIFY2(r.ok, qPrintable(r.error));
    QCOMPARE(QImage(png).size(), QSize(360, 280));
    const QString svg = dir.filePath("panel.SVG");  // suffix case does not matter
    QVERIFY(exportFigure(&panel, svg).ok);
    QVERIFY(head(svg, 4096).contains("<svg"));
    FigureExportOptions pdfOptions;
    pdfOptions.format = FigureFormat::Pdf;  // explicit format beats the suffix
    const QString pdf = dir.filePath("panel.out");
    QVERIFY(exportFigure(&panel, pdf, pdfOptions).ok);
    QVERIFY(head(pdf, 4).startsWith("%PDF"));
  }

  void failuresReportAndLeaveNothing() {
    QTemporaryDir dir;
    HeatmapView view;
    view.resize(200, 200);
    ExportResult r = exportFigure(&view, dir.filePath("x.tiff"));
    QVERIFY(!r.ok);
    QVERIFY(r.error.contains("x.tiff"));
    r = exportFigure(&view, dir.filePath("missing/dir/x.png"));
    QVERIFY(!r.ok);
    QVERIFY(!r.error.isEmpty());
    r = exportFigure(nullptr, dir.filePath("x.png"));
    QVERIFY(!r.ok);
    FigureExportOptions o;
    o.scale = 0.0;
    QVERIFY(!exportFigure(&view, dir.filePath("x.png"), o).ok);
    // The size is checked with the scale applied: 20000 x 20000 at scale 8 asked for a
    // 160000-pixel-wide image and failed as "could not encode the image".
    o.scale = 8.0;
    o.size = QSize(20000, 20000);
    r = exportFigure(&view, dir.filePath("huge.png"), o);
    QVERIFY2(!r.ok && r.error.contains("huge.png") && r.error.contains("160000 x 160000 pixels"), qPrintable(r.error));
    QCOMPARE(QDir(dir.path()).entryList(QDir::Files).size(), 0);
    QCOMPARE(figureFormatFromPath("a/b.Pdf"), std::optional<FigureFormat>(FigureFormat::Pdf));
    QCOMPARE(figureFormatName(FigureFormat::Svg), QStringLiteral("svg"));
  }
};

HH_TEST_SUITE(TestFigureExport, "widgets.figure_export", &TestFigureExport::heatmapToPngSvgPdf,
              &TestFigureExport::compositeWidgetAndDefaultSize, &TestFigureExport::failuresReportAndLeaveNothing,
              &TestFigureExport::vectorPagesAreInPointsAndPngKnowsItsDpi)

}  // namespace test_figure_export

#if HH_HAVE_QTEST
#include "test_figure_export.moc"
#endif
