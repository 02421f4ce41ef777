// app.gui.process_job_runner: conversions on several local processes, run through the built CLI
// (`hedgehog convert --config <run_dir>/project.json --nproc 2`) on the tiny GPT-2 fixture.
//   - a short conversion on 2 processes: the project file is written under the run folder, the
//     distill run file is announced (absolute), progress is parsed from the CLI's lines, the job
//     ends "completed" with the convert run file and the exported model, the distill run file's
//     header says "2 processes", and rank 1 logged to run/rank-1.log; an output folder outside
//     the run folder (which the CLI refuses in a file) goes to --output and is exported to;
//   - cancel after the first run file appears: SIGTERM to the launcher ends every rank, the job
//     ends "cancelled" within 60 s and the distill run file says cancelled;
//   - through the main window: a conversion started with processes = 2 is followed on the
//     dashboard (the distill run file, its steps), the status bar says "Converting on 2
//     processes", a second start is refused; Pause (the menu's) makes the ranks wait (rank 0's
//     "paused at step N", no step while paused), the dashboard's Resume lets them go on, and
//     Cancel ends it as cancelled;
//   - a missing CLI is refused with a message naming it; the New conversion form offers 1 to the
//     machine's cores processes, default 1;
//   - with a stand-in launcher (a script): the first cancel never kills it (rank 0 may be saving),
//     a second cancel sends a second SIGTERM, and a launcher that ignores it is killed.
// Skipped when the CLI is not built (HH_CLI_BINARY empty).
#include <QAction>
#include <QElapsedTimer>
#include <QFile>
#include <QFileInfo>
#include <QLabel>
#include <QPushButton>
#include <QRegularExpression>
#include <QSignalSpy>
#include <QSpinBox>
#include <QTest>
#include <QThread>

#include <cstdlib>
#include <fstream>

#include "app/gui/conversion/config_form.h"
#include "app/gui/conversion/dashboard_view.h"
#include "app/gui/conversion/job_runner.h"
#include "app/gui/shell/main_window.h"
#include "app/gui/conversion/process_job_runner.h"
#include "engine/jobs/convert_job.h"
#include "engine/runs/run_reader.h"
#include "tests/engine/jobs/jobs_test_support.h"
#include "tests/support/hh_test.h"

namespace test_process_job_runner {

namespace {

namespace j = hh::jobs;
namespace r = hh::runs;

// The tiny conversion; distillSteps 0 = until cancelled.
j::ConvertConfig tinyConfig(const hh::test::TempDir& dir, int64_t distillSteps) {
  j::ConvertConfig c = hh::test::tinyConvertConfig(dir);
  c.distill.steps = distillSteps > 0 ? distillSteps : 100000;
  c.distill.evalEvery = distillSteps > 0 ? 3 : 50;
  c.distill.snapshotEvery = distillSteps > 0 ? 3 : 50;
  c.distill.patience = 0;  // never stops early
  c.finetune.steps = 2;
  c.finetune.evalEvery = 2;
  c.evaluate.featureMaps = {"hedgehog"};
  c.evaluate.tableSequences = 4;
  return c;
}

QString path(const std::string& p) { return QString::fromStdString(p); }

// An executable shell script at `file`, standing in for the CLI's launcher.
QString writeScript(const std::string& file, const std::string& body) {
  std::ofstream(file) << "#!/bin/sh\n" << body;
  QFile::setPermissions(path(file), QFile::ReadOwner | QFile::WriteOwner | QFile::ExeOwner);
  return path(file);
}

}  // namespace

class TestProcessJobRunner : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void initTestCase() {
    setenv("HH_NUM_THREADS", "1", 0);
    if (QString(HH_CLI_BINARY).isEmpty()) QSKIP("the CLI (hedgehog) is not built");
  }

