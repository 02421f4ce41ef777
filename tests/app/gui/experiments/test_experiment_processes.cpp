// app.gui.experiment_processes: an experiment's variants run several at a time from the workbench,
// each a process of the built CLI (`hedgehog experiment --only NAME --resume`), on the tiny
// distillation experiment (tests/engine/jobs/experiment_test_support.h) plus a third variant.
//   - three variants two at a time: two run at once and the third starts when one ends; the
//     signals follow one variant (its run file, its progress with its name); each variant's
//     output is in its experiment.log; childrenEnded lists all three, none failed, not cancelled,
//     and each variant's record says completed;
//   - a variant whose model folder does not exist fails in its process: childrenEnded names it
//     with the CLI's error (naming the folder), and the others complete;
//   - cancel while two long variants run: both stop within 10 s, childrenEnded says cancelled,
//     the third never starts, each record says cancelled;
//   - through the main window (startExperiment with parallel 2): the status bar's label counts
//     the running variants, Pause is enabled, the Experiments tab fills off screen as
//     variants end (those not ended yet as grey rows, running or waiting), and at the end it is
//     shown with all three completed;
//   - Run > Follow a running variant lists the running ones (the followed one checked) and moves
//     the dashboard to the one chosen; a cancel through the window ends the experiment as
//     "cancelled" and disables the menu;
//   - Run > Run an experiment asks how many at once: half the cores by default, at most the
//     variants to run, the last answer remembered; declining runs nothing; no question for one
//     variant to run or a file that does not parse (startExperiment reports that);
//   - Pause through the window: each running variant's log says "paused at step N", the status
//     label says paused, Resume lets them go on; Cancel then ends the experiment cancelled;
//   - a missing CLI is refused with a message naming it, and nothing starts.
// Skipped when the CLI is not built (HH_CLI_BINARY empty).
#include <QAction>
#include <QElapsedTimer>
#include <QFile>
#include <QInputDialog>
#include <QLabel>
#include <QMenu>
#include <QSettings>
#include <QSignalSpy>
#include <QTableWidget>
#include <QTest>
#include <QTimer>

#include <signal.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "app/gui/conversion/dashboard_view.h"
#include "app/gui/experiments/experiment_processes.h"
#include "app/gui/experiments/experiment_view.h"
#include "app/gui/shell/main_window.h"
#include "engine/config/config_file.h"
#include "engine/jobs/experiment_job.h"
#include "engine/runs/run_reader.h"
#include "tests/engine/jobs/experiment_test_support.h"
#include "tests/support/hh_test.h"
#include "tests/support/temp_dir.h"

