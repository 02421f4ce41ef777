// app.gui.dashboard: the conversion dashboard and its plumbing.
//   - a finished run file (written here with known rows) is shown as it is: every loss row on the
//     loss plot, the per-head grid coloured from the latest KL row, the snapshot maps;
//   - a NaN loss is drawn raw but left out of the smoothed trace (which stayed NaN after it); the
//     snapshot maps of a causal model draw the future masked (NaN), not as weight 0, and the
//     softmax and linear maps share one colour range clipped at the 99th percentile;
//   - a finetuning on teacher_kl shows its held-out KL to the teacher (val_kl) as the held-out
//     points, named so, not the next-token val_loss; a run without val_kl is back to val_loss;
//   - the main window starts a conversion of the tiny GPT-2 fixture from a project file; the
//     dashboard follows the stage run files while the job writes them and shows their steps, and
//     the GUI thread stays responsive: the longest gap between 10 ms timer ticks while the job
//     runs is under 100 ms;
//   - the finished conversion ends on its summary (quality before and after, the evaluated maps,
//     the per-head KL); its distillation curves are a click away, and opening the convert run
//     file again shows the summary;
//   - cancel from the GUI stops the job within 2 s, the run file says cancelled, and the progress
//     bar says "cancelled in <stage> at <step>/<total>" with no ETA left on it;
//   - a project file that is not valid is refused with a message naming the key;
//   - a train run's only table (per-head entropy) is chosen and shown, the tables it lacks cannot
//     be chosen, and the curves it lacks are said to be missing; a run without tables says so.
#include <QApplication>
#include <QComboBox>
#include <QStandardItemModel>
#include <QElapsedTimer>
#include <QPushButton>
#include <QSignalSpy>
#include <QTableWidget>
#include <QTest>
#include <QTimer>

#include <cmath>
#include <cstdlib>
#include <fstream>

#include "app/gui/conversion/conversion_summary.h"
#include "app/gui/conversion/dashboard_view.h"
#include "app/gui/conversion/job_runner.h"
#include "app/gui/shell/main_window.h"
#include "app/gui/conversion/run_follower.h"
#include "engine/core/process_memory.h"
#include "engine/jobs/convert_job.h"
#include "engine/runs/run_reader.h"
#include "engine/runs/run_writer.h"
#include "tests/engine/jobs/jobs_test_support.h"
#include "tests/app/gui/gui_test_support.h"
#include "tests/support/hh_test.h"
#include "widgets/curve_plot.h"
#include "widgets/head_grid.h"
#include "widgets/heatmap_view.h"

namespace test_dashboard {

namespace {

namespace j = hh::jobs;
namespace r = hh::runs;

std::string writeProject(const hh::test::TempDir& dir, int64_t distillSteps, int64_t finetuneSteps) {
  j::ConvertConfig c = hh::test::tinyConvertConfig(dir);
  c.distill.steps = distillSteps;
  c.distill.evalEvery = 5;
  c.distill.snapshotEvery = 5;
  c.finetune.steps = finetuneSteps;
  c.finetune.evalEvery = 5;
  c.evaluate.featureMaps = {"hedgehog", "trained"};
  c.evaluate.tableSequences = 4;
  return hh::test::writeProjectFile(dir, c);
}


// A shown dashboard and a follower wired to it, as the main window wires them.
struct FollowingDashboard {
  hh::gui::DashboardView view;
  hh::gui::RunFollower follower;
  FollowingDashboard() {
    view.resize(1200, 800);
    view.show();
    QObject::connect(&follower, &hh::gui::RunFollower::updated, &view, &hh::gui::DashboardView::applyUpdate);
  }
  void follow(const std::string& path) { follower.follow(QString::fromStdString(path)); }
};

}  // namespace

class TestDashboard : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void initTestCase() { setenv("HH_NUM_THREADS", "1", 0); }