  void completesOnTwoProcesses() {
    hh::test::TempDir dir("process_runner_done"), elsewhere("process_runner_output");
    j::ConvertConfig config = tinyConfig(dir, 6);
    config.outputDir = elsewhere.file("converted");
    hh::gui::ProcessJobRunner runner;
    runner.setBinary(HH_CLI_BINARY);
    QSignalSpy started(&runner, &hh::gui::ProcessJobRunner::runFileStarted);
    QSignalSpy progress(&runner, &hh::gui::ProcessJobRunner::progress);
    QSignalSpy logs(&runner, &hh::gui::ProcessJobRunner::logLine);
    QSignalSpy finished(&runner, &hh::gui::ProcessJobRunner::finished);
    QSignalSpy runningChanged(&runner, &hh::gui::ProcessJobRunner::runningChanged);
    QCOMPARE(runner.startConvert(config, 2), QString());
    QVERIFY(runner.running());
    QCOMPARE(runner.processes(), 2);
    QCOMPARE(runner.projectFile(), path(dir.file("run") + "/project.json"));
    QVERIFY(QFileInfo::exists(runner.projectFile()));
    QVERIFY(!runner.startConvert(tinyConfig(dir, 6), 2).isEmpty());  // one job at a time
    QTRY_VERIFY_WITH_TIMEOUT(finished.count() > 0, 240000);

    const QString distill = path(dir.file("run") + "/distill/run.h5");
    QStringList files;
    for (const auto& s : started) files << s.at(0).toString();
    qInfo("run files: %s", qPrintable(files.join(", ")));
    QVERIFY(files.contains(distill));
    QVERIFY(files.contains(path(dir.file("run") + "/finetune/run.h5")));
    QVERIFY2(!files.contains(path(dir.file("run") + "/run.h5")), "the summary's run file is the result, not a stage");
    bool distillDone = false;
    for (const auto& p : progress) {
      const QString phase = p.at(2).toString();
      if (phase.contains("distill") && p.at(0).toLongLong() == 6 && p.at(1).toLongLong() == 6) distillDone = true;
    }
    QVERIFY2(distillDone, "no progress line for distill step 6/6");
    bool launched = false;
    for (const auto& l : logs) launched = launched || l.at(0).toString().startsWith("started 2 processes");
    QVERIFY(launched);

    QCOMPARE(finished.count(), 1);
    QCOMPARE(finished.at(0).at(0).toString(), QString("completed"));
    qInfo("message: %s", qPrintable(finished.at(0).at(1).toString()));
    QVERIFY(finished.at(0).at(1).toString().contains("KL"));
    QCOMPARE(finished.at(0).at(2).toString(), path(dir.file("run") + "/run.h5"));
    QCOMPARE(finished.at(0).at(3).toString(), path(config.outputDir));
    QVERIFY(QFileInfo::exists(path(config.outputDir + "/config.json")));
    QVERIFY(!runner.running());
    QCOMPARE(runningChanged.count(), 2);
    QCOMPARE(runningChanged.at(1).at(0).toBool(), false);

    auto run = r::RunReader::open(distill.toStdString());
    qInfo("distill device: %s", run.header().device.c_str());
    QVERIFY2(run.header().device.find("2 processes") != std::string::npos, run.header().device.c_str());
    QCOMPARE(std::string(r::statusName(run.status())), std::string("completed"));
    QVERIFY(QFileInfo::exists(path(dir.file("run") + "/rank-1.log")));
  }

  void cancelStopsEveryRank() {
    hh::test::TempDir dir("process_runner_cancel");
    hh::gui::ProcessJobRunner runner;
    runner.setBinary(HH_CLI_BINARY);
    QSignalSpy started(&runner, &hh::gui::ProcessJobRunner::runFileStarted);
    QSignalSpy finished(&runner, &hh::gui::ProcessJobRunner::finished);
    QCOMPARE(runner.startConvert(tinyConfig(dir, 0), 2), QString());
    QTRY_VERIFY_WITH_TIMEOUT(started.count() > 0, 60000);
    QElapsedTimer clock;
    clock.start();
    runner.cancel();
    QVERIFY(runner.cancelRequested());
    QTRY_VERIFY_WITH_TIMEOUT(finished.count() > 0, 60000);
    qInfo("cancel took %lld ms: %s", (long long)clock.elapsed(), qPrintable(finished.at(0).at(1).toString()));
    QCOMPARE(finished.at(0).at(0).toString(), QString("cancelled"));
    const QString message = finished.at(0).at(1).toString();  // the CLI's own words, its prefix off
    QVERIFY2(!message.isEmpty() && !message.startsWith("hedgehog:"), qPrintable(message));
    QVERIFY(clock.elapsed() < 60000);
    QVERIFY(!runner.running());
    auto run = r::RunReader::open(dir.file("run") + "/distill/run.h5");
    QCOMPARE(std::string(r::statusName(run.status())), std::string("cancelled"));
  }

