// Colour maps: viridis endpoints and anchors, monotone luminance, the diverging map's white
// centre and symmetry, NaN colours, and the QCPColorGradient form agreeing with colorAt.
#include "widgets/qcp.h"

#include <cmath>

#include "tests/support/hh_test.h"
#include "widgets/colormap.h"

namespace test_colormap {

using hh::widgets::ColorMap;

namespace {
// Largest per-channel difference between two colours.
int channelDistance(QRgb a, QRgb b) {
  return std::max({std::abs(qRed(a) - qRed(b)), std::abs(qGreen(a) - qGreen(b)), std::abs(qBlue(a) - qBlue(b))});
}
}  // namespace

class TestColorMap : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void viridisEndpointsAndMiddle() {
    const ColorMap& v = ColorMap::viridis();
    QCOMPARE(v.colorAt(0.0).rgb(), QColor("#440154").rgb());
    QCOMPARE(v.colorAt(1.0).rgb(), QColor("#fde725").rgb());
    QVERIFY(channelDistance(v.rgbAt(0.5), QColor("#21918c").rgb()) <= 2);
    // Clamped outside [0, 1].
    QCOMPARE(v.rgbAt(-3.0), v.rgbAt(0.0));
    QCOMPARE(v.rgbAt(7.0), v.rgbAt(1.0));
    QCOMPARE(hh::widgets::viridisAt(1.0), v.colorAt(1.0));
  }

  void viridisLuminanceIsMonotone() {
    const ColorMap& v = ColorMap::viridis();
    double previous = -1.0;
    for (int i = 0; i <= 1000; ++i) {
      const double y = hh::widgets::relativeLuminance(v.rgbAt(i / 1000.0));
      // 8-bit rounding of interpolated channels may wobble by a hair; never by more.
      QVERIFY2(y >= previous - 1e-3, qPrintable(QStringLiteral("t = %1").arg(i / 1000.0)));
      previous = std::max(previous, y);
    }
    QVERIFY(hh::widgets::relativeLuminance(v.rgbAt(1.0)) > 10 * hh::widgets::relativeLuminance(v.rgbAt(0.0)));
  }

  void anchorsAreSortedAndDense() {
    for (const ColorMap* map : {&ColorMap::viridis(), &ColorMap::diverging()}) {
      const auto& anchors = map->anchors();
      QVERIFY(anchors.size() >= 11);
      QCOMPARE(anchors.front().t, 0.0);
      QCOMPARE(anchors.back().t, 1.0);
      for (size_t i = 1; i < anchors.size(); ++i) QVERIFY(anchors[i].t > anchors[i - 1].t);
    }
    QVERIFY(ColorMap::viridis().anchors().size() >= 16);
  }

  void divergingIsWhiteInTheMiddleAndSymmetric() {
    const ColorMap& d = ColorMap::diverging();
    const QRgb mid = d.rgbAt(0.5);
    QVERIFY(qRed(mid) > 240 && qGreen(mid) > 240 && qBlue(mid) > 240);
    const QRgb low = d.rgbAt(0.0), high = d.rgbAt(1.0);
    QVERIFY(qBlue(low) > qRed(low));    // negative end is blue
    QVERIFY(qRed(high) > qBlue(high));  // positive end is red
    // Equal distances from 0 look equally strong.
    for (double t : {0.1, 0.25, 0.4}) {
      const double a = hh::widgets::relativeLuminance(d.rgbAt(0.5 - t));
      const double b = hh::widgets::relativeLuminance(d.rgbAt(0.5 + t));
      QVERIFY2(std::fabs(a - b) < 0.12, qPrintable(QStringLiteral("t = %1: %2 vs %3").arg(t).arg(a).arg(b)));
    }
    QCOMPARE(d.rgbFor(0.0, -2.0, 2.0), d.lookupTable()[128]);
  }

  void nanGetsTheNeutralColour() {
    QCOMPARE(ColorMap::viridis().rgbAt(std::nan("")), hh::widgets::kMaskedColor);
    QCOMPARE(ColorMap::diverging().rgbAt(std::nan("")), hh::widgets::kMaskedColorDiverging);
    QCOMPARE(ColorMap::viridis().rgbFor(std::nan(""), 0.0, 1.0), hh::widgets::kMaskedColor);
  }

  void gradientMatchesColorAt() {
    const ColorMap& v = ColorMap::viridis();
    QCPColorGradient g = v.gradient();
    const QCPRange range(0.0, 1.0);
    for (double t : {0.0, 0.2, 0.5, 0.77, 1.0}) {
      const double data[1] = {t};
      QRgb out[1];
      g.colorize(data, range, out, 1);
      QVERIFY2(channelDistance(out[0], v.rgbAt(t)) <= 3, qPrintable(QStringLiteral("t = %1").arg(t)));
    }
    const double nan[1] = {std::nan("")};
    QRgb out[1];
    g.colorize(nan, range, out, 1);
    QCOMPARE(out[0] | 0xff000000u, hh::widgets::kMaskedColor);
    // Lookup table ends.
    QCOMPARE(v.lookupTable()[0], v.rgbAt(0.0));
    QCOMPARE(v.lookupTable()[255], v.rgbAt(1.0));
  }
};

HH_TEST_SUITE(TestColorMap, "widgets.colormap",
              &TestColorMap::viridisEndpointsAndMiddle, &TestColorMap::viridisLuminanceIsMonotone,
              &TestColorMap::anchorsAreSortedAndDense, &TestColorMap::divergingIsWhiteInTheMiddleAndSymmetric,
              &TestColorMap::nanGetsTheNeutralColour, &TestColorMap::gradientMatchesColorAt)

}  // namespace test_colormap

#if HH_HAVE_QTEST
#include "test_colormap.moc"
#endif
