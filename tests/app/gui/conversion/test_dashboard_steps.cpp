// app.gui.dashboard_steps: the dashboard's step slider and its cheap live path.
//   - a finished run file with three snapshots (steps 10, 20, 30) and KL rows at the same steps:
//     the slider spans the three and starts on the latest; moving it to 0 and 1 shows that
//     snapshot's probe maps and the KL row of that step in the grid (read by the follower),
//     moving it back to the end shows the latest again; the monotonicity plot shows the teacher's
//     and the student's curve of that step;
//   - while live (updates fed one by one), the slider follows each new snapshot; once the user
//     moves it away it stays there while snapshots arrive, and returns to following at the end;
//   - loss rows arriving in several updates give the same raw and smoothed traces as a
//     from-scratch exponential moving average (the smoothed trace is extended, not recomputed);
//   - a hidden dashboard does not redraw its plots; it redraws them once when shown;
//   - a snapshot without a linear map (a softmax model's training) leaves that map empty with a
//     line saying why; the next run's linear map is drawn again.
#include <QSlider>
#include <QTest>

#include <cmath>

#include "app/gui/conversion/dashboard_view.h"
#include "app/gui/conversion/run_follower.h"
#include "engine/runs/run_writer.h"
#include "tests/support/temp_dir.h"
#include "tests/support/hh_test.h"
#include "widgets/curve_plot.h"
#include "widgets/head_grid.h"
#include "widgets/heatmap_view.h"

#include "widgets/qcp.h"

namespace test_dashboard_steps {

namespace {

namespace r = hh::runs;

r::RunHeader header() {
  r::RunHeader h;
  h.runId = "steps";
  h.kind = "distill";
  h.configJson = R"({"steps": 30})";
  h.layout.scalars = {"loss"};
  h.layout.layers = 1;
  h.layout.heads = 2;
  h.layout.tables = {"kl"};
  h.layout.snapshots.pairs = {{0, 1}};
  h.layout.snapshots.tokens = {"a", "b", "c"};
  h.layout.curves.pairs = {{0, 1}, {0, 1}};
  h.layout.curves.labels = {"softmax", "linear"};
  h.layout.curves.bins = 2;
  return h;
}

// Snapshot k (k = 1, 2, 3 at step 10k): every softmax weight is k / 10, the linear map is k at (2, 0).
void appendSnapshot(r::RunWriter& w, int k) {
  std::vector<float> softmax(9, float(k) / 10.0f), linear(9, 0.0f);
  linear[6] = float(k);
  w.appendSnapshot(10 * k, softmax, linear);
  // Curves at the same step: the teacher's means (0.25, 0.75), the student's (k, 2k).
  const r::CurveRow teacher{{-1.0, 1.0}, {0.25, 0.75}, {0.1, 0.1}, {3, 3}};
  const r::CurveRow student{{-1.0, 1.0}, {double(k), 2.0 * k}, {0.0, 0.0}, {3, 3}};
  w.appendCurves(10 * k, {teacher, student});
}

hh::gui::RunUpdate snapshotUpdate(int k, bool reset) {
  hh::gui::RunUpdate u;
  u.path = "live.h5";
  u.kind = "distill";
  u.status = "running";
  u.reset = reset;
  if (reset) {
    u.snapshotPairs = {{0, 1}};
    u.probeTokens = {"a", "b", "c"};
  }
  r::Snapshot s;
  s.step = 10 * k;
  s.size = 3;
  s.softmax.assign(9, float(k) / 10.0f);
  s.linear.assign(9, 0.0f);
  s.linear[6] = float(k);
  u.latestSnapshot = s;
  u.newSnapshotSteps = {10 * k};
  u.lastStep = 10 * k;
  return u;
}

}  // namespace

class TestDashboardSteps : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void sliderShowsEarlierSnapshotsOfAFinishedRun() {
    hh::test::TempDir dir("dashboard_steps");
    const auto path = dir.file("run.h5");
    {
      auto w = r::RunWriter::create(path, header());
      for (int k = 1; k <= 3; ++k) {
        w.appendScalar(10 * k, "loss", 1.0 / k);
        w.appendTable(10 * k, "kl", {0.1 * k, 0.2 * k});
        appendSnapshot(w, k);
      }
      w.setStatus(r::RunStatus::Completed, "done");
    }
    hh::gui::DashboardView view;
    view.resize(1200, 800);
    view.show();
    hh::gui::RunFollower follower;
    view.attachFollower(&follower);  // same thread: requests are answered at once
    follower.follow(QString::fromStdString(path));
    QSlider* slider = view.stepSlider();
    QCOMPARE(view.snapshotCount(), 3);
    QCOMPARE(slider->minimum(), 0);
    QCOMPARE(slider->maximum(), 2);
    QCOMPARE(slider->value(), 2);
    QVERIFY(view.followingLatest());
    QCOMPARE(view.shownSnapshotStep(), int64_t(30));
    QCOMPARE(view.headGrid()->summary(0, 1), 0.2 * 3);
    QCOMPARE(double(view.linearMap()->valueAt(2, 0)), 3.0);
    auto* mono = view.monotonicityPlot();
    QCOMPARE(mono->seriesCount(), 2);
    QCOMPARE(mono->seriesName(0), QString("softmax"));
    QCOMPARE(mono->seriesName(1), QString("linear"));
    QVERIFY(mono->seriesValues(0) == QVector<double>({0.25, 0.75}));
    QVERIFY(mono->seriesValues(1) == QVector<double>({3.0, 6.0}));