  void mainWindowFollowsAMultiProcessRun() {
    hh::test::TempDir dir("process_runner_window");
    const auto project = hh::test::writeProjectFile(dir, tinyConfig(dir, 0));
    QStringList lines;  // the runner's log lines; outlives the window, whose end may add some
    hh::gui::MainWindow window;
    window.show();
    window.processJobRunner()->setBinary(HH_CLI_BINARY);
    QSignalSpy finished(&window, &hh::gui::MainWindow::jobFinished);
    QCOMPARE(window.startConversion(path(project), 2), QString());
    QVERIFY(window.jobRunning());
    QVERIFY(!window.jobRunner()->running());  // not in this process
    QCOMPARE(window.startConversion(path(project), 2), QString("a job is already running"));
    QCOMPARE(window.startConversion(path(project), 1), QString("a job is already running"));
    auto* status = window.findChild<QLabel*>("processStatus");
    QVERIFY(status && status->isVisible());
    QCOMPARE(status->text(), QString("Converting on 2 processes"));
    QAction* pause = window.findChild<QAction*>("pauseJobAction");
    QVERIFY(pause && pause->isEnabled());
    QVERIFY(window.dashboard()->pauseButton()->isVisible());

    const QString distill = path(dir.file("run") + "/distill/run.h5");
    QTRY_VERIFY_WITH_TIMEOUT(window.dashboard()->path() == distill && window.dashboard()->lastStep() >= 3, 90000);
    qInfo("dashboard follows %s at step %lld", qPrintable(window.dashboard()->path()),
          (long long)window.dashboard()->lastStep());
    // Pause: every rank waits at its next step (rank 0's log line comes through the launcher);
    // the dashboard's button resumes them.
    connect(window.processJobRunner(), &hh::gui::JobSignals::logLine, this, [&](const QString& l) { lines << l; });
    pause->trigger();
    QCOMPARE(pause->text(), QString("&Resume the job"));
    QCOMPARE(window.dashboard()->pauseButton()->text(), QString("Resume"));
    QTRY_VERIFY_WITH_TIMEOUT(!lines.filter(QRegularExpression("^paused at step [0-9]+$")).isEmpty(), 30000);
    const qint64 pausedStep = lines.filter(QRegularExpression("^paused at step")).first().section(' ', 3).toLongLong();
    // The run file is flushed as the job begins to wait: the dashboard reaches that step, no further.
    QTRY_COMPARE_WITH_TIMEOUT(window.dashboard()->lastStep(), pausedStep, 10000);
    QTest::qWait(1500);
    QCOMPARE(window.dashboard()->lastStep(), pausedStep);
    window.dashboard()->pauseButton()->click();
    QCOMPARE(pause->text(), QString("&Pause the job"));
    QTRY_VERIFY_WITH_TIMEOUT(!lines.filter(QRegularExpression("^resumed at step [0-9]+ after")).isEmpty(), 30000);
    window.cancelJob();
    QTRY_VERIFY_WITH_TIMEOUT(finished.count() > 0, 60000);
    QCOMPARE(finished.at(0).at(0).toString(), QString("cancelled"));
    QVERIFY(!window.jobRunning());
    QVERIFY(!status->isVisible());
    QVERIFY(!pause->isEnabled());
    QTRY_VERIFY_WITH_TIMEOUT(window.dashboard()->statusText().startsWith("cancelled"), 10000);
  }