namespace test_experiment_processes {

namespace {

using nlohmann::json;

// The tiny experiment with a third variant; steps = 0: until cancelled.
json threeVariants(const hh::test::TempDir& dir, int steps) {
  json e = hh::test::tinyExperiment(dir);
  e["variants"].push_back({{"name", "seed1"}, {"set", {{"seed", 1}}}});
  if (steps == 0) {
    e["base"]["steps"] = 100000;
    e["base"]["eval_every"] = 50;
    e["base"]["snapshot_every"] = 50;
  } else {
    e["base"]["steps"] = steps;
  }
  return e;
}

QString writeExperiment(const hh::test::TempDir& dir, const json& experiment) {
  const std::string path = dir.file("experiment.json");
  std::ofstream(path) << experiment.dump(2);
  return QString::fromStdString(path);
}

hh::jobs::ExperimentConfig parse(const QString& path) {
  return hh::jobs::parseConfigFile(path.toStdString(), "", hh::jobs::experimentConfigFromJson);
}

QString fileText(const std::string& path) {
  QFile file(QString::fromStdString(path));
  return file.open(QIODevice::ReadOnly) ? QString::fromUtf8(file.readAll()) : QString();
}

// The status a variant's record (variant.json) gives ("" without one).
std::string recordStatus(const hh::test::TempDir& dir, const std::string& variant) {
  std::ifstream in(dir.file("exp/" + variant + "/variant.json"));
  if (!in) return "";
  return json::parse(in).value("status", std::string());
}

// The status column of the Experiments tab's row named `name` ("" when absent).
QString statusOf(hh::gui::ExperimentView* view, const QString& name) {
  for (int r = 0; r < view->table()->rowCount(); ++r)
    if (view->table()->item(r, 0) && view->table()->item(r, 0)->text() == name)
      return view->table()->item(r, 1)->text();
  return {};
}

const QStringList kNames{"hedgehog", "t2r", "seed1"};

// Whether `runFile` holds a training step yet (false while it is being created).
bool hasSteps(const std::string& runFile) {
  try {
    return std::filesystem::exists(runFile) && !hh::runs::RunReader::open(runFile).scalars("loss").steps.empty();
  } catch (const std::exception&) {
    return false;
  }
}

// The pid of the CLI process running variant `name` of the experiment file `config` (0: none).
pid_t processWith(const std::string& config, const std::string& name) {
  const std::string wanted = std::string("--config") + '\0' + config + '\0' + "--only" + '\0' + name + '\0';
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string pid = entry.path().filename().string();
    if (pid.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in(entry.path() / "cmdline", std::ios::binary);
    const std::string cmdline((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (cmdline.find(wanted) != std::string::npos) return static_cast<pid_t>(std::stol(pid));
  }
  return 0;
}

using Failures = QMap<QString, QString>;
Failures failuresOf(const QSignalSpy& ended) {
  return ended.at(0).at(1).value<Failures>();
}
QString toText(const QList<int>& values) {
  QStringList text;
  for (int v : values) text << QString::number(v);
  return text.join(", ");
}

QString describe(const Failures& failures) {
  QStringList lines;
  for (auto it = failures.begin(); it != failures.end(); ++it) lines << it.key() + ": " + it.value();
  return lines.join("; ");
}

}  // namespace

class TestExperimentProcesses : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void initTestCase() {
    setenv("HH_NUM_THREADS", "1", 0);
    if (QString(HH_CLI_BINARY).isEmpty()) QSKIP("the CLI (hedgehog) is not built");
  }

  void runsTwoAtATimeAndReportsEveryVariant() {
    hh::test::TempDir dir("gui_experiment_processes");
    const QString path = writeExperiment(dir, threeVariants(dir, 12));
    hh::gui::ExperimentProcesses processes;
    processes.setBinary(HH_CLI_BINARY);
    QSignalSpy ended(&processes, &hh::gui::ExperimentProcesses::childrenEnded);
    QSignalSpy runFiles(&processes, &hh::gui::JobSignals::runFileStarted);
    int mostAtOnce = 0;
    QStringList phases;
    connect(&processes, &hh::gui::ExperimentProcesses::variantsChanged, this,
            [&] { mostAtOnce = std::max(mostAtOnce, static_cast<int>(processes.runningVariants().size())); });
    connect(&processes, &hh::gui::JobSignals::progress, this,
            [&](qint64, qint64, const QString& phase) { phases << phase; });
    QCOMPARE(processes.start(path, parse(path), kNames, 2), QString());
    QVERIFY(processes.running());
    QCOMPARE(processes.runningVariants(), QStringList({"hedgehog", "t2r"}));  // the third waits
    QCOMPARE(processes.followedVariant(), QString("hedgehog"));
    QVERIFY(processes.start(path, parse(path), kNames, 2).contains("already running"));
    QTRY_VERIFY_WITH_TIMEOUT(ended.count() == 1, 180000);
    QVERIFY(!processes.running());
    QCOMPARE(mostAtOnce, 2);
    auto ran = ended.at(0).at(0).toStringList();
    std::sort(ran.begin(), ran.end());
    QCOMPARE(ran, QStringList({"hedgehog", "seed1", "t2r"}));
    QVERIFY2(failuresOf(ended).isEmpty(), qPrintable(describe(failuresOf(ended))));
    QCOMPARE(ended.at(0).at(2).toBool(), false);
    for (const char* name : {"hedgehog", "t2r", "seed1"}) {
      QCOMPARE(recordStatus(dir, name), std::string("completed"));
      const QString log = fileText(dir.file(std::string("exp/") + name + "/experiment.log"));
      QVERIFY2(log.contains("run file:") && log.contains("completed"), qPrintable(log));
    }
    // The followed variant's run file first, then another's when it ended before the rest.
    QVERIFY(runFiles.count() >= 2);
    QVERIFY(runFiles.at(0).at(0).toString().endsWith("exp/hedgehog/run.h5"));
    QVERIFY(!phases.isEmpty());
    QVERIFY2(phases.first().startsWith("[1/3 hedgehog] "), qPrintable(phases.first()));
  }

  void aFailingVariantIsNamedWithItsError() {
    hh::test::TempDir dir("gui_experiment_processes_fail");
    json e = threeVariants(dir, 4);
    const std::string missing = dir.file("no-such-model");
    e["variants"][1]["set"]["model"] = missing;
    const QString path = writeExperiment(dir, e);
    hh::gui::ExperimentProcesses processes;
    processes.setBinary(HH_CLI_BINARY);
    QSignalSpy ended(&processes, &hh::gui::ExperimentProcesses::childrenEnded);
    QCOMPARE(processes.start(path, parse(path), kNames, 2), QString());
    QTRY_VERIFY_WITH_TIMEOUT(ended.count() == 1, 180000);
    const auto failures = failuresOf(ended);
    QVERIFY2(failures.keys() == QStringList({"t2r"}), qPrintable(describe(failures)));
    QVERIFY2(failures.value("t2r").contains("no-such-model"), qPrintable(failures.value("t2r")));
    QCOMPARE(recordStatus(dir, "hedgehog"), std::string("completed"));
    QCOMPARE(recordStatus(dir, "seed1"), std::string("completed"));
  }

  void cancelStopsEveryRunningVariant() {
    hh::test::TempDir dir("gui_experiment_processes_cancel");
    const QString path = writeExperiment(dir, threeVariants(dir, 0));
    hh::gui::ExperimentProcesses processes;
    processes.setBinary(HH_CLI_BINARY);
    QSignalSpy ended(&processes, &hh::gui::ExperimentProcesses::childrenEnded);
    qint64 step = 0;
    connect(&processes, &hh::gui::JobSignals::progress, this, [&](qint64 s) { step = s; });
    QCOMPARE(processes.start(path, parse(path), kNames, 2), QString());
    QTRY_VERIFY_WITH_TIMEOUT(step >= 2, 60000);
    // Both have started their jobs (each writes its run file before its first step).
    QTRY_VERIFY_WITH_TIMEOUT(QFile::exists(QString::fromStdString(dir.file("exp/t2r/run.h5"))), 60000);
    QElapsedTimer clock;
    clock.start();
    processes.cancel();
    QVERIFY(processes.cancelRequested());
    QTRY_VERIFY_WITH_TIMEOUT(ended.count() == 1, 30000);
    qInfo("both cancelled in %lld ms", static_cast<long long>(clock.elapsed()));
    QVERIFY(clock.elapsed() < 10000);
    QCOMPARE(ended.at(0).at(2).toBool(), true);
    QCOMPARE(ended.at(0).at(0).toStringList().size(), 2);  // seed1 never started
    QVERIFY(failuresOf(ended).isEmpty());                  // cancelled, not failed
    QCOMPARE(recordStatus(dir, "hedgehog"), std::string("cancelled"));
    QCOMPARE(recordStatus(dir, "t2r"), std::string("cancelled"));
    QVERIFY(!QFile::exists(QString::fromStdString(dir.file("exp/seed1"))));
  }

  void theMainWindowRunsThemAndShowsTheSummary() {
    hh::test::TempDir dir("gui_experiment_processes_window");
    const QString path = writeExperiment(dir, threeVariants(dir, 8));
    hh::gui::MainWindow window;
    window.show();
    window.experimentProcesses()->setBinary(HH_CLI_BINARY);
    QSignalSpy finished(&window, &hh::gui::MainWindow::jobFinished);
    // The Experiments tab's variants at each start or end while variants run (-1: the tab was
    // brought on screen, which it must not be before the end).
    QList<int> listed;
    bool everyVariantShown = true;  // once the tab has a summary: its runs and grey rows make three
    connect(window.experimentProcesses(), &hh::gui::ExperimentProcesses::variantsChanged, this, [&] {
      if (!window.experimentProcesses()->running()) return;
      auto* view = window.experiments();
      listed << (view->isVisible() ? -1 : view->variantCount());
      if (view->variantCount() > 0) everyVariantShown &= view->variantCount() + view->liveRowCount() == 3;
    });
    QCOMPARE(window.startExperiment(path, 2), QString());
    QVERIFY(window.jobRunning());
    QVERIFY(window.experimentProcesses()->running());
    auto* label = window.findChild<QLabel*>("processStatus");
    QVERIFY(label && label->isVisible());
    QCOMPARE(label->text(), QString("2 of 3 variants running, 0 ended"));
    QVERIFY2(label->toolTip().contains("hedgehog, t2r"), qPrintable(label->toolTip()));
    auto* pause = window.findChild<QAction*>("pauseJobAction");
    QVERIFY(pause && pause->isEnabled());
    QVERIFY(window.startExperiment(path, 2).contains("already running"));
    QTRY_VERIFY_WITH_TIMEOUT(finished.count() == 1, 180000);
    QCOMPARE(finished.at(0).at(0).toString(), QString("completed"));
    QVERIFY(!label->isVisible());
    // It filled as variants ended, off screen: nothing at the start, at least the first ended
    // variant once one had (two ending close together may be read at once), never shrinking.
    QVERIFY2(listed.size() >= 2 && listed.first() == 0 && *std::max_element(listed.begin(), listed.end()) >= 1 &&
                 std::is_sorted(listed.begin(), listed.end()),
             qPrintable(QStringLiteral("listed: %1").arg(toText(listed))));
    QVERIFY(everyVariantShown);
    QCOMPARE(window.experiments()->liveRowCount(), 0);
    auto* view = window.experiments();
    QVERIFY(view->isVisible());
    QCOMPARE(view->variantCount(), 3);
    for (const QString& name : kNames) QCOMPARE(statusOf(view, name), QString("completed"));
  }

  void aCancelThroughTheWindowEndsItCancelled() {
    hh::test::TempDir dir("gui_experiment_processes_window_cancel");
    const QString path = writeExperiment(dir, threeVariants(dir, 0));
    hh::gui::MainWindow window;
    window.show();
    window.experimentProcesses()->setBinary(HH_CLI_BINARY);
    QSignalSpy finished(&window, &hh::gui::MainWindow::jobFinished);
    QCOMPARE(window.startExperiment(path, 2), QString());
    QTRY_VERIFY_WITH_TIMEOUT(window.dashboard()->path().endsWith("exp/hedgehog/run.h5"), 60000);
    // Run > Follow a running variant: an entry per running variant, the followed one checked;
    // choosing t2r moves the dashboard to its run file.
    auto* menu = window.findChild<QMenu*>("followVariantMenu");
    QVERIFY(menu && menu->isEnabled());
    QTRY_VERIFY_WITH_TIMEOUT(QFile::exists(QString::fromStdString(dir.file("exp/t2r/run.h5"))), 60000);
    Q_EMIT menu->aboutToShow();
    QStringList entries;
    QAction* t2r = nullptr;
    for (QAction* action : menu->actions()) {
      entries << action->text() + (action->isChecked() ? "*" : "");
      if (action->text() == "t2r") t2r = action;
    }
    QCOMPARE(entries, QStringList({"hedgehog*", "t2r"}));
    t2r->trigger();
    QCOMPARE(window.experimentProcesses()->followedVariant(), QString("t2r"));
    QTRY_VERIFY_WITH_TIMEOUT(window.dashboard()->path().endsWith("exp/t2r/run.h5"), 10000);
    window.cancelJob();
    QTRY_VERIFY_WITH_TIMEOUT(finished.count() == 1, 30000);
    QCOMPARE(finished.at(0).at(0).toString(), QString("cancelled"));
    QVERIFY(!window.jobRunning());
    QVERIFY(!menu->isEnabled());
  }

  // Pause through the window: each running variant waits at its next step (its log says so), the
  // status label says paused, and the one waiting does not start when a running one is cancelled
  // meanwhile; Resume lets them go on and starts it. Then Cancel ends the experiment.
  void pauseHoldsTheVariantsThroughTheWindow() {
    hh::test::TempDir dir("gui_experiment_processes_pause");
    // Paused once both train, with no evaluation after the first: a pause that lands in one waits
    // in its cancel poll and logs "paused in ..." instead of the step gate's "paused at step N"
    // this test reads.
    json experiment = threeVariants(dir, 0);
    experiment["base"]["eval_every"] = 1000000;
    experiment["base"]["snapshot_every"] = 1000000;
    const QString path = writeExperiment(dir, experiment);
    hh::gui::MainWindow window;
    window.show();
    auto* processes = window.experimentProcesses();
    processes->setBinary(HH_CLI_BINARY);
    QSignalSpy finished(&window, &hh::gui::MainWindow::jobFinished);
    QCOMPARE(window.startExperiment(path, 2), QString());
    for (const char* name : {"exp/hedgehog/run.h5", "exp/t2r/run.h5"})
      QTRY_VERIFY_WITH_TIMEOUT(hasSteps(dir.file(name)), 60000);
    auto* pause = window.findChild<QAction*>("pauseJobAction");
    auto* label = window.findChild<QLabel*>("processStatus");
    pause->trigger();
    QVERIFY(processes->paused());
    QCOMPARE(pause->text(), QString("&Resume the job"));
    QCOMPARE(label->text(), QString("2 of 3 variants running, 0 ended, paused"));
    for (const char* name : {"exp/hedgehog/experiment.log", "exp/t2r/experiment.log"})
      QTRY_VERIFY_WITH_TIMEOUT(fileText(dir.file(name)).contains("paused at step"), 30000);
    // A slot frees while paused (t2r's process killed outright): the waiting variant stays waiting.
    const pid_t t2r = processWith(path.toStdString(), "t2r");
    QVERIFY(t2r > 0);
    ::kill(t2r, SIGKILL);
    QTRY_COMPARE_WITH_TIMEOUT(processes->runningVariants(), QStringList({"hedgehog"}), 30000);
    QTest::qWait(500);
    QCOMPARE(processes->runningVariants(), QStringList({"hedgehog"}));
    QVERIFY(!QFile::exists(QString::fromStdString(dir.file("exp/seed1"))));
    pause->trigger();
    QVERIFY(!processes->paused());
    QCOMPARE(pause->text(), QString("&Pause the job"));
    QCOMPARE(processes->runningVariants(), QStringList({"hedgehog", "seed1"}));
    QTRY_VERIFY_WITH_TIMEOUT(fileText(dir.file("exp/hedgehog/experiment.log")).contains("resumed at step"), 30000);
    window.cancelJob();
    QTRY_VERIFY_WITH_TIMEOUT(finished.count() == 1, 60000);
    QCOMPARE(finished.at(0).at(0).toString(), QString("cancelled"));
    QVERIFY(!pause->isEnabled());
  }

  void theWorkbenchAsksHowManyAtOnce() {
    hh::test::TempDir dir("gui_experiment_processes_ask");
    const QString path = writeExperiment(dir, threeVariants(dir, 4));
    QSettings().remove("experiments/parallel");
    hh::gui::MainWindow window;
    QString label;
    int value = 0, maximum = 0;
    // Answers the dialog once it is up: reads it, then sets `set` and accepts, or rejects (0).
    auto answer = [&](int set) {
      auto* poll = new QTimer(&window);
      connect(poll, &QTimer::timeout, &window, [&, poll, set] {
        auto* dialog = window.findChild<QInputDialog*>();
        if (!dialog || !dialog->isVisible()) return;
        poll->deleteLater();
        label = dialog->labelText();
        value = dialog->intValue();
        maximum = dialog->intMaximum();
        if (set == 0) return dialog->reject();
        dialog->setIntValue(set);
        dialog->accept();
      });
      poll->start(20);
    };
    answer(2);
    QCOMPARE(window.askParallel(path), 2);
    QVERIFY2(label.contains("experiment.json: 3 of its 3 variants to run"), qPrintable(label));
    QCOMPARE(value, hh::gui::ExperimentProcesses::defaultParallel(3));
    QCOMPARE(maximum, 3);  // no more processes than variants
    answer(0);
    QCOMPARE(window.askParallel(path), 0);  // declined: nothing runs
    QCOMPARE(value, 2);                     // the last answer is the default
    // One variant to run, or a file that does not parse: no question (one would wait here for ever).
    json one = threeVariants(dir, 4);
    one["variants"] = json::array({one["variants"][0]});
    QCOMPARE(window.askParallel(writeExperiment(dir, one)), 1);
    std::ofstream(dir.file("broken.json")) << "{";
    QCOMPARE(window.askParallel(QString::fromStdString(dir.file("broken.json"))), 1);
  }

  void aMissingCliIsRefused() {
    hh::test::TempDir dir("gui_experiment_processes_missing");
    const QString path = writeExperiment(dir, threeVariants(dir, 4));
    hh::gui::ExperimentProcesses processes;
    const QString missing = QString::fromStdString(dir.file("no-hedgehog"));
    processes.setBinary(missing);
    const QString error = processes.start(path, parse(path), kNames, 2);
    QVERIFY2(error.contains(missing), qPrintable(error));
    QVERIFY(!processes.running());
  }
};

HH_TEST_SUITE(TestExperimentProcesses, "app.gui.experiment_processes", &TestExperimentProcesses::initTestCase,
              &TestExperimentProcesses::runsTwoAtATimeAndReportsEveryVariant,
              &TestExperimentProcesses::aFailingVariantIsNamedWithItsError,
              &TestExperimentProcesses::cancelStopsEveryRunningVariant,
              &TestExperimentProcesses::theMainWindowRunsThemAndShowsTheSummary,
              &TestExperimentProcesses::aCancelThroughTheWindowEndsItCancelled,
              &TestExperimentProcesses::pauseHoldsTheVariantsThroughTheWindow,
              &TestExperimentProcesses::theWorkbenchAsksHowManyAtOnce, &TestExperimentProcesses::aMissingCliIsRefused)

}  // namespace test_experiment_processes

#if HH_HAVE_QTEST
#include "test_experiment_processes.moc"
#endif
