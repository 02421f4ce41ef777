// app.gui.run_experiment: Run > Run an experiment in the workbench (MainWindow::startExperiment).
//   - the tiny two-variant distillation experiment runs in the window: the dashboard follows a
//     variant's run file, the Experiments tab (not on screen) lists the first variant once the
//     second starts, with a grey row for the second (running), and at the end it is shown with the summary, both
//     variants completed; a run's row opens that run on the dashboard; run again from another tab, both are reused
//     (none to run) and the Experiments tab is shown again;
//   - Cancel while the first variant of a long experiment runs ends the job as cancelled within
//     5 s; the Experiments tab lists that variant as cancelled and not the one never started;
//   - a second start while one runs is refused, and so are a missing file and a malformed one,
//     each error naming the file.
#include <QElapsedTimer>
#include <QSignalSpy>
#include <QTableWidget>
#include <QTest>

#include <cstdlib>
#include <fstream>

#include "app/gui/conversion/dashboard_view.h"
#include "app/gui/conversion/job_runner.h"
#include "app/gui/experiments/experiment_view.h"
#include "app/gui/shell/main_window.h"
#include "tests/engine/jobs/experiment_test_support.h"
#include "tests/support/hh_test.h"
#include "tests/support/temp_dir.h"

namespace test_run_experiment {

namespace {

using nlohmann::json;

QString writeExperiment(const hh::test::TempDir& dir, const json& experiment) {
  const std::string path = dir.file("experiment.json");
  std::ofstream(path) << experiment.dump(2);
  return QString::fromStdString(path);
}

// The status column of the Experiments tab's row named `name` ("" when absent).
QString statusOf(hh::gui::ExperimentView* view, const QString& name) {
  for (int r = 0; r < view->table()->rowCount(); ++r)
    if (view->table()->item(r, 0) && view->table()->item(r, 0)->text() == name) return view->table()->item(r, 1)->text();
  return {};
}

}  // namespace

class TestRunExperiment : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void initTestCase() { setenv("HH_NUM_THREADS", "1", 0); }

  void runsAnExperimentAndShowsItsSummary() {
    hh::test::TempDir dir("gui_run_experiment");
    const QString path = writeExperiment(dir, hh::test::tinyExperiment(dir));
    hh::gui::MainWindow window;
    window.show();
    QSignalSpy finished(&window, &hh::gui::MainWindow::jobFinished);
    QSignalSpy runFiles(window.jobRunner(), &hh::gui::JobRunner::runFileStarted);
    // The Experiments tab's variants as each variant's run file starts (-1: the tab on screen).
    QList<int> listed;
    QStringList live;  // its grey rows then: the variants not in the summary yet, with their state
    connect(window.jobRunner(), &hh::gui::JobRunner::runFileStarted, this, [&] {
      auto* view = window.experiments();
      listed << (view->isVisible() ? -1 : view->variantCount());
      QStringList rows;
      for (int r = view->table()->rowCount() - view->liveRowCount(); r < view->table()->rowCount(); ++r)
        rows << view->table()->item(r, 0)->text() + " " + view->table()->item(r, 1)->text();
      live << rows.join(", ");
    });
    QCOMPARE(window.startExperiment(path), QString());
    QVERIFY(window.jobRunning());
    QVERIFY2(window.startExperiment(path).contains("already running"), "a second start is refused");
    QTRY_VERIFY_WITH_TIMEOUT(finished.count() == 1, 120000);
    QCOMPARE(finished.at(0).at(0).toString(), QString("completed"));
    QCOMPARE(runFiles.count(), 2);  // one run file per variant, each followed
    QVERIFY(runFiles.at(1).at(0).toString().endsWith("exp/t2r/run.h5"));
    // Filled off screen as the first variant ended (by the time the queued signal is handled, the
    // second may have ended too).
    QVERIFY(listed.size() == 2 && listed[0] == 0 && listed[1] >= 1);
    if (listed[1] == 1) QCOMPARE(live[1], QString("t2r running"));  // hedgehog listed, t2r running
    QCOMPARE(window.experiments()->liveRowCount(), 0);              // at the end: the summary says how each ended
    auto* view = window.experiments();
    QVERIFY(view->isVisible());  // the Experiments tab is the one shown
    QCOMPARE(view->variantCount(), 2);
    QCOMPARE(statusOf(view, "hedgehog"), QString("completed"));
    QCOMPARE(statusOf(view, "t2r"), QString("completed"));
    // Its row opens t2r's run on the dashboard.
    for (int r = 0; r < view->table()->rowCount(); ++r)
      if (view->table()->item(r, 0)->text() == "t2r") Q_EMIT view->table()->cellDoubleClicked(r, 0);
    QTRY_VERIFY(window.dashboard()->path().endsWith("exp/t2r/run.h5"));
    QVERIFY(window.dashboard()->isVisible());

    // Again, from another tab: nothing to run, both reused; the summary is shown again.
    window.showInspector();
    QVERIFY(!view->isVisible());
    QCOMPARE(window.startExperiment(path), QString());
    QTRY_VERIFY_WITH_TIMEOUT(finished.count() == 2, 30000);
    QCOMPARE(finished.at(1).at(0).toString(), QString("completed"));
    QCOMPARE(runFiles.count(), 2);  // no variant ran
    QVERIFY(view->isVisible());
    QCOMPARE(view->variantCount(), 2);
  }