  // The first cancel leaves the launcher to end on its own however long rank 0's save takes (the
  // kill it got 30 s later cut the save short); a second cancel is the user's force-stop.
  void onlyASecondCancelForceStops() {
    hh::test::TempDir dir("process_runner_force");
    hh::gui::ProcessJobRunner runner;
    runner.setKillAfterMs(200);
    // Ends (130) on the second SIGTERM only, as the launcher does once it has passed on two.
    runner.setBinary(writeScript(
        dir.file("launcher.sh"),
        "n=0\ntrap 'n=$((n+1)); [ $n -ge 2 ] && { echo \"hedgehog: cancelled: forced\" >&2; exit 130; }' TERM\n"
        "echo ready\nwhile :; do sleep 0.05; done\n"));
    QSignalSpy finished(&runner, &hh::gui::ProcessJobRunner::finished);
    QSignalSpy said(&runner, &hh::gui::ProcessJobRunner::logLine);
    QCOMPARE(runner.startConvert(tinyConfig(dir, 6), 2), QString());
    QTRY_VERIFY_WITH_TIMEOUT(said.count() > 0, 10000);  // its trap is set
    runner.cancel();
    QTest::qWait(1000);  // five times the kill delay
    QVERIFY(runner.running());
    QCOMPARE(finished.count(), 0);
    runner.cancel();
    QTRY_VERIFY_WITH_TIMEOUT(finished.count() > 0, 10000);
    QCOMPARE(finished.at(0).at(0).toString(), QString("cancelled"));
    QCOMPARE(finished.at(0).at(1).toString(), QString("forced"));

    // A launcher that ignores SIGTERM altogether: killed after the second cancel.
    hh::gui::ProcessJobRunner deaf;
    deaf.setKillAfterMs(200);
    deaf.setBinary(writeScript(dir.file("deaf.sh"), "trap '' TERM\necho ready\nwhile :; do sleep 0.05; done\n"));
    QSignalSpy ended(&deaf, &hh::gui::ProcessJobRunner::finished);
    QSignalSpy deafSaid(&deaf, &hh::gui::ProcessJobRunner::logLine);
    QCOMPARE(deaf.startConvert(tinyConfig(dir, 6), 2), QString());
    QTRY_VERIFY_WITH_TIMEOUT(deafSaid.count() > 0, 10000);
    deaf.cancel();
    QTest::qWait(600);
    QVERIFY(deaf.running());
    deaf.cancel();
    QTRY_VERIFY_WITH_TIMEOUT(ended.count() > 0, 10000);
    QCOMPARE(ended.at(0).at(0).toString(), QString("cancelled"));
    QVERIFY2(ended.at(0).at(1).toString().startsWith("killed: still running"),
             qPrintable(ended.at(0).at(1).toString()));
  }

  void refusesAMissingCliAndOffersProcesses() {
    hh::test::TempDir dir("process_runner_missing");
    hh::gui::ProcessJobRunner runner;
    runner.setBinary(path(dir.file("no-such-hedgehog")));
    const QString error = runner.startConvert(tinyConfig(dir, 6), 2);
    QVERIFY2(error.contains(runner.binary()) && error.contains("missing"), qPrintable(error));
    QVERIFY(!runner.running());

    hh::gui::ConversionDialog dialog(tinyConfig(dir, 6));
    QSpinBox* box = dialog.processesBox();
    QCOMPARE(box->minimum(), 1);
    QCOMPARE(box->maximum(), std::max(1, QThread::idealThreadCount()));
    QCOMPARE(dialog.processes(), 1);
    QVERIFY(box->toolTip().contains("rank-K.log"));
    box->setValue(box->maximum());
    QCOMPARE(dialog.processes(), box->maximum());
  }
};

HH_TEST_SUITE(TestProcessJobRunner, "app.gui.process_job_runner", &TestProcessJobRunner::initTestCase,
              &TestProcessJobRunner::completesOnTwoProcesses, &TestProcessJobRunner::cancelStopsEveryRank,
              &TestProcessJobRunner::mainWindowFollowsAMultiProcessRun,
              &TestProcessJobRunner::onlyASecondCancelForceStops,
              &TestProcessJobRunner::refusesAMissingCliAndOffersProcesses)

}  // namespace test_process_job_runner

#if HH_HAVE_QTEST
#include "test_process_job_runner.moc"
#endif
