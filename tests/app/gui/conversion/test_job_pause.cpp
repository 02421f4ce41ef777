// app.gui.job_pause: pausing the workbench's job.
//   - the dashboard's Pause button pauses a running conversion (tiny GPT-2 fixture): the status
//     says paused, no step is reported for 1.2 s, and the process spends under 0.4 s of CPU in
//     that time (the job sleeps on a condition variable, it does not spin);
//   - Resume continues: steps advance past where the pause stopped them;
//   - another run opened while paused shows no Pause button and no "paused" status; the job's
//     own run file, opened again, shows Resume;
//   - the Run menu's pause action pauses again, and Cancel while paused ends the job within 2 s
//     as cancelled, with the run file saying cancelled; the distill stage's log says "paused",
//     "resumed", "paused", "cancelled while paused" (the step gate's lines, in-process too).
#include <QAction>
#include <QElapsedTimer>
#include <QPushButton>
#include <QSignalSpy>
#include <QTest>

#include <sys/resource.h>

#include <cstdlib>
#include <fstream>

#include "app/gui/conversion/dashboard_view.h"
#include "app/gui/conversion/job_runner.h"
#include "app/gui/shell/main_window.h"
#include "engine/jobs/convert_job.h"
#include "engine/runs/run_reader.h"
#include "engine/runs/run_writer.h"
#include "tests/engine/jobs/jobs_test_support.h"
#include "tests/support/hh_test.h"

namespace test_job_pause {

namespace {

namespace j = hh::jobs;
namespace r = hh::runs;

std::string writeProject(const hh::test::TempDir& dir) {
  j::ConvertConfig c = hh::test::tinyConvertConfig(dir);
  c.distill.steps = 100000;
  // No evaluation after the first: a pause that lands in one blocks in its cancel poll, without
  // the step gate's log lines this test reads.
  c.distill.evalEvery = 100000;
  c.distill.snapshotEvery = 100000;
  c.distill.patience = 0;  // never stops early: the job runs until cancelled
  c.finetune.steps = 0;
  c.evaluate.featureMaps = {"hedgehog"};
  return hh::test::writeProjectFile(dir, c);
}

double cpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + 1e-6 * double(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

}  // namespace

// Another run opened while the job is paused shows no Pause button and no "paused" status; the
// job's own run file, opened again, shows both (Resume).
void pauseStaysOnTheJobsRun(hh::gui::MainWindow& window, const hh::test::TempDir& dir) {
  auto* dashboard = window.dashboard();
  const QString jobRun = dashboard->path();
  QVERIFY(!jobRun.isEmpty());
  r::RunHeader header;
  header.runId = "other";
  header.kind = "distill";
  header.configJson = "{}";
  header.layout.scalars = {"loss"};
  const auto other = dir.file("other.h5");
  {
    auto w = r::RunWriter::create(other, header);
    w.appendScalars(1, {{"loss", 1.0}});
    w.setStatus(r::RunStatus::Completed, "done");
  }
  window.openRun(QString::fromStdString(other));
  QTRY_COMPARE(dashboard->path(), QString::fromStdString(other));
  QVERIFY(!dashboard->pauseButton()->isVisible());
  QVERIFY2(!dashboard->statusText().contains("paused"), qPrintable(dashboard->statusText()));
  window.openRun(jobRun);
  QTRY_COMPARE(dashboard->path(), jobRun);
  QVERIFY(dashboard->pauseButton()->isVisible());
  QCOMPARE(dashboard->pauseButton()->text(), QString("Resume"));
  QTRY_VERIFY2(dashboard->statusText().contains("paused"), qPrintable(dashboard->statusText()));
}

class TestJobPause : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void initTestCase() { setenv("HH_NUM_THREADS", "1", 0); }

  void pauseResumeAndCancelWhilePaused() {
    hh::test::TempDir dir("job_pause");
    hh::gui::MainWindow window;
    window.show();
    auto* runner = window.jobRunner();
    auto* dashboard = window.dashboard();
    qint64 step = 0;
    connect(runner, &hh::gui::JobRunner::progress, this, [&](qint64 s, qint64, const QString& phase) {
      if (phase.contains("distill")) step = s;  // "1/4 distill: distilling"
    });
    QSignalSpy finished(&window, &hh::gui::MainWindow::jobFinished);
    QCOMPARE(window.startConversion(QString::fromStdString(writeProject(dir))), QString());
    QVERIFY(dashboard->pauseButton()->isVisible());
    QTRY_VERIFY_WITH_TIMEOUT(step >= 3, 60000);

    const QString distillRun = dashboard->path();
    dashboard->pauseButton()->click();
    QVERIFY(runner->paused());
    QVERIFY2(dashboard->statusText().contains("paused"), qPrintable(dashboard->statusText()));
    QCOMPARE(dashboard->pauseButton()->text(), QString("Resume"));
    QTest::qWait(400);  // the step under way finishes, then the job blocks at its next check
    const qint64 stoppedAt = step;
    const double cpu0 = cpuSeconds();
    QTest::qWait(1200);
    const double cpu = cpuSeconds() - cpu0;
    qInfo("paused at step %lld; %.3f s of CPU in 1.2 s paused", (long long)stoppedAt, cpu);
    QCOMPARE(step, stoppedAt);
    QVERIFY(cpu < 0.4);
    QCOMPARE(finished.count(), 0);
    pauseStaysOnTheJobsRun(window, dir);

    dashboard->pauseButton()->click();
    QVERIFY(!runner->paused());
    QVERIFY(!dashboard->statusText().contains("paused"));
    QTRY_VERIFY_WITH_TIMEOUT(step >= stoppedAt + 2, 30000);

    QAction* pauseAction = window.findChild<QAction*>("pauseJobAction");
    QVERIFY(pauseAction && pauseAction->isEnabled());
    pauseAction->trigger();
    QVERIFY(runner->paused());
    QTest::qWait(300);
    QElapsedTimer clock;
    clock.start();
    window.cancelJob();
    QTRY_VERIFY_WITH_TIMEOUT(finished.count() > 0, 10000);
    qInfo("cancel while paused took %lld ms", (long long)clock.elapsed());
    QCOMPARE(finished.at(0).at(0).toString(), QString("cancelled"));
    QVERIFY(clock.elapsed() < 2000);
    QTRY_VERIFY(!dashboard->pauseButton()->isVisible());
    QVERIFY(!pauseAction->isEnabled());
    QVERIFY(!runner->paused());
    auto run = r::RunReader::open(dir.file("run") + "/run.h5");
    QCOMPARE(std::string(r::statusName(run.status())), std::string("cancelled"));
    // The distill stage's log tells both pauses: the first resumed, the second ended by the cancel.
    QStringList said;
    for (const auto& line : r::RunReader::open(distillRun.toStdString()).logLines()) {
      const QString text = QString::fromStdString(line.text);
      if (text.contains("paused") || text.contains("resumed"))
        said << text.section(" after", 0, 0).section(" at step", 0, 0);
    }
    QCOMPARE(said, QStringList({"paused", "resumed", "paused", "cancelled while paused"}));
  }
};

HH_TEST_SUITE(TestJobPause, "app.gui.job_pause", &TestJobPause::initTestCase, &TestJobPause::pauseResumeAndCancelWhilePaused)

}  // namespace test_job_pause

#if HH_HAVE_QTEST
#include "test_job_pause.moc"
#endif