    slider->setValue(0);
    QVERIFY(!view.followingLatest());
    QCOMPARE(view.shownSnapshotStep(), int64_t(10));
    QCOMPARE(double(view.linearMap()->valueAt(2, 0)), 1.0);
    QCOMPARE(double(view.softmaxMap()->valueAt(1, 1)), double(0.1f));
    QCOMPARE(view.headGrid()->summary(0, 0), 0.1);  // the KL row of step 10
    QCOMPARE(view.headGrid()->summary(0, 1), 0.2);
    QVERIFY(mono->seriesValues(1) == QVector<double>({1.0, 2.0}));  // the student at step 10

    slider->setValue(1);
    QCOMPARE(view.shownSnapshotStep(), int64_t(20));
    QCOMPARE(double(view.linearMap()->valueAt(2, 0)), 2.0);
    QCOMPARE(view.headGrid()->summary(0, 1), 0.2 * 2);

    slider->setValue(2);
    QVERIFY(view.followingLatest());
    QCOMPARE(view.shownSnapshotStep(), int64_t(30));
    QCOMPARE(double(view.linearMap()->valueAt(2, 0)), 3.0);
    QCOMPARE(view.headGrid()->summary(0, 1), 0.2 * 3);
    QVERIFY(mono->seriesValues(1) == QVector<double>({3.0, 6.0}));
  }

  void sliderFollowsTheLatestUnlessMovedAway() {
    hh::gui::DashboardView view;
    view.resize(1000, 700);
    view.show();
    view.applyUpdate(snapshotUpdate(1, true));
    view.applyUpdate(snapshotUpdate(2, false));
    QCOMPARE(view.stepSlider()->maximum(), 1);
    QCOMPARE(view.stepSlider()->value(), 1);
    QCOMPARE(view.shownSnapshotStep(), int64_t(20));
    view.stepSlider()->setValue(0);  // the user looks back (no follower: nothing is loaded)
    QVERIFY(!view.followingLatest());
    view.applyUpdate(snapshotUpdate(3, false));
    QCOMPARE(view.stepSlider()->maximum(), 2);
    QCOMPARE(view.stepSlider()->value(), 0);       // stays where the user put it
    QVERIFY(view.shownSnapshotStep() != int64_t(30));
    view.stepSlider()->setValue(2);                // back to the end: follows again
    QVERIFY(view.followingLatest());
    QCOMPARE(view.shownSnapshotStep(), int64_t(30));
    QCOMPARE(double(view.linearMap()->valueAt(2, 0)), 3.0);
    view.applyUpdate(snapshotUpdate(4, false));
    QCOMPARE(view.stepSlider()->value(), 3);
    QCOMPARE(view.shownSnapshotStep(), int64_t(40));
  }

