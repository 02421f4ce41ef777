// HeadGrid: clicking a thumbnail emits headClicked with its (layer, head), hit-testing misses
// the headers, thumbnails are block-reduced to at most kThumbCells, summary frames follow the
// summaries' range (reversed when lower is better), and the grid grows on demand; an empty grid
// shows its empty text, a filled one does not.
#include <QSignalSpy>
#include <QTest>

#include <cmath>
#include <limits>
#include <vector>

#include "tests/support/hh_test.h"
#include "widgets/colormap.h"
#include "widgets/head_grid.h"

namespace test_head_grid {

using hh::widgets::HeadGrid;

namespace {
std::vector<float> diagonal(int n) {
  std::vector<float> v(size_t(n) * n, 0.0f);
  for (int i = 0; i < n; ++i) v[size_t(i) * n + i] = 1.0f;
  return v;
}
}  // namespace

class TestHeadGrid : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  // A diverged head (summary +Inf) once gave t = NaN and indexed the colour stops at INT_MIN.
  void infiniteSummaryHasNoColourAndIsLeftOutOfTheRange() {
    HeadGrid grid;
    grid.setGridSize(1, 4);
    grid.setSummary(0, 0, 0.1);
    grid.setSummary(0, 1, 0.5);
    grid.setSummary(0, 2, std::numeric_limits<double>::infinity());
    grid.setSummary(0, 3, -std::numeric_limits<double>::infinity());
    grid.setSummaryHigherIsBetter(false);
    QVERIFY(!grid.summaryColor(0, 2).isValid());
    QVERIFY(!grid.summaryColor(0, 3).isValid());
    // The finite range is [0.1, 0.5]: 0.1 is the best (grey end), 0.5 the worst (red end).
    QCOMPARE(grid.summaryColor(0, 0), QColor(0xdd, 0xdf, 0xe3));
    QCOMPARE(grid.summaryColor(0, 1), QColor(0xd9, 0x30, 0x25));
    grid.resize(grid.sizeHint());
    QVERIFY(!grid.grab().toImage().isNull());  // paints (legend included) without a crash
  }

  void emptyGridShowsItsText() {
    HeadGrid grid;
    grid.resize(300, 200);
    const QImage blank = grid.grab().toImage();
    grid.setEmptyText(QStringLiteral("No per-head tables in this run yet"));
    QCOMPARE(grid.emptyText(), QStringLiteral("No per-head tables in this run yet"));
    const QImage withText = grid.grab().toImage();
    QVERIFY(withText != blank);  // the text is drawn
    grid.setGridSize(1, 1);
    grid.setCell(0, 0, 8, 8, diagonal(8), 0.5);
    HeadGrid filled;
    filled.resize(300, 200);
    filled.setGridSize(1, 1);
    filled.setCell(0, 0, 8, 8, diagonal(8), 0.5);
    QCOMPARE(grid.grab().toImage(), filled.grab().toImage());  // with cells, the text is gone
  }

  void clickEmitsTheRightHead() {
    HeadGrid grid;
    grid.setGridSize(3, 4);
    for (int l = 0; l < 3; ++l)
      for (int h = 0; h < 4; ++h) grid.setCell(l, h, 8, 8, diagonal(8), l * 10 + h);
    grid.resize(grid.sizeHint());
    grid.show();
    QSignalSpy spy(&grid, &HeadGrid::headClicked);
    for (int l = 0; l < 3; ++l) {
      for (int h = 0; h < 4; ++h) {
        const QRect r = grid.thumbnailRect(l, h);
        QTest::mouseClick(&grid, Qt::LeftButton, Qt::NoModifier, r.center());
        QCOMPARE(spy.count(), 1);
        QCOMPARE(spy.at(0).at(0).toInt(), l);
        QCOMPARE(spy.at(0).at(1).toInt(), h);
        QCOMPARE(grid.cellAt(r.topLeft()).value_or(QPoint(-1, -1)), QPoint(h, l));
        spy.clear();
      }
    }
    QTest::mouseClick(&grid, Qt::LeftButton, Qt::NoModifier, QPoint(2, 2));  // header corner
    QCOMPARE(spy.count(), 0);
    QVERIFY(!grid.cellAt(QPoint(grid.width() + 10, 5)).has_value());
  }

  void thumbnailsAreSmallAndSummariesColoured() {
    HeadGrid grid;
    grid.setCell(0, 0, 300, 300, diagonal(300), 0.0);
    grid.setCell(0, 1, 8, 8, diagonal(8), 1.0);
    grid.setCell(1, 1, 8, 8, diagonal(8), 0.5);
    QCOMPARE(grid.layers(), 2);  // grown on demand
    QCOMPARE(grid.heads(), 2);
    QVERIFY(grid.thumbnail(0, 0).width() <= HeadGrid::kThumbCells);
    QCOMPARE(grid.thumbnail(0, 1).size(), QSize(8, 8));
    QVERIFY(grid.thumbnail(1, 0).isNull());  // never set
    QVERIFY(!grid.summaryColor(1, 0).isValid());
    // Diagonal pixel is the top colour, off-diagonal the bottom.
    QCOMPARE(grid.thumbnail(0, 1).pixel(3, 3), hh::widgets::ColorMap::viridis().rgbAt(1.0));
    QCOMPARE(grid.thumbnail(0, 1).pixel(3, 4), hh::widgets::ColorMap::viridis().rgbAt(0.0));
    // Frames: light grey for the best head, amber in the middle, red for the worst (the heads that
    // need a look stand out).
    const QColor best(0xdd, 0xdf, 0xe3), middle(0xf9, 0xab, 0x00), worst(0xd9, 0x30, 0x25);
    QCOMPARE(grid.summaryColor(0, 1), best);   // 1.0: the highest, and higher is better
    QCOMPARE(grid.summaryColor(0, 0), worst);  // 0.0
    grid.setSummaryHigherIsBetter(false);      // e.g. KL: small is good
    QCOMPARE(grid.summaryColor(0, 0), best);
    QCOMPARE(grid.summaryColor(0, 1), worst);
    grid.setSummaryRange(0.0, 2.0);
    QCOMPARE(grid.summaryColor(0, 1), middle);
    grid.setSummary(0, 1, 2.0);
    QCOMPARE(grid.summary(0, 1), 2.0);
    // Painting works offscreen.
    grid.resize(300, 300);
    const QImage image = grid.grab().toImage();
    QCOMPARE(image.size(), QSize(300, 300));
  }
};

HH_TEST_SUITE(TestHeadGrid, "widgets.head_grid", &TestHeadGrid::infiniteSummaryHasNoColourAndIsLeftOutOfTheRange,
              &TestHeadGrid::clickEmitsTheRightHead, &TestHeadGrid::thumbnailsAreSmallAndSummariesColoured,
              &TestHeadGrid::emptyGridShowsItsText)

}  // namespace test_head_grid

#if HH_HAVE_QTEST
#include "test_head_grid.moc"
#endif
