// app.gui.comparison: the comparison view keeps the result it is given and its heatmaps share the
// result's T x T matrices (no copies: at T = 4096 the copies took a second and a gigabyte on the
// GUI thread); the colour scales come from the 99th percentiles computed with the result on the
// worker (computeComparison), which match the percentiles of the result's own values.
#include <QTest>

#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "app/gui/comparison/comparison_session.h"
#include "app/gui/comparison/comparison_view.h"
#include "tests/support/hh_test.h"
#include "widgets/heatmap_view.h"

namespace test_comparison_view {

using hh::gui::ComparisonResult;
using hh::gui::ComparisonView;

namespace {

// A causal T x T matrix: row i holds `base / (i + 1)` on keys 0..i, NaN above the diagonal.
std::vector<float> causal(int t, float base) {
  std::vector<float> v(size_t(t) * size_t(t), std::nanf(""));
  for (int i = 0; i < t; ++i)
    for (int j = 0; j <= i; ++j) v[size_t(i) * size_t(t) + size_t(j)] = base / float(i + 1);
  return v;
}

// The 99th percentile of the finite values (or magnitudes) of some matrices, as the view once
// computed it itself.
double percentile99(const std::vector<const std::vector<float>*>& matrices, bool magnitude) {
  std::vector<float> finite;
  for (const auto* m : matrices)
    for (float x : *m)
      if (std::isfinite(x)) finite.push_back(magnitude ? std::fabs(x) : x);
  const auto nth = finite.begin() + std::ptrdiff_t(0.99 * double(finite.size() - 1));
  std::nth_element(finite.begin(), nth, finite.end());
  return double(*nth);
}

}  // namespace

class TestComparisonView : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void mapsShareTheResultsMatrices() {
    const int t = 32;
    ComparisonResult r;
    r.length = t;
    r.headDim = 4;
    r.softmax = causal(t, 1.0f);
    r.scores = causal(t, 2.0f);
    r.weightsTop = 0.25;  // not the values' own percentile: the view must take it as given
    for (const char* name : {"hedgehog", "elu"}) {
      hh::gui::MapComparison m;
      m.name = name;
      m.weights = causal(t, 0.9f);
      m.difference = causal(t, -0.1f);
      m.differenceTop = 0.05;
      r.maps.push_back(std::move(m));
    }
    ComparisonView view;
    view.setResult(std::move(r));
    const ComparisonResult& kept = view.result();
    QCOMPARE(view.mapCount(), 3);
    QCOMPARE(view.softmaxMap()->sharedMatrix().get(), &kept.softmax);
    QCOMPARE(view.map(1)->sharedMatrix().get(), &kept.maps[0].weights);
    QCOMPARE(view.map(2)->sharedMatrix().get(), &kept.maps[1].weights);
    for (int i = 0; i < 3; ++i) QCOMPARE(view.map(i)->sharedScores().get(), &kept.scores);
    QCOMPARE(view.differenceMap()->sharedMatrix().get(), &kept.maps[0].difference);
    QCOMPARE(view.differenceMap()->sharedScores().get(), &kept.scores);
    QCOMPARE(view.softmaxMap()->valueRange(), std::make_pair(0.0, 0.25));
    QCOMPARE(view.differenceMap()->valueRange(), std::make_pair(-0.05, 0.05));
    view.setFocusedMap(1);
    QCOMPARE(view.differenceMap()->sharedMatrix().get(), &kept.maps[1].difference);
    // A result with no maps (an error shows one): the views it hides let go of the old result.
    const std::weak_ptr old(view.map(2)->sharedMatrix());
    ComparisonResult none;
    none.length = t;
    none.softmax = causal(t, 1.0f);
    none.scores = causal(t, 2.0f);
    view.setResult(std::move(none));
    QVERIFY(old.expired());
  }

  // A result made by hand without percentiles: the maps span their own [min, max].
  void unknownPercentilesGiveTheDataRange() {
    ComparisonResult r;
    r.length = 4;
    r.softmax = causal(4, 1.0f);
    r.scores = causal(4, 1.0f);
    ComparisonView view;
    view.setResult(std::move(r));
    QCOMPARE(view.softmaxMap()->valueRange(), std::make_pair(0.25, 1.0));
  }

  void computedPercentilesMatchTheValues() {
    hh::gui::ComparisonSettings settings;
    settings.length = 48;
    settings.headDim = 8;
    settings.featureMaps = {QStringLiteral("hedgehog"), QStringLiteral("elu")};
    const ComparisonResult r = hh::gui::computeComparison(settings);
    QVERIFY2(r.error.isEmpty(), qPrintable(r.error));
    QCOMPARE(int(r.maps.size()), 2);
    std::vector<const std::vector<float>*> all{&r.softmax};
    for (const auto& m : r.maps) all.push_back(&m.weights);
    QVERIFY(r.weightsTop > 0);
    QVERIFY(std::abs(r.weightsTop - percentile99(all, false)) < 1e-6);
    for (const auto& m : r.maps) {
      QVERIFY(m.differenceTop > 0);
      QVERIFY2(std::abs(m.differenceTop - percentile99({&m.difference}, true)) < 1e-6,
               qPrintable(QStringLiteral("%1: %2 vs %3")
                              .arg(m.name)
                              .arg(m.differenceTop)
                              .arg(percentile99({&m.difference}, true))));
    }
  }
};

HH_TEST_SUITE(TestComparisonView, "app.gui.comparison", &TestComparisonView::mapsShareTheResultsMatrices,
              &TestComparisonView::unknownPercentilesGiveTheDataRange,
              &TestComparisonView::computedPercentilesMatchTheValues)

}  // namespace test_comparison_view

#if HH_HAVE_QTEST
#include "test_comparison_view.moc"
#endif
