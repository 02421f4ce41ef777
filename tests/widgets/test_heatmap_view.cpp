// HeatmapView: pixel colours of known cells after a replot (max and +Inf -> top of viridis, min and -Inf ->
// bottom, masked -> neutral grey, diverging zero -> white), cellAt / cellCenter round trips, the
// hover signal and readout, token tick thinning, zoom clamping, and a 4096 x 4096 matrix set
// quickly and displayed block-reduced while the readout keeps the full values, re-reduced to
// single cells when zoomed in; the empty text and the colour bar's place in the layout.
#include <QElapsedTimer>
#include <QMouseEvent>
#include <QSignalSpy>

#include "widgets/qcp.h"

#include <cmath>
#include <limits>
#include <memory>
#include <vector>

#include "tests/support/hh_test.h"
#include "widgets/colormap.h"
#include "widgets/heatmap_view.h"

namespace test_heatmap_view {

using hh::widgets::ColorMap;
using hh::widgets::HeatmapView;

namespace {

int channelDistance(QRgb a, QRgb b) {
  return std::max({std::abs(qRed(a) - qRed(b)), std::abs(qGreen(a) - qGreen(b)), std::abs(qBlue(a) - qBlue(b))});
}

// The colour drawn at the centre of cell (row, col).
QRgb pixelAtCell(HeatmapView& view, const QImage& image, int row, int col) {
  const QPoint p = view.cellCenter(row, col).toPoint();
  return image.pixel(p);
}

// The colour scale in the plot's layout (nullptr when taken out of it).
QCPColorScale* colourScaleOf(HeatmapView& view) {
  for (QCPLayoutElement* e : view.plot()->plotLayout()->elements(false))
    if (auto* scale = qobject_cast<QCPColorScale*>(e)) return scale;
  return nullptr;
}

QImage renderNow(HeatmapView& view) {
  view.replotNow();
  return view.grab().toImage().convertToFormat(QImage::Format_RGB32);
}

// 4 x 5 ramp with the minimum at (0, 0) and the maximum at (2, 3).
std::vector<float> knownMatrix() {
  std::vector<float> v(20);
  for (int i = 0; i < 20; ++i) v[size_t(i)] = 0.1f + 0.01f * float(i);
  v[0] = 0.0f;
  v[2 * 5 + 3] = 1.0f;
  return v;
}

}  // namespace

class TestHeatmapView : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void extremesGetTheEndColours() {
    HeatmapView view;
    view.resize(520, 420);
    view.show();
    QVERIFY(view.setMatrix(4, 5, knownMatrix()));
    const QImage image = renderNow(view);
    const QRgb top = ColorMap::viridis().rgbAt(1.0), bottom = ColorMap::viridis().rgbAt(0.0);
    QVERIFY2(channelDistance(pixelAtCell(view, image, 2, 3), top) <= 4,
             qPrintable(QColor(pixelAtCell(view, image, 2, 3)).name()));
    QVERIFY2(channelDistance(pixelAtCell(view, image, 0, 0), bottom) <= 4,
             qPrintable(QColor(pixelAtCell(view, image, 0, 0)).name()));
    // A middle value is neither end.
    const QRgb mid = pixelAtCell(view, image, 1, 1);
    QVERIFY(channelDistance(mid, top) > 20 && channelDistance(mid, bottom) > 20);
    QCOMPARE(view.valueRange().first, 0.0);
    QCOMPARE(view.valueRange().second, 1.0);
  }