  void cancelStopsTheRunningVariant() {
    hh::test::TempDir dir("gui_cancel_experiment");
    json e = hh::test::tinyExperiment(dir);
    e["base"]["steps"] = 100000;  // runs until cancelled
    const QString path = writeExperiment(dir, e);
    hh::gui::MainWindow window;
    window.show();
    QSignalSpy finished(&window, &hh::gui::MainWindow::jobFinished);
    qint64 step = 0;
    connect(window.jobRunner(), &hh::gui::JobRunner::progress, this, [&](qint64 s, qint64, const QString&) { step = s; });
    QCOMPARE(window.startExperiment(path), QString());
    QTRY_VERIFY_WITH_TIMEOUT(step >= 2, 60000);
    QVERIFY(!window.dashboard()->path().isEmpty());  // the dashboard follows the variant
    QElapsedTimer clock;
    clock.start();
    window.cancelJob();
    QTRY_VERIFY_WITH_TIMEOUT(finished.count() == 1, 10000);
    qInfo("cancelled in %lld ms", (long long)clock.elapsed());
    QVERIFY(clock.elapsed() < 5000);
    QCOMPARE(finished.at(0).at(0).toString(), QString("cancelled"));
    auto* view = window.experiments();
    QVERIFY(view->isVisible());
    QCOMPARE(view->variantCount(), 1);  // t2r never started: not listed
    QCOMPARE(statusOf(view, "hedgehog"), QString("cancelled"));
  }

  void badFilesAreRefusedNamingThem() {
    hh::test::TempDir dir("gui_bad_experiment");
    hh::gui::MainWindow window;
    const QString missing = QString::fromStdString(dir.file("nowhere.json"));
    QVERIFY2(window.startExperiment(missing).contains(missing), qPrintable(window.startExperiment(missing)));
    const QString broken = QString::fromStdString(dir.file("broken.json"));
    std::ofstream(broken.toStdString()) << "{\"name\": \"x\", \"job\": ";
    QVERIFY2(window.startExperiment(broken).contains(broken), qPrintable(window.startExperiment(broken)));
    json e = hh::test::tinyExperiment(dir);
    e["variants"][1]["set"]["stepz"] = 3;
    const QString typo = writeExperiment(dir, e);
    const QString error = window.startExperiment(typo);
    QVERIFY2(error.contains(typo) && error.contains("variant \"t2r\"") && error.contains("stepz"), qPrintable(error));
    QVERIFY(!window.jobRunning());
  }
};

HH_TEST_SUITE(TestRunExperiment, "app.gui.run_experiment", &TestRunExperiment::initTestCase,
              &TestRunExperiment::runsAnExperimentAndShowsItsSummary, &TestRunExperiment::cancelStopsTheRunningVariant,
              &TestRunExperiment::badFilesAreRefusedNamingThem)

}  // namespace test_run_experiment

#if HH_HAVE_QTEST
#include "test_run_experiment.moc"
#endif