  void showsAFinishedRunFile() {
    hh::test::TempDir dir("dashboard_file");
    r::RunHeader header;
    header.runId = "test";
    header.kind = "distill";
    header.configJson = R"({"steps": 30})";
    header.layout.scalars = {"loss", "val_loss", "lr"};
    header.layout.layers = 2;
    header.layout.heads = 3;
    header.layout.tables = {"kl"};
    header.layout.snapshots.pairs = {{1, 2}};
    header.layout.snapshots.tokens = {"a", "b", "c", "d"};
    const auto path = dir.file("run.h5");
    {
      auto w = r::RunWriter::create(path, header);
      for (int s = 1; s <= 30; ++s) w.appendScalars(s, {{"loss", 5.0 - 0.1 * s}, {"lr", 1e-3}});
      w.appendScalar(30, "val_loss", 2.5);
      w.appendTable(10, "kl", {9, 9, 9, 9, 9, 9});
      w.appendTable(30, "kl", {0.1, 0.2, 0.3, 0.4, 0.5, 0.6});  // the latest row is the one shown
      std::vector<float> softmax(16, 0.25f), linear(16, 0.0f);
      linear[5] = 1.0f;
      w.appendSnapshot(30, softmax, linear);
      w.setStatus(r::RunStatus::Completed, "done");
    }
    FollowingDashboard shown;
    auto& view = shown.view;
    shown.follow(path);
    QCOMPARE(view.lossPointCount(), 30);
    QCOMPARE(view.lastStep(), int64_t(30));
    QVERIFY(view.statusText().startsWith("completed"));
    QCOMPARE(view.lossPlot()->pointCount(0), 30);  // raw
    QCOMPARE(view.lossPlot()->pointCount(1), 30);  // smoothed
    QCOMPARE(view.lossPlot()->pointCount(2), 1);   // held-out
    QCOMPARE(view.headGrid()->layers(), 2);
    QCOMPARE(view.headGrid()->heads(), 3);
    QCOMPARE(view.headGrid()->summary(1, 2), 0.6);
    QCOMPARE(view.headGrid()->summary(0, 0), 0.1);
    // Lower KL is better: the best head (0, 0) gets the bright end of the map, the worst the dark.
    QVERIFY(view.headGrid()->summaryColor(0, 0).lightness() > view.headGrid()->summaryColor(1, 2).lightness());
    QCOMPARE(view.linearMap()->rows(), 4);
    QCOMPARE(double(view.linearMap()->valueAt(1, 1)), 1.0);
    QCOMPARE(double(view.softmaxMap()->valueAt(3, 0)), 0.25);
    QCOMPARE(view.mapsTitleText(), QStringLiteral("Layer 1, head 2 on the probe text, step 30"));
    // The next run of a conversion (finetuning) has no snapshots: the title names no step of the last.
    const auto next = dir.file("finetune.h5");
    {
      header.kind = "finetune";
      header.layout.tables.clear();
      header.layout.snapshots = {};
      auto w = r::RunWriter::create(next, header);
      w.appendScalar(1, "loss", 1.0);
      w.setStatus(r::RunStatus::Completed, "done");
    }
    shown.follow(next);
    QTRY_VERIFY2(!view.mapsTitleText().contains(QStringLiteral("step")), qPrintable(view.mapsTitleText()));
  }