  // QCustomPlot's int() of +Inf gave the lowest colour; +Inf now takes the top colour, -Inf the
  // bottom one, also under a fixed range that a large finite value lies far outside of.
  void infiniteCellsTakeTheEndColours() {
    HeatmapView view;
    view.resize(520, 420);
    view.show();
    std::vector<float> m = knownMatrix();
    m[1 * 5 + 1] = std::numeric_limits<float>::infinity();
    m[3 * 5 + 4] = -std::numeric_limits<float>::infinity();
    QVERIFY(view.setMatrix(4, 5, m));
    const QRgb top = ColorMap::viridis().rgbAt(1.0), bottom = ColorMap::viridis().rgbAt(0.0);
    QImage image = renderNow(view);
    QVERIFY2(channelDistance(pixelAtCell(view, image, 1, 1), top) <= 4,
             qPrintable(QColor(pixelAtCell(view, image, 1, 1)).name()));
    QVERIFY2(channelDistance(pixelAtCell(view, image, 3, 4), bottom) <= 4,
             qPrintable(QColor(pixelAtCell(view, image, 3, 4)).name()));
    QCOMPARE(view.valueRange().second, 1.0);  // the range is that of the finite values
    m[1 * 5 + 1] = 1e12f;                     // finite, far above a fixed range
    QVERIFY(view.setMatrix(4, 5, m));
    view.setValueRange(0.0, 0.5);
    image = renderNow(view);
    QVERIFY2(channelDistance(pixelAtCell(view, image, 1, 1), top) <= 4,
             qPrintable(QColor(pixelAtCell(view, image, 1, 1)).name()));
    QVERIFY(channelDistance(pixelAtCell(view, image, 2, 3), top) <= 4);  // 1.0 > 0.5: top as well
  }

  void maskedCellsAreNeutral() {
    HeatmapView view;
    view.resize(400, 400);
    view.show();
    const float nan = std::numeric_limits<float>::quiet_NaN();
    std::vector<float> causal(6 * 6, nan);
    for (int i = 0; i < 6; ++i)
      for (int j = 0; j <= i; ++j) causal[size_t(i * 6 + j)] = 1.0f / float(i + 1);
    view.setMatrix(6, 6, causal);
    const QImage image = renderNow(view);
    QVERIFY(channelDistance(pixelAtCell(view, image, 1, 4), hh::widgets::kMaskedColor) <= 2);
    QVERIFY(channelDistance(pixelAtCell(view, image, 0, 0), ColorMap::viridis().rgbAt(1.0)) <= 4);
  }

  void divergingIsSymmetricAroundZero() {
    HeatmapView view;
    view.resize(400, 400);
    view.show();
    view.setColorMode(HeatmapView::ColorMode::Diverging);
    view.setMatrix(2, 2, {-1.0f, 0.0f, 3.0f, 0.5f});
    QCOMPARE(view.valueRange().first, -3.0);
    QCOMPARE(view.valueRange().second, 3.0);
    const QImage image = renderNow(view);
    const QRgb zero = pixelAtCell(view, image, 0, 1);
    QVERIFY2(qRed(zero) > 235 && qGreen(zero) > 235 && qBlue(zero) > 235, qPrintable(QColor(zero).name()));
    QVERIFY(channelDistance(pixelAtCell(view, image, 1, 0), ColorMap::diverging().rgbAt(1.0)) <= 4);
    // A fixed range wins over the automatic one.
    view.setValueRange(-10.0, 10.0);
    QCOMPARE(view.valueRange().second, 10.0);
    view.setAutoValueRange();
    QCOMPARE(view.valueRange().second, 3.0);
  }

  void cellAtMapsPositionsToCells() {
    HeatmapView view;
    view.resize(600, 500);
    view.show();
    view.setMatrix(4, 5, knownMatrix());
    view.replotNow();
    for (int r = 0; r < 4; ++r) {
      for (int c = 0; c < 5; ++c) {
        const QPoint centre = view.cellCenter(r, c).toPoint();
        const auto cell = view.cellAt(centre);
        QVERIFY(cell.has_value());
        QCOMPARE(cell->x(), c);
        QCOMPARE(cell->y(), r);
        // A few pixels off centre is still the same cell.
        QCOMPARE(view.cellAt(centre + QPoint(5, -5)).value_or(QPoint(-1, -1)), QPoint(c, r));
      }
    }
    QVERIFY(!view.cellAt(QPoint(1, 1)).has_value());  // the margin, not a cell
    // Row 0 is at the top.
    QVERIFY(view.cellCenter(0, 0).y() < view.cellCenter(3, 0).y());
  }