  void lossGrowsByAppendingWithTheSameSmoothing() {
    hh::gui::DashboardView view;
    view.setSmoothing(0.8);
    hh::gui::RunUpdate first;
    first.path = "loss.h5";
    first.kind = "train";
    first.status = "running";
    first.reset = true;
    view.applyUpdate(first);
    std::vector<double> all;
    for (int chunk = 0; chunk < 4; ++chunk) {
      hh::gui::RunUpdate u;
      u.path = "loss.h5";
      u.status = "running";
      auto& s = u.newScalars["loss"];
      for (int i = 0; i < 7; ++i) {
        const int step = chunk * 7 + i + 1;
        s.steps.push_back(step);
        s.values.push_back(3.0 + std::sin(step));
        all.push_back(3.0 + std::sin(step));
      }
      view.applyUpdate(u);
    }
    QCOMPARE(view.lossPointCount(), 28);
    auto* plot = view.lossPlot()->plot();
    QCOMPARE(plot->graph(0)->dataCount(), 28);
    QCOMPARE(plot->graph(1)->dataCount(), 28);
    double ema = 0;
    for (int i = 0; i < 28; ++i) {
      ema = i == 0 ? all[size_t(i)] : 0.8 * ema + 0.2 * all[size_t(i)];
      QVERIFY(std::abs((plot->graph(1)->data()->constBegin() + i)->value - ema) < 1e-12);
      QCOMPARE((plot->graph(0)->data()->constBegin() + i)->key, double(i + 1));
    }
    view.setSmoothing(0.0);  // a new weight recomputes the smoothed trace: raw values
    QCOMPARE((plot->graph(1)->data()->constEnd() - 1)->value, all.back());
  }

  void aHiddenDashboardDoesNotRedraw() {
    hh::gui::DashboardView view;
    view.resize(1000, 700);
    view.show();
    view.applyUpdate(snapshotUpdate(1, true));
    QTRY_VERIFY(!view.lossPlot()->replotPending());
    view.hide();
    const int before = view.lossPlot()->replotCount();
    hh::gui::RunUpdate u;
    u.path = "live.h5";
    u.status = "running";
    u.newScalars["loss"].steps = {1, 2, 3};
    u.newScalars["loss"].values = {3, 2, 1};
    view.applyUpdate(u);
    QTest::qWait(3 * hh::widgets::CurvePlot::kReplotDelayMs);
    QCOMPARE(view.lossPlot()->replotCount(), before);  // nothing drawn while hidden
    QVERIFY(view.lossPlot()->staleWhileHidden());
    QCOMPARE(view.lossPlot()->pointCount(0), 3);       // the data is there all the same
    view.show();
    QTRY_COMPARE(view.lossPlot()->replotCount(), before + 1);
    QVERIFY(!view.lossPlot()->staleWhileHidden());
  }

  void aSoftmaxModelsRunSaysItHasNoLinearMap() {
    hh::gui::DashboardView view;
    view.resize(1000, 700);
    view.show();
    hh::gui::RunUpdate u = snapshotUpdate(1, true);
    u.kind = "train";
    u.latestSnapshot->linear.assign(9, std::nanf(""));  // what a softmax model's training stores
    view.applyUpdate(u);
    QCOMPARE(view.softmaxMap()->rows(), 3);
    QCOMPARE(view.linearMap()->rows(), 0);
    QVERIFY(view.linearMap()->emptyTextShown());
    QVERIFY2(view.linearMap()->emptyText().contains("uses softmax"), qPrintable(view.linearMap()->emptyText()));
    // Another run with a linear map: it is drawn, and no run's snapshot yet says just that.
    view.applyUpdate(snapshotUpdate(2, true));
    QCOMPARE(double(view.linearMap()->valueAt(2, 0)), 2.0);
    QVERIFY(!view.linearMap()->emptyTextShown());
    view.clear();
    QVERIFY2(view.linearMap()->emptyText().startsWith("No run open"), qPrintable(view.linearMap()->emptyText()));
  }
};

HH_TEST_SUITE(TestDashboardSteps, "app.gui.dashboard_steps",
              &TestDashboardSteps::sliderShowsEarlierSnapshotsOfAFinishedRun,
              &TestDashboardSteps::sliderFollowsTheLatestUnlessMovedAway,
              &TestDashboardSteps::lossGrowsByAppendingWithTheSameSmoothing,
              &TestDashboardSteps::aHiddenDashboardDoesNotRedraw,
              &TestDashboardSteps::aSoftmaxModelsRunSaysItHasNoLinearMap)

}  // namespace test_dashboard_steps

#if HH_HAVE_QTEST
#include "test_dashboard_steps.moc"
#endif