  void nanLossAndCausalMapsAreDrawnAsSuch() {
    hh::test::TempDir dir("dashboard_nan");
    r::RunHeader header;
    header.runId = "nan";
    header.kind = "distill";
    header.configJson = R"({"steps": 6})";
    header.layout.scalars = {"loss"};
    header.layout.layers = 1;
    header.layout.heads = 1;
    header.layout.snapshots.pairs = {{0, 0}};
    header.layout.snapshots.tokens = {"a", "b", "c", "d"};
    const auto path = dir.file("run.h5");
    {
      auto w = r::RunWriter::create(path, header);
      for (int s = 1; s <= 6; ++s) w.appendScalar(s, "loss", s == 3 ? std::nan("") : 6.0 - s);
      // Causal maps, zeros above the diagonal: softmax rows 1 / (r + 1); linear's first row 0.9.
      std::vector<float> softmax(16, 0.0f), linear(16, 0.0f);
      for (int q = 0; q < 4; ++q)
        for (int k = 0; k <= q; ++k) softmax[size_t(q * 4 + k)] = linear[size_t(q * 4 + k)] = 1.0f / float(q + 1);
      linear[0] = 0.9f;
      w.appendSnapshot(6, softmax, linear);
      w.setStatus(r::RunStatus::Completed, "done");
    }
    FollowingDashboard shown;
    auto& view = shown.view;
    shown.follow(path);
    QCOMPARE(view.lossPointCount(), 6);
    const QVector<double> smooth = view.lossPlot()->seriesValues(1);
    QCOMPARE(smooth.size(), 6);
    for (int i = 0; i < 6; ++i)
      QVERIFY2(std::isfinite(smooth[i]), qPrintable(QStringLiteral("smoothed point %1").arg(i)));
    QCOMPARE(smooth[2], smooth[1]);                            // the NaN step keeps the average where it was
    QVERIFY(std::isnan(view.lossPlot()->seriesValues(0)[2]));  // the raw point is still there, as a gap
    QVERIFY(std::isnan(view.softmaxMap()->valueAt(0, 3)));
    QVERIFY(std::isnan(view.linearMap()->valueAt(1, 2)));
    QCOMPARE(double(view.softmaxMap()->valueAt(3, 3)), double(0.25f));
    // 20 weights, the largest 1.0 (softmax's first query): the 99th percentile is the next, 0.9.
    QCOMPARE(view.softmaxMap()->valueRange(), std::make_pair(0.0, double(0.9f)));
    QCOMPARE(view.linearMap()->valueRange(), view.softmaxMap()->valueRange());
  }

  // A finetuning on the teacher_kl loss: the held-out points are val_kl (the loss's own quantity),
  // not val_loss (the next-token loss, another number), and the legend says so.
  void aTeacherKlFinetuningHoldsOutItsOwnLoss() {
    hh::test::TempDir dir("dashboard_teacher_kl");
    r::RunHeader header;
    header.runId = "test";
    header.kind = "finetune";
    header.configJson = R"({"steps": 10, "loss": "teacher_kl"})";
    header.layout.scalars = {"loss", "val_loss", "perplexity", "val_kl"};
    const auto path = dir.file("run.h5");
    {
      auto w = r::RunWriter::create(path, header);
      w.appendScalars(0, {{"val_loss", 3.0}, {"perplexity", 20.0}, {"val_kl", 0.9}});
      for (int s = 1; s <= 10; ++s) w.appendScalar(s, "loss", 1.0 - 0.05 * s);
      w.appendScalars(10, {{"val_loss", 2.0}, {"perplexity", 7.4}, {"val_kl", 0.4}});
      w.setStatus(r::RunStatus::Completed, "done");
    }
    FollowingDashboard shown;
    auto& view = shown.view;
    shown.follow(path);
    QCOMPARE(view.lossPointCount(), 10);
    QCOMPARE(view.lossPlot()->seriesValues(2), (QVector<double>{0.9, 0.4}));
    QCOMPARE(view.lossPlot()->seriesName(0), QStringLiteral("KL to the teacher"));
    QCOMPARE(view.lossPlot()->seriesName(2), QStringLiteral("held-out KL to the teacher"));
    // Another run afterwards (no val_kl) is back to the held-out loss.
    const auto plain = dir.file("plain.h5");
    {
      header.layout.scalars = {"loss", "val_loss"};
      auto w = r::RunWriter::create(plain, header);
      w.appendScalar(1, "loss", 1.0);
      w.appendScalar(1, "val_loss", 1.5);
      w.setStatus(r::RunStatus::Completed, "done");
    }
    shown.follow(plain);
    QTRY_COMPARE(view.lossPlot()->seriesValues(2), (QVector<double>{1.5}));
    QCOMPARE(view.lossPlot()->seriesName(2), QStringLiteral("held-out loss"));
  }

