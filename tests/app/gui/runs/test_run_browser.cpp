// app.gui.run_browser: the run files under a folder, found recursively, each with its kind,
// status, model, feature map, last step and last metric values; a file that is not a run file is
// listed as unreadable with the reason (never a crash); double-clicking a row asks for that run.
#include <QDir>
#include <QSignalSpy>
#include <QTableWidget>
#include <QTest>

#include <filesystem>
#include <fstream>
#include <map>

#include "app/gui/runs/run_browser.h"
#include "app/gui/runs/run_overlay.h"
#include "app/gui/runs/run_table_csv.h"
#include "engine/runs/run_writer.h"
#include "tests/support/hh_test.h"
#include "tests/support/temp_dir.h"

namespace test_run_browser {

namespace {

namespace r = hh::runs;

// loss at steps first..20, kl_mean at 10 (when first <= 10) and at 20 (lastKl).
void writeRun(const std::string& path, const std::string& kind, r::RunStatus status, double lastKl,
              const std::string& config = R"({"model": "teacher-dir", "feature_map": "hedgehog", "steps": 20})",
              int first = 1) {
  r::RunHeader header;
  header.runId = kind;
  header.kind = kind;
  header.configJson = config;
  header.layout.scalars = {"loss", "kl_mean"};
  auto w = r::RunWriter::create(path, header);
  for (int s = first; s <= 20; ++s) w.appendScalar(s, "loss", 1.0 / s);
  if (first <= 10) w.appendScalar(10, "kl_mean", 0.5);
  w.appendScalar(20, "kl_mean", lastKl);
  if (status != r::RunStatus::Running) w.setStatus(status, "end");
  w.flush();  // a running run's rows reach the file at its flushes, as they do while a job writes
}

}  // namespace

class TestRunBrowser : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void scansAFolderOfRuns() {
    hh::test::TempDir dir("run_browser");
    std::filesystem::create_directories(dir.file("a/distill"));
    writeRun(dir.file("a/distill/run.h5"), "distill", r::RunStatus::Completed, 0.02);
    writeRun(dir.file("b.h5"), "train", r::RunStatus::Cancelled, 0.3);
    std::ofstream(dir.file("not-a-run.h5")) << "hello";
    const auto runs = hh::gui::scanRuns(QString::fromStdString(dir.path()));
    QCOMPARE(runs.size(), size_t(3));
    int completed = 0, cancelled = 0, unreadable = 0;
    for (const auto& s : runs) {
      if (s.status == "completed") {
        ++completed;
        QCOMPARE(s.kind, QString("distill"));
        QCOMPARE(s.model, QString("teacher-dir"));
        QCOMPARE(s.featureMap, QString("hedgehog"));
        QCOMPARE(s.lastStep, qint64(20));
        QCOMPARE(s.finals.at("kl_mean"), 0.02);
      } else if (s.status == "cancelled") {
        ++cancelled;
      } else if (s.status == "unreadable") {
        ++unreadable;
        QVERIFY(!s.error.isEmpty());
      }
    }
    QCOMPARE(completed + cancelled + unreadable, 3);
    QCOMPARE(unreadable, 1);

    hh::gui::RunBrowser browser;
    QSignalSpy scanned(&browser, &hh::gui::RunBrowser::scanned);
    QSignalSpy activated(&browser, &hh::gui::RunBrowser::runActivated);
    browser.setFolder(QString::fromStdString(dir.path()));
    QVERIFY(scanned.wait(10000));
    QCOMPARE(browser.rowCount(), 3);
    int row = -1;
    for (int i = 0; i < browser.rowCount(); ++i)
      if (browser.table()->item(i, 0)->text() == "a/distill/run.h5") row = i;
    QVERIFY(row >= 0);
    Q_EMIT browser.table()->cellDoubleClicked(row, 2);
    QCOMPARE(activated.count(), 1);
    QVERIFY(activated.at(0).at(0).toString().endsWith("a/distill/run.h5"));
  }