  void hoverEmitsAndShowsTheReadout() {
    HeatmapView view;
    view.resize(600, 500);
    view.show();
    view.setMatrix(4, 5, knownMatrix());
    std::vector<float> scores(20);
    for (int i = 0; i < 20; ++i) scores[size_t(i)] = float(i) - 10.0f;
    QVERIFY(view.setScores(4, 5, scores));
    QVERIFY(!view.setScores(5, 4, scores));  // wrong shape is refused
    view.setTokenLabels({"The", "cat", "sat", "down"}, {"The", "cat", "sat", "down", "."});
    view.replotNow();
    QSignalSpy spy(&view, &HeatmapView::cellHovered);
    const QPointF at = view.cellCenter(2, 3) - QPointF(view.plot()->pos());
    QMouseEvent move(QEvent::MouseMove, at, view.plot()->mapToGlobal(at), Qt::NoButton, Qt::NoButton, Qt::NoModifier);
    QCoreApplication::sendEvent(view.plot(), &move);
    QCOMPARE(spy.count(), 1);
    QCOMPARE(spy.at(0).at(0).toInt(), 2);
    QCOMPARE(spy.at(0).at(1).toInt(), 3);
    QCOMPARE(spy.at(0).at(2).toDouble(), 1.0);
    const QString text = view.readoutText(2, 3);
    QVERIFY2(text.contains("sat") && text.contains("down") && text.contains(QStringLiteral("q\u00b7k/\u221ad 3")), qPrintable(text));
    auto* readout = view.plot()->findChild<QLabel*>();
    QVERIFY(readout && readout->isVisible());
    QEvent leave(QEvent::Leave);
    QCoreApplication::sendEvent(view.plot(), &leave);
    QVERIFY(!readout->isVisible());
  }

  void manyTokenLabelsAreThinned() {
    HeatmapView view;
    view.resize(500, 400);
    view.show();
    const int n = 300;
    QStringList tokens;
    for (int i = 0; i < n; ++i) tokens << QStringLiteral("tok%1").arg(i);
    view.setMatrix(n, n, std::vector<float>(size_t(n) * n, 0.5f));
    view.setTokenLabels(tokens, tokens);
    view.replotNow();
    view.replotNow();  // tick density follows the laid-out axis rect
    const QVector<QString> labels = view.plot()->yAxis->tickVectorLabels();
    const int height = view.plot()->axisRect()->height();
    const int lineHeight = QFontMetrics(view.plot()->yAxis->tickLabelFont()).height();
    QVERIFY2(labels.size() >= 3 && labels.size() <= height / lineHeight + 1, qPrintable(QString::number(labels.size())));
    QVERIFY(labels.front().startsWith("tok"));
    // Zoomed in far enough, every token is labelled.
    view.plot()->yAxis->setRange(99.5, 109.5);
    view.replotNow();
    QCOMPARE(view.plot()->yAxis->tickVectorLabels().size(), 10);
    QCOMPARE(view.plot()->yAxis->tickVectorLabels().front(), QStringLiteral("tok100"));
  }

  void labelsRefitWhenAHiddenViewIsShown() {
    // A view filled while hidden (as the inspector's is in a background tab) has fitted its
    // labels to the few pixels a never-shown widget has; once shown at full size it must label
    // more than one token per axis without waiting for another change.
    HeatmapView view;
    const int n = 24;
    QStringList tokens;
    for (int i = 0; i < n; ++i) tokens << QStringLiteral("t%1").arg(i);
    view.setMatrix(n, n, std::vector<float>(size_t(n) * n, 0.5f));
    view.setTokenLabels(tokens, tokens);
    view.replotNow();
    view.resize(600, 500);
    view.show();
    QVERIFY(QTest::qWaitForWindowExposed(&view));
    for (int i = 0; i < 10; ++i) QTest::qWait(20);
    const int shown = view.plot()->yAxis->tickVectorLabels().size();
    qInfo("labels on the y axis once shown: %d", shown);
    QVERIFY2(shown >= 5, qPrintable(QString::number(shown)));
  }