  void offersOnlyTheTablesTheRunHas() {
    hh::test::TempDir dir("dashboard_tables");
    r::RunHeader header;
    header.runId = "train-test";
    header.kind = "train";
    header.configJson = "{}";
    header.layout.scalars = {"loss"};
    header.layout.layers = 2;
    header.layout.heads = 1;
    header.layout.tables = {"entropy"};
    const auto path = dir.file("train.h5");
    {
      auto w = r::RunWriter::create(path, header);
      w.appendScalars(1, {{"loss", 1.0}});
      w.appendTable(1, "entropy", {2.0, 1.5});
      w.setStatus(r::RunStatus::Completed, "done");
    }
    FollowingDashboard shown;
    auto& view = shown.view;
    QVERIFY(view.headGrid()->emptyText().startsWith("No run open"));
    shown.follow(path);
    QCOMPARE(view.tableChoice()->currentData().toString(), QString("entropy"));
    QCOMPARE(view.headGrid()->layers(), 2);
    QCOMPARE(view.headGrid()->summary(1, 0), 1.5);
    auto* model = qobject_cast<QStandardItemModel*>(view.tableChoice()->model());
    QVERIFY(model);
    QVERIFY(!model->item(view.tableChoice()->findData("kl"))->isEnabled());
    QVERIFY(model->item(view.tableChoice()->currentIndex())->isEnabled());
    view.monotonicityPlot()->replotNow();
    QVERIFY(view.monotonicityPlot()->emptyTextShown());

    header.layout.tables = {};
    const auto bare = dir.file("bare.h5");
    {
      auto w = r::RunWriter::create(bare, header);
      w.appendScalars(1, {{"loss", 1.0}});
    }
    shown.follow(bare);
    QCOMPARE(view.headGrid()->layers(), 0);
    QVERIFY2(view.headGrid()->emptyText().startsWith("No per-head tables in this run yet"),
             qPrintable(view.headGrid()->emptyText()));
    for (int i = 0; i < view.tableChoice()->count(); ++i) QVERIFY(model->item(i)->isEnabled());
  }

