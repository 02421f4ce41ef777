// CurvePlot: series bookkeeping, spread bands, legend entries, NaN gaps, and replots coalesced
// by the single-shot timer (many changes, one replot); appendPoints keeps the keys sorted (in
// place when they come after the data, merged otherwise); a hidden plot does not redraw until
// it is shown; the legend moves to the corner with the fewest points, and where every corner holds
// data, above the data (a short legend) or beside the axes (a tall one); the empty text shows while
// no series has a point, the legend only while there is a series; +-Inf values are left out of
// the axis range and an all-NaN series leaves the axes still.
#include <QSignalSpy>

#include "widgets/qcp.h"

#include <cmath>
#include <limits>

#include "tests/support/hh_test.h"
#include "widgets/curve_plot.h"

namespace test_curve_plot {

using hh::widgets::CurvePlot;

class TestCurvePlot : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  // The legend goes to the corner with the fewest points: top left by default, elsewhere when a
  // point sits there (a scatter's best variant at the top left was hidden behind it).
  void legendAvoidsTheData() {
    CurvePlot plot;
    plot.resize(600, 400);
    plot.show();
    const auto corner = [&] { return plot.plot()->axisRect()->insetLayout()->insetAlignment(0); };
    plot.addSeries("falling", {0, 1, 2, 3, 4}, {1.0, 0.6, 0.3, 0.1, 0.05});  // top left and bottom right taken
    plot.rescaleAxes();
    plot.replotNow();
    QCOMPARE(corner(), Qt::AlignTop | Qt::AlignRight);
    plot.clear();
    plot.addSeries("flat low", {0, 1, 2, 3, 4}, {0.0, 0.0, 0.0, 0.0, 1.0});  // bottom row and top right
    plot.rescaleAxes();
    plot.replotNow();
    QCOMPARE(corner(), Qt::AlignTop | Qt::AlignLeft);
  }

  // Every corner taken: a one-line legend gets a band above the data (the y range raised); a
  // legend of ten series goes beside the axes, and comes back inside when a corner is free again.
  void legendMakesRoomWhenNoCornerIsFree() {
    CurvePlot plot;
    plot.resize(600, 400);
    plot.show();
    plot.addSeries("corners", {0, 0, 4, 4, 2}, {0.0, 1.0, 0.0, 1.0, 0.5});
    plot.rescaleAxes();
    plot.replotNow();
    QVERIFY(!plot.legendOutside());
    QCOMPARE(plot.plot()->axisRect()->insetLayout()->insetAlignment(0), Qt::AlignTop | Qt::AlignLeft);
    const QRect legend = plot.plot()->legend->outerRect();
    QVERIFY2(plot.plot()->yAxis->coordToPixel(1.0) > legend.bottom(),
             qPrintable(QString("top point at pixel %1, legend down to %2")
                            .arg(plot.plot()->yAxis->coordToPixel(1.0))
                            .arg(legend.bottom())));

    plot.clear();
    for (int i = 0; i < 10; ++i)  // each a line through all four corners' boxes
      plot.addSeries(QString("series %1").arg(i), {0, 0.1, 2, 3.9, 4}, {1.0, 0.0 + 0.01 * i, 0.5, 0.0, 1.0});
    plot.rescaleAxes();
    plot.replotNow();
    QVERIFY(plot.legendOutside());
    plot.replotNow();  // laid out beside the axes
    QVERIFY(plot.plot()->legend->outerRect().left() >= plot.plot()->axisRect()->outerRect().right());
    QCOMPARE(plot.plot()->axisRect()->insetLayout()->elementCount(), 0);

    plot.clear();
    plot.addSeries("falling", {0, 1, 2, 3, 4}, {1.0, 0.6, 0.3, 0.1, 0.05});
    plot.rescaleAxes();
    plot.replotNow();
    QVERIFY(!plot.legendOutside());
    QCOMPARE(plot.plot()->axisRect()->insetLayout()->elementCount(), 1);
    QCOMPARE(plot.plot()->axisRect()->insetLayout()->insetAlignment(0), Qt::AlignTop | Qt::AlignRight);
    QCOMPARE(plot.plot()->plotLayout()->columnCount(), 1);
  }

  void emptyTextShowsUntilThereIsData() {
    CurvePlot plot;
    plot.resize(400, 300);
    plot.show();
    plot.replotNow();
    QVERIFY(!plot.emptyTextShown());  // none set
    plot.setEmptyText("no curves in this run");
    plot.replotNow();
    QVERIFY(plot.emptyTextShown());
    QVERIFY(!plot.plot()->legend->visible());  // nothing to name
    const int s = plot.addSeries("loss", {}, {});
    plot.replotNow();
    QVERIFY(plot.emptyTextShown());
    QVERIFY(!plot.plot()->legend->visible());  // a series without points: nothing drawn to name yet
    plot.appendPoint(s, 1.0, 2.0);
    plot.replotNow();
    QVERIFY(!plot.emptyTextShown());
    QVERIFY(plot.plot()->legend->visible());
    plot.setLegendVisible(false);
    plot.replotNow();
    QVERIFY(!plot.plot()->legend->visible());
    plot.clear();
    plot.replotNow();
    QVERIFY(plot.emptyTextShown());
    plot.setEmptyText("");
    plot.replotNow();
    QVERIFY(!plot.emptyTextShown());
  }