  void zoomIsClampedToTheMatrix() {
    HeatmapView view;
    view.resize(400, 400);
    view.show();
    view.setMatrix(10, 20, std::vector<float>(200, 1.0f));
    view.plot()->xAxis->setRange(-50, 100);
    QCOMPARE(view.plot()->xAxis->range().lower, -0.5);
    QCOMPARE(view.plot()->xAxis->range().upper, 19.5);
    view.plot()->yAxis->setRange(5, 12);  // panned past the bottom edge: shifted back
    QCOMPARE(view.plot()->yAxis->range().upper, 9.5);
    QCOMPARE(view.plot()->yAxis->range().lower, 2.5);
  }

  void largeMatrixIsFastAndDownsampled() {
    const int n = 4096;
    std::vector<float> values(size_t(n) * n);
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < n; ++j) values[size_t(i) * n + size_t(j)] = float((i * 7 + j * 13) % 1000) / 1000.0f;
    values[size_t(4000) * n + 17] = 2.0f;  // a single peak
    HeatmapView view;
    view.resize(700, 600);
    view.show();
    QElapsedTimer timer;
    timer.start();
    QVERIFY(view.setMatrix(n, n, std::move(values)));
    view.replotNow();
    const qint64 ms = timer.elapsed();
    qInfo("4096 x 4096: setMatrix + replot in %lld ms", ms);
    QVERIFY2(ms < 2000, qPrintable(QString::number(ms)));
    QVERIFY(view.displaySize().width() <= HeatmapView::kMaxDisplayCells);
    QVERIFY(view.displaySize().height() <= HeatmapView::kMaxDisplayCells);
    QVERIFY(view.displayBlockSize().width() >= n / HeatmapView::kMaxDisplayCells);
    // No more display cells than pixels, so no block can vanish when drawn.
    QVERIFY(view.displaySize().width() <= view.plot()->axisRect()->width());
    QVERIFY(view.displaySize().height() <= view.plot()->axisRect()->height());
    // The readout reads the full values, not the blocks.
    QCOMPARE(view.valueAt(4000, 17), 2.0f);
    QCOMPARE(view.valueAt(4000, 18), float((4000 * 7 + 18 * 13) % 1000) / 1000.0f);
    // The peak survives the block max: its block is drawn in the top colour (a display cell is
    // about a pixel here, so look around the centre).
    const QImage image = view.grab().toImage().convertToFormat(QImage::Format_RGB32);
    const QPoint peak = view.cellCenter(4000, 17).toPoint();
    bool found = false;
    for (int dy = -2; dy <= 2; ++dy)
      for (int dx = -2; dx <= 2; ++dx)
        found = found || channelDistance(image.pixel(peak + QPoint(dx, dy)), ColorMap::viridis().rgbAt(1.0)) <= 4;
    QVERIFY(found);
    // Hovering a cell far from the origin reports it at full resolution.
    const auto cell = view.cellAt(peak);
    QVERIFY(cell.has_value());
    QVERIFY(std::abs(cell->y() - 4000) <= 8 && std::abs(cell->x() - 17) <= 8);