  void followsAConversionAndStaysResponsive() {
    hh::test::TempDir dir("dashboard_live");
    const auto project = writeProject(dir, 40, 10);
    hh::gui::MainWindow window;
    window.show();
    QSignalSpy finished(&window, &hh::gui::MainWindow::jobFinished);
    const int64_t residentBefore = hh::residentBytes();
    QCOMPARE(window.startConversion(QString::fromStdString(project)), QString());
    int64_t stepsSeen = 0;
    const double worstGapMs = hh::test::spinMeasuringLatency(180'000, [&] {
      stepsSeen = std::max(stepsSeen, window.dashboard()->lastStep());
      return finished.count() > 0;
    });
    QCOMPARE(finished.count(), 1);
    QCOMPARE(finished.at(0).at(0).toString(), QString("completed"));
    QVERIFY(QTest::qWaitFor([&] { return !window.jobRunning(); }, 10000));
    QTest::qWait(50);  // the runner's thread-finished handler returns the job's memory
    qInfo("resident %.0f MB before the conversion, %.0f MB at its peak, %.0f MB after it", residentBefore / 1048576.0,
          hh::peakResidentBytes() / 1048576.0, hh::residentBytes() / 1048576.0);
    qInfo("dashboard saw up to step %lld; longest event-loop gap %.1f ms", (long long)stepsSeen, worstGapMs);
    QVERIFY(stepsSeen >= 10);
    QVERIFY(worstGapMs < 100.0);
    auto run = r::RunReader::open(dir.file("run") + "/run.h5");
    QCOMPARE(std::string(r::statusName(run.status())), std::string("completed"));
    checkTheSummary(window, QString::fromStdString(dir.file("run") + "/run.h5"));
  }

  // A completed conversion ends on its summary: the quality before and after, every evaluated map,
  // the per-head KL of the converted model, and the stages' curves a click away.
  static void checkTheSummary(hh::gui::MainWindow& window, const QString& runFile) {
    QVERIFY(window.showingSummary());
    const auto* summary = window.conversionSummary();
    const auto& result = summary->result();
    qInfo("summary: %s | %s | %s", qPrintable(summary->headlineText()), qPrintable(summary->qualityText()),
          qPrintable(summary->headsText()));
    QCOMPARE(result.status, QString("completed"));
    QVERIFY(std::isfinite(result.qualityOriginal) && std::isfinite(result.qualityConverted));
    QVERIFY(summary->qualityText().contains(QString::number(result.qualityConverted, 'f', 2)));
    QVERIFY(std::isfinite(result.klUntrained) && std::isfinite(result.klDistilled));
    QCOMPARE(int(result.maps.size()), 2);  // hedgehog and trained, as the project asks
    QCOMPARE(summary->mapTable()->rowCount(), 3);  // and softmax itself
    QCOMPARE(summary->headMap()->rows(), result.layers);
    QCOMPARE(summary->headMap()->cols(), result.heads);
    QVERIFY(result.layers > 0 && int(result.bestHeads.size()) == std::min(3, result.layers * result.heads));
    QVERIFY(result.bestHeads.front().kl <= result.worstHeads.front().kl);
    QVERIFY(summary->inspectButton()->isEnabled());
    // The distillation's curves: the dashboard again, on the distill stage's run file.
    QTest::mouseClick(summary->distillCurvesButton(), Qt::LeftButton);
    QVERIFY(!window.showingSummary());
    QVERIFY(QTest::qWaitFor([&] { return window.dashboard()->lossPointCount() > 0; }, 10000));
    QVERIFY(window.dashboard()->path().endsWith("distill/run.h5"));
    // Opening the convert run file again (File > Open a run file) shows the summary.
    window.openRun(runFile);
    QVERIFY(window.showingSummary());
  }

  void cancelFromTheGuiStopsTheJob() {
    hh::test::TempDir dir("dashboard_cancel");
    const auto project = writeProject(dir, 100000, 10);
    hh::gui::MainWindow window;
    QSignalSpy finished(&window, &hh::gui::MainWindow::jobFinished);
    QCOMPARE(window.startConversion(QString::fromStdString(project)), QString());
    hh::test::spinMeasuringLatency(60'000, [&] { return window.dashboard()->lastStep() >= 5; });
    QVERIFY(window.dashboard()->lastStep() >= 5);
    QElapsedTimer clock;
    clock.start();
    window.cancelJob();
    hh::test::spinMeasuringLatency(10'000, [&] { return finished.count() > 0; });
    qInfo("cancel took %lld ms", (long long)clock.elapsed());
    QCOMPARE(finished.count(), 1);
    QCOMPARE(finished.at(0).at(0).toString(), QString("cancelled"));
    QVERIFY(clock.elapsed() < 2000);
    auto run = r::RunReader::open(dir.file("run") + "/run.h5");
    QCOMPARE(std::string(r::statusName(run.status())), std::string("cancelled"));
    // The bar says how the job ended, where, and no ETA is left on it.
    const QString bar = window.dashboard()->progressText();
    qInfo("progress bar after cancel: %s", qPrintable(bar));
    QVERIFY2(bar.startsWith("cancelled in ") && !bar.contains("ETA"), qPrintable(bar));
  }

  void refusesABadProjectFile() {
    hh::test::TempDir dir("dashboard_bad");
    const auto path = dir.file("bad.json");
    std::ofstream(path) << R"({"model": "x", "distill": {"steps": "many"}})";
    hh::gui::MainWindow window;
    const QString error = window.startConversion(QString::fromStdString(path));
    QVERIFY2(error.contains("steps"), qPrintable(error));
    QVERIFY(!window.jobRunner()->running());
    QVERIFY(window.startConversion(QString::fromStdString(dir.file("missing.json"))).contains("cannot open"));
  }
};

HH_TEST_SUITE(TestDashboard, "app.gui.dashboard", &TestDashboard::initTestCase, &TestDashboard::showsAFinishedRunFile,
              &TestDashboard::nanLossAndCausalMapsAreDrawnAsSuch,
              &TestDashboard::aTeacherKlFinetuningHoldsOutItsOwnLoss, &TestDashboard::offersOnlyTheTablesTheRunHas,
              &TestDashboard::followsAConversionAndStaysResponsive, &TestDashboard::cancelFromTheGuiStopsTheJob,
              &TestDashboard::refusesABadProjectFile)

}  // namespace test_dashboard

#if HH_HAVE_QTEST
#include "test_dashboard.moc"
#endif