  void seriesWithAndWithoutSpread() {
    CurvePlot plot;
    const QVector<double> xs = {-2, -1, 0, 1, 2}, ys = {0.01, 0.05, 0.1, 0.3, 0.5}, sd = {0.01, 0.02, 0.02, 0.05, 0.1};
    QCOMPARE(plot.addSeries("softmax", xs, ys, sd), 0);
    QCOMPARE(plot.addSeries("hedgehog", xs, ys), 1);
    QCOMPARE(plot.seriesCount(), 2);
    QVERIFY(plot.hasSpread(0));
    QVERIFY(!plot.hasSpread(1));
    QCOMPARE(plot.pointCount(0), 5);
    QCOMPARE(plot.seriesName(1), QStringLiteral("hedgehog"));
    QVERIFY(plot.seriesColor(0) != plot.seriesColor(1));
    // Bands are not in the legend: one entry per series.
    QCOMPARE(plot.plot()->legend->itemCount(), 2);
    // Three graphs for the banded series, one for the other.
    QCOMPARE(plot.plot()->graphCount(), 4);
    // A spread of the wrong length is ignored rather than misdrawn.
    QCOMPARE(plot.addSeries("bad", xs, ys, {1.0, 2.0}), 2);
    QVERIFY(!plot.hasSpread(2));
  }

  void replotsAreCoalesced() {
    CurvePlot plot;
    plot.resize(400, 300);
    plot.show();
    const int before = plot.replotCount();
    const int s = plot.addSeries("loss", {}, {});
    for (int i = 0; i < 500; ++i) plot.appendPoint(s, i, std::exp(-i / 100.0));
    QVERIFY(plot.replotPending());
    QCOMPARE(plot.replotCount(), before);  // nothing drawn yet
    QTRY_VERIFY_WITH_TIMEOUT(!plot.replotPending(), 2000);
    QCOMPARE(plot.replotCount(), before + 1);  // one replot for 501 changes
    QCOMPARE(plot.pointCount(s), 500);
    // Axes were fitted to the data.
    QVERIFY(plot.plot()->xAxis->range().contains(0.0) && plot.plot()->xAxis->range().contains(499.0));
  }

  void nanLeavesAGapAndClearEmpties() {
    CurvePlot plot;
    plot.resize(300, 200);
    plot.addSeries("with gap", {0, 1, 2, 3}, {1, std::nan(""), 2, 3}, {0.1, std::nan(""), 0.1, 0.1});
    plot.replotNow();
    QVERIFY(!plot.replotPending());
    QCOMPARE(plot.pointCount(0), 4);
    plot.setTitle("Monotonicity");
    plot.setAxisLabels("q.k / sqrt(d)", "weight");
    plot.setLogY(true);
    plot.replotNow();
    QCOMPARE(plot.plot()->yAxis->scaleType(), QCPAxis::stLogarithmic);
    plot.clear();
    QCOMPARE(plot.seriesCount(), 0);
    QCOMPARE(plot.plot()->graphCount(), 0);
    // Colours restart after clear.
    plot.addSeries("a", {0, 1}, {0, 1});
    QCOMPARE(plot.seriesColor(0), hh::widgets::seriesPaletteColor(0));
  }

  // One +Inf loss once froze the y axis (QCustomPlot refuses an infinite range): later points
  // fell outside it. The axes now follow the finite points.
  void infiniteValuesAreLeftOutOfTheRange() {
    CurvePlot plot;
    plot.resize(400, 300);
    plot.show();
    const int s = plot.addSeries("loss", {}, {});
    for (int step = 1; step <= 20; ++step) {
      plot.appendPoints(s, {double(step)}, {step == 10 ? std::numeric_limits<double>::infinity() : 5.0 / step});
      plot.replotNow();
    }
    const QCPRange y = plot.plot()->yAxis->range();
    QVERIFY2(y.contains(5.0 / 20) && y.contains(5.0) && y.upper < 6.0,
             qPrintable(QStringLiteral("y [%1, %2]").arg(y.lower).arg(y.upper)));
    QVERIFY(plot.plot()->xAxis->range().contains(20.0));
    // An overlay: a finite series and a held-out curve of {150, +Inf}.
    CurvePlot overlay;
    overlay.resize(400, 300);
    QVector<double> xs, ys;
    for (int i = 1; i <= 100; ++i) xs << i, ys << 200.0 - i;
    overlay.addSeries("loss", xs, ys);
    overlay.addSeries("held-out", {50, 100}, {150, std::numeric_limits<double>::infinity()});
    overlay.replotNow();
    const QCPRange oy = overlay.plot()->yAxis->range();
    QVERIFY2(oy.contains(100.0) && oy.contains(199.0) && oy.upper < 210.0,
             qPrintable(QStringLiteral("y [%1, %2]").arg(oy.lower).arg(oy.upper)));
  }