  // A job killed and resumed leaves run.h5 interrupted beside its continuation: the browser lists
  // the two as one run, named by run.h5, with the continuation's status, and "interrupted" only
  // for a run nothing took over; the overlay and the traces export draw it as one curve, run.h5's
  // rows up to the step its continuation resumed from and the continuation's after.
  void aResumedRunIsOneRow() {
    hh::test::TempDir dir("run_browser_resumed");
    std::filesystem::create_directories(dir.file("resumed"));
    std::filesystem::create_directories(dir.file("lost"));
    writeRun(dir.file("resumed/run.h5"), "distill", r::RunStatus::Running, 0.1);
    writeRun(dir.file("resumed/run-resumed-10.h5"), "distill", r::RunStatus::Completed, 0.05,
             R"({"model": "teacher-dir", "feature_map": "hedgehog", "steps": 20})", /*first=*/11);
    writeRun(dir.file("lost/run.h5"), "distill", r::RunStatus::Running, 0.1);
    std::map<QString, hh::gui::RunSummary> runs;
    for (const auto& s : hh::gui::scanRuns(QString::fromStdString(dir.path())))
      runs[QDir(QString::fromStdString(dir.path())).relativeFilePath(s.path)] = s;
    QCOMPARE(runs.size(), size_t(2));
    const auto& resumed = runs.at("resumed/run.h5");
    QCOMPARE(resumed.status, QString("completed"));
    QCOMPARE(resumed.chain.size(), 2);
    QVERIFY(resumed.chain.back().endsWith("resumed/run-resumed-10.h5"));
    QCOMPARE(resumed.finals.at("kl_mean"), 0.05);  // the continuation's last value
    QCOMPARE(resumed.lastStep, qint64(20));
    QCOMPARE(runs.at("lost/run.h5").status, QString("interrupted"));
    QCOMPARE(runs.at("lost/run.h5").chain.size(), 1);

    // One curve: run.h5 (killed at step 20 after its checkpoint at 10) up to step 10, then the
    // continuation's steps 11-20: kl_mean 0.5 at 10 from run.h5, 0.05 at 20 from the continuation
    // (run.h5's 0.1 at 20 was redone).
    const auto curves = hh::gui::readRunCurves(QString::fromStdString(dir.file("resumed/run.h5")), "a");
    QVERIFY2(curves.error.isEmpty(), qPrintable(curves.error));
    QCOMPARE(curves.curves.at("loss").steps.size(), 20);
    QCOMPARE(curves.curves.at("kl_mean").steps, (QVector<double>{10.0, 20.0}));
    QCOMPARE(curves.curves.at("kl_mean").values, (QVector<double>{0.5, 0.05}));
    const auto traces = hh::gui::readRunTraces(QString::fromStdString(dir.file("resumed/run.h5")), "a");
    QCOMPARE(traces.series.at("kl_mean"), (std::map<int64_t, double>{{10, 0.5}, {20, 0.05}}));
    const auto lost = hh::gui::readRunCurves(QString::fromStdString(dir.file("lost/run.h5")), "b");
    QCOMPARE(lost.curves.at("loss").steps.back(), 20.0);
    QCOMPARE(lost.curves.at("kl_mean").values.back(), 0.1);

    hh::gui::RunBrowser browser;
    QSignalSpy scanned(&browser, &hh::gui::RunBrowser::scanned);
    browser.setFolder(QString::fromStdString(dir.path()));
    QVERIFY(scanned.wait(10000));
    QCOMPARE(browser.rowCount(), 2);
    QStringList names;
    for (int i = 0; i < browser.rowCount(); ++i) names << browser.table()->item(i, 0)->text();
    QVERIFY2(names.contains("resumed/run.h5 (+1 continuation)"), qPrintable(names.join(", ")));
  }

  // A train run has no model folder: the column names the architecture it built and its task.
  void aModelTrainedFromScratchIsNamedByWhatItBuilt() {
    hh::test::TempDir dir("run_browser_scratch");
    writeRun(dir.file("task.h5"), "train", r::RunStatus::Completed, 0.1,
             R"({"model": "", "feature_map": "hedgehog", "architecture": {"model_type": "llama", "n_layer": 4,
                 "n_embd": 64}, "task": {"kind": "associative_recall"}})");
    writeRun(dir.file("text.h5"), "train", r::RunStatus::Completed, 0.1,
             R"({"model": "", "architecture": {"model_type": "gpt2", "n_layer": 2, "n_embd": 32}, "task": {"kind": ""}})");
    const auto runs = hh::gui::scanRuns(QString::fromStdString(dir.path()));
    QCOMPARE(runs.size(), size_t(2));
    for (const auto& s : runs) {
      if (s.path.endsWith("task.h5")) QCOMPARE(s.model, QString("new llama, 4 x 64, task associative_recall"));
      else QCOMPARE(s.model, QString("new gpt2, 2 x 32"));
    }
  }
};

HH_TEST_SUITE(TestRunBrowser, "app.gui.run_browser", &TestRunBrowser::scansAFolderOfRuns,
              &TestRunBrowser::aResumedRunIsOneRow, &TestRunBrowser::aModelTrainedFromScratchIsNamedByWhatItBuilt)

}  // namespace test_run_browser

#if HH_HAVE_QTEST
#include "test_run_browser.moc"
#endif