    // Zoomed in, the visible part is re-reduced down to single cells.
    view.plot()->xAxis->setRange(-0.5, 39.5);
    view.plot()->yAxis->setRange(3979.5, 4019.5);
    timer.restart();
    view.replotNow();
    qInfo("zoomed re-reduction + replot in %lld ms", timer.elapsed());
    QCOMPARE(view.displayBlockSize(), QSize(1, 1));
    const QImage zoomed = view.grab().toImage().convertToFormat(QImage::Format_RGB32);
    QVERIFY(channelDistance(zoomed.pixel(view.cellCenter(4000, 17).toPoint()), ColorMap::viridis().rgbAt(1.0)) <= 4);
    // Its neighbour is no longer painted with the peak's colour.
    QVERIFY(channelDistance(zoomed.pixel(view.cellCenter(4001, 17).toPoint()), ColorMap::viridis().rgbAt(1.0)) > 20);
  }

  void badSizesClearTheView() {
    HeatmapView view;
    QVERIFY(view.setMatrix(2, 2, {1, 2, 3, 4}));
    QVERIFY(!view.setMatrix(3, 3, {1, 2}));
    QCOMPARE(view.rows(), 0);
    QVERIFY(!view.cellAt(QPoint(100, 100)).has_value());
    QVERIFY(view.setMatrix(1, 1, {0.5f}));  // a single cell is drawable too
    QCOMPARE(view.displaySize(), QSize(1, 1));
  }

  void sharedValuesAreKeptNotCopied() {
    HeatmapView view;
    const auto shared = std::make_shared<const std::vector<float>>(std::vector<float>{0.1f, 0.7f, 0.2f, 0.4f});
    QVERIFY(view.setSharedMatrix(2, 2, shared));
    QCOMPARE(shared.use_count(), 2L);  // the view holds the same vector
    QCOMPARE(view.valueAt(0, 1), 0.7f);
    QCOMPARE(view.valueRange().second, double(0.7f));  // its range is read from it
    view.clear();
    QCOMPARE(shared.use_count(), 1L);  // and lets it go
    QVERIFY(!view.setSharedMatrix(2, 2, nullptr));
    QVERIFY(!view.setSharedMatrix(3, 3, shared));
    QCOMPARE(view.rows(), 0);
  }

  void emptyTextShowsUntilThereIsAMatrix() {
    HeatmapView view;
    view.resize(400, 300);
    view.show();
    QCPColorScale* scale = colourScaleOf(view);
    QVERIFY(scale != nullptr);
    QVERIFY(!view.emptyTextShown());  // none set: the empty view keeps its colour bar
    QVERIFY(scale->visible());
    view.setEmptyText("open a model, then Inspect");
    view.replotNow();
    QVERIFY(view.emptyTextShown());
    QVERIFY(!scale->visible());  // a colour bar of nothing is hidden
    QVERIFY(view.setMatrix(2, 2, {0.1f, 0.2f, 0.3f, 0.4f}));
    view.replotNow();
    QVERIFY(!view.emptyTextShown());
    QVERIFY(scale->visible());
    view.clear();
    QVERIFY(view.emptyTextShown());
    view.setEmptyText("");
    QVERIFY(!view.emptyTextShown());
    QVERIFY(scale->visible());
  }

  void colourBarHidesAndReturnsBesideATitledMap() {
    HeatmapView view;
    view.setTitle("softmax");
    QVERIFY(view.setMatrix(2, 2, {0.1f, 0.2f, 0.3f, 0.4f}));
    QVERIFY(colourScaleOf(view) != nullptr);
    view.setColorScaleVisible(false);  // taken out of the layout even below a title
    QVERIFY(colourScaleOf(view) == nullptr);
    view.setColorScaleVisible(true);
    // Back in the map's row, not beside the title.
    QCPLayoutGrid* grid = view.plot()->plotLayout();
    QVERIFY(grid->hasElement(1, 1));
    QVERIFY(grid->element(1, 1) == colourScaleOf(view));
  }
};

HH_TEST_SUITE(TestHeatmapView, "widgets.heatmap", &TestHeatmapView::extremesGetTheEndColours,
              &TestHeatmapView::infiniteCellsTakeTheEndColours, &TestHeatmapView::maskedCellsAreNeutral,
              &TestHeatmapView::divergingIsSymmetricAroundZero, &TestHeatmapView::cellAtMapsPositionsToCells,
              &TestHeatmapView::hoverEmitsAndShowsTheReadout, &TestHeatmapView::manyTokenLabelsAreThinned,
              &TestHeatmapView::labelsRefitWhenAHiddenViewIsShown, &TestHeatmapView::zoomIsClampedToTheMatrix,
              &TestHeatmapView::largeMatrixIsFastAndDownsampled, &TestHeatmapView::badSizesClearTheView,
              &TestHeatmapView::sharedValuesAreKeptNotCopied, &TestHeatmapView::emptyTextShowsUntilThereIsAMatrix,
              &TestHeatmapView::colourBarHidesAndReturnsBesideATitledMap)

}  // namespace test_heatmap_view

#if HH_HAVE_QTEST
#include "test_heatmap_view.moc"
#endif