  // A series of NaN only has nothing to fit: the axes stay put instead of growing each replot.
  void allNanSeriesLeavesTheAxesStill() {
    CurvePlot plot;
    plot.resize(400, 300);
    plot.show();
    const int s = plot.addSeries("nan", {}, {});
    plot.appendPoints(s, {1.0}, {std::nan("")});
    plot.replotNow();
    const QCPRange x = plot.plot()->xAxis->range(), y = plot.plot()->yAxis->range();
    for (int step = 2; step <= 20; ++step) {
      plot.appendPoints(s, {double(step)}, {std::nan("")});
      plot.replotNow();
    }
    QCOMPARE(plot.plot()->xAxis->range(), x);
    QCOMPARE(plot.plot()->yAxis->range(), y);
  }

  void userZoomStopsAutoRescale() {
    CurvePlot plot;
    plot.resize(300, 200);
    plot.addSeries("a", {0, 1, 2}, {0, 1, 2});
    plot.replotNow();
    QWheelEvent wheel(QPointF(150, 100), plot.plot()->mapToGlobal(QPointF(150, 100)), QPoint(), QPoint(0, 120),
                      Qt::NoButton, Qt::NoModifier, Qt::NoScrollPhase, false);
    QCoreApplication::sendEvent(plot.plot(), &wheel);
    const QCPRange zoomed = plot.plot()->xAxis->range();
    plot.appendPoint(0, 100, 100);
    plot.replotNow();
    QCOMPARE(plot.plot()->xAxis->range(), zoomed);  // the user's view is kept
    plot.rescaleAxes();
    plot.replotNow();
    QVERIFY(plot.plot()->xAxis->range().contains(100.0));
  }

  void appendPointsKeepsKeysSorted() {
    CurvePlot plot;
    const int s = plot.addSeries("loss", {1, 2}, {10, 20});
    plot.appendPoints(s, {3, 4, 5}, {30, 40, 50});
    QCOMPARE(plot.pointCount(s), 5);
    plot.appendPoints(s, {0, 2.5}, {0, 25});  // before and inside the data: merged in order
    QCOMPARE(plot.pointCount(s), 7);
    const auto data = plot.plot()->graph(s)->data();
    const double keys[] = {0, 1, 2, 2.5, 3, 4, 5};
    for (int i = 0; i < 7; ++i) QCOMPARE((data->constBegin() + i)->key, keys[i]);
    QCOMPARE((data->constBegin() + 3)->value, 25.0);
  }

  void hiddenPlotsRedrawWhenShown() {
    CurvePlot plot;
    plot.resize(300, 200);
    const int s = plot.addSeries("a", {0, 1}, {0, 1});
    QTRY_VERIFY(!plot.replotPending());
    const int before = plot.replotCount();
    QVERIFY(plot.staleWhileHidden());  // never shown: the first replot was skipped
    plot.appendPoint(s, 2, 2);
    QTRY_VERIFY(!plot.replotPending());
    QCOMPARE(plot.replotCount(), before);
    plot.show();
    QTRY_COMPARE(plot.replotCount(), before + 1);
    QVERIFY(!plot.staleWhileHidden());
    QVERIFY(plot.plot()->xAxis->range().contains(2.0));
  }
};

HH_TEST_SUITE(TestCurvePlot, "widgets.curve_plot", &TestCurvePlot::appendPointsKeepsKeysSorted,
              &TestCurvePlot::hiddenPlotsRedrawWhenShown, &TestCurvePlot::seriesWithAndWithoutSpread,
              &TestCurvePlot::replotsAreCoalesced, &TestCurvePlot::nanLeavesAGapAndClearEmpties,
              &TestCurvePlot::userZoomStopsAutoRescale, &TestCurvePlot::legendAvoidsTheData,
              &TestCurvePlot::legendMakesRoomWhenNoCornerIsFree, &TestCurvePlot::emptyTextShowsUntilThereIsData,
              &TestCurvePlot::infiniteValuesAreLeftOutOfTheRange, &TestCurvePlot::allNanSeriesLeavesTheAxesStill)

}  // namespace test_curve_plot

#if HH_HAVE_QTEST
#include "test_curve_plot.moc"
#endif
