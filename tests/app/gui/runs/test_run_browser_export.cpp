// app.gui.run_browser_export: several runs selected in the run browser.
//   - Overlay: one loss series per run, with that run's number of loss rows, one colour per run
//     (its held-out points in the same colour), a legend entry per series; kl_mean: one series per
//     run that has it, and none for the run without;
//   - Export CSV: parsed back with an RFC 4180 reader, the header is run_id, file, kind, status,
//     model, feature_map, then the union of the runs' scalar series (headline metrics first), one
//     row per selected run in table order with its last values, blank where a run lacks a series;
//     a model name with a comma and quotes survives the round trip;
//   - Export CSV, whole traces: one row per step any run logged (ascending), a column per run and
//     series, every value of every trace back (blank where a run logged nothing at that step);
//     an unreadable run file fails the export naming it and writes nothing;
//   - the Export CSV menu's two actions, through the save dialog: "Whole traces" writes the
//     traces (a "step" column), "Last values" one row per run;
//   - a refresh that brings a new run file keeps the selection on the same run files, not rows;
//   - Overlay of a distillation and a finetuning (losses 50x apart): ticked by itself to divide
//     each run by its first loss (both start at 1), the note names the two kinds; unticked, the
//     raw values come back.
#include <QApplication>
#include <QFile>
#include <QFileDialog>
#include <QLabel>
#include <QMenu>
#include <QPushButton>
#include <QSignalSpy>
#include <QTableWidget>
#include <QTest>
#include <QTimer>

#include "widgets/qcp.h"

#include <cmath>

#include <nlohmann/json.hpp>

#include "app/gui/runs/run_browser.h"
#include "app/gui/runs/run_overlay.h"
#include "app/gui/runs/run_table_csv.h"
#include "engine/runs/run_writer.h"
#include "tests/support/temp_dir.h"
#include "tests/support/hh_test.h"
#include "widgets/curve_plot.h"

namespace test_run_browser_export {

namespace {

namespace r = hh::runs;

// rows loss rows (1/s), val_loss every 5 steps when withVal, kl_mean at the end when withKl.
void writeRun(const std::string& path, const std::string& id, const std::string& model, int rows, bool withVal, bool withKl,
              const std::string& kind = "distill", double scale = 1.0) {
  r::RunHeader header;
  header.runId = id;
  header.kind = kind;
  nlohmann::json config{{"model", model}, {"feature_map", "hedgehog"}, {"steps", rows}};
  header.configJson = config.dump();
  header.layout.scalars = {"loss"};
  if (withVal) header.layout.scalars.push_back({"val_loss"});
  if (withKl) header.layout.scalars.push_back({"kl_mean"});
  auto w = r::RunWriter::create(path, header);
  for (int s = 1; s <= rows; ++s) {
    w.appendScalar(s, "loss", scale / s);
    if (withVal && s % 5 == 0) w.appendScalar(s, "val_loss", 2.0 / s);
  }
  if (withKl) w.appendScalar(rows, "kl_mean", 0.125);
  w.setStatus(r::RunStatus::Completed, "done");
}

// RFC 4180 rows: quoted fields with doubled quotes, CRLF line ends.
std::vector<QStringList> parseCsv(const QString& text) {
  std::vector<QStringList> rows;
  QStringList row;
  QString field;
  bool quoted = false;
  for (int i = 0; i < text.size(); ++i) {
    const QChar c = text[i];
    const QChar next = i + 1 < text.size() ? text[i + 1] : QChar();
    if (quoted && c == '"' && next == '"') {
      field += '"';
      ++i;
    } else if (c == '"') {
      quoted = !quoted;
    } else if (quoted) {
      field += c;
    } else if (c == ',') {
      row << field;
      field.clear();
    } else if (c == '\r' && next == '\n') {
      row << field;
      field.clear();
      rows.push_back(row);
      row.clear();
      ++i;
    } else {
      field += c;
    }
  }
  if (!field.isEmpty() || !row.isEmpty()) rows.push_back(row << field);
  return rows;
}

// Answers the next modal file dialog with `file` (accepts it), polling until it opens.
void answerFileDialog(const QString& file, int triesLeft = 500) {
  QTimer::singleShot(10, [file, triesLeft] {
    auto* dialog = qobject_cast<QFileDialog*>(QApplication::activeModalWidget());
    if (dialog == nullptr) {
      if (triesLeft > 0) answerFileDialog(file, triesLeft - 1);
      return;
    }
    dialog->selectFile(file);
    QMetaObject::invokeMethod(dialog, "accept", Qt::QueuedConnection);  // a protected slot
  });
}

// Triggers the Export CSV menu action `name` (csvTraces, csvLastValues), saving into `file`;
// returns the CSV's rows.
std::vector<QStringList> exportThroughMenu(hh::gui::RunBrowser& browser, const char* name, const QString& file) {
  auto* action = browser.findChild<QAction*>(QString::fromLatin1(name));
  if (action == nullptr) return {};
  answerFileDialog(file);
  action->trigger();
  QFile csv(file);
  if (!csv.open(QIODevice::ReadOnly)) return {};
  return parseCsv(QString::fromUtf8(csv.readAll()));
}

}  // namespace

class TestRunBrowserExport : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void overlayAndCsvOfSelectedRuns() {
    hh::test::TempDir dir("run_browser_export");
    writeRun(dir.file("a.h5"), "run-a", "teacher, \"small\"", 20, true, true);
    writeRun(dir.file("b.h5"), "run-b", "teacher-b", 12, false, false);
    writeRun(dir.file("c.h5"), "run-c", "teacher-c", 7, true, true);
    hh::gui::RunBrowser browser;
    QSignalSpy scanned(&browser, &hh::gui::RunBrowser::scanned);
    browser.setFolder(QString::fromStdString(dir.path()));
    QVERIFY(scanned.wait(10000));
    QCOMPARE(browser.rowCount(), 3);
    // Select a and b (by file name, whatever order the scan gave).
    auto* table = browser.table();
    table->sortItems(0);  // file name order: a, b, c
    table->clearSelection();
    table->selectionModel()->select(table->model()->index(0, 0), QItemSelectionModel::Select | QItemSelectionModel::Rows);
    table->selectionModel()->select(table->model()->index(1, 0), QItemSelectionModel::Select | QItemSelectionModel::Rows);
    const QStringList paths = browser.selectedPaths();
    QCOMPARE(paths.size(), 2);
    QVERIFY(paths[0].endsWith("a.h5") && paths[1].endsWith("b.h5"));

    // Overlay: loss and val_loss.
    QSignalSpy ready(&browser, &hh::gui::RunBrowser::overlayReady);
    browser.overlayRuns(paths);
    QVERIFY(ready.wait(10000));
    auto* overlay = browser.overlay();
    auto* plot = overlay->plot();
    QCOMPARE(overlay->runCount(), 2);
    const int lossA = overlay->seriesOf(0, "loss"), lossB = overlay->seriesOf(1, "loss");
    const int valA = overlay->seriesOf(0, "val_loss");
    QVERIFY(lossA >= 0 && lossB >= 0 && valA >= 0);
    QCOMPARE(overlay->seriesOf(1, "val_loss"), -1);  // b has none
    QCOMPARE(plot->seriesCount(), 3);
    QCOMPARE(plot->pointCount(lossA), 20);
    QCOMPARE(plot->pointCount(lossB), 12);
    QCOMPARE(plot->pointCount(valA), 4);
    QVERIFY(plot->seriesColor(lossA) != plot->seriesColor(lossB));
    QCOMPARE(plot->seriesColor(valA), plot->seriesColor(lossA));
    QCOMPARE(plot->plot()->legend->itemCount(), 3);
    QVERIFY(plot->seriesName(lossA).endsWith("a.h5"));

    // kl_mean: one series, for a.
    overlay->setMetric(hh::gui::RunOverlay::Metric::KlMean);
    QCOMPARE(plot->seriesCount(), 1);
    QCOMPARE(plot->pointCount(overlay->seriesOf(0, "kl_mean")), 1);
    QCOMPARE(overlay->seriesOf(1, "kl_mean"), -1);

    // CSV over a, b and c.
    table->selectAll();
    const QString csvPath = QString::fromStdString(dir.file("runs.csv"));
    QCOMPARE(browser.exportCsv(csvPath, browser.selectedPaths(), hh::gui::RunBrowser::CsvShape::LastValues), QString());
    QFile file(csvPath);
    QVERIFY(file.open(QIODevice::ReadOnly));
    const auto rows = parseCsv(QString::fromUtf8(file.readAll()));
    QCOMPARE(rows.size(), size_t(4));
    const QStringList expectedHeader{"run_id", "file", "kind", "status", "model", "feature_map", "val_loss", "kl_mean", "loss"};
    QCOMPARE(rows[0], expectedHeader);
    for (const auto& row : rows) QCOMPARE(row.size(), expectedHeader.size());
    QCOMPARE(rows[1][0], QString("run-a"));
    QVERIFY(rows[1][1].endsWith("a.h5"));
    QCOMPARE(rows[1][2], QString("distill"));
    QCOMPARE(rows[1][3], QString("completed"));
    QCOMPARE(rows[1][4], QString("teacher, \"small\""));
    QCOMPARE(rows[1][5], QString("hedgehog"));
    QCOMPARE(rows[1][6].toDouble(), 2.0 / 20);  // last val_loss, step 20
    QCOMPARE(rows[1][7].toDouble(), 0.125);
    QCOMPARE(rows[1][8].toDouble(), 1.0 / 20);
    QCOMPARE(rows[2][0], QString("run-b"));
    QCOMPARE(rows[2][6], QString());  // no val_loss
    QCOMPARE(rows[2][7], QString());  // no kl_mean
    QVERIFY(std::abs(rows[2][8].toDouble() - 1.0 / 12) < 1e-9);
    QCOMPARE(rows[3][0], QString("run-c"));
    QVERIFY(std::abs(rows[3][8].toDouble() - 1.0 / 7) < 1e-9);
  }

  void wholeTracesAsOneWideCsv() {
    hh::test::TempDir dir("run_browser_traces");
    writeRun(dir.file("a.h5"), "run-a", "m", 20, true, true);
    writeRun(dir.file("b.h5"), "run-b", "m", 12, false, false);
    hh::gui::RunBrowser browser;
    QSignalSpy scanned(&browser, &hh::gui::RunBrowser::scanned);
    browser.setFolder(QString::fromStdString(dir.path()));
    QVERIFY(scanned.wait(10000));
    browser.table()->sortItems(0);
    browser.table()->selectAll();
    const QString csvPath = QString::fromStdString(dir.file("traces.csv"));
    QCOMPARE(browser.exportCsv(csvPath, browser.selectedPaths(), hh::gui::RunBrowser::CsvShape::Traces), QString());
    QFile file(csvPath);
    QVERIFY(file.open(QIODevice::ReadOnly));
    const auto rows = parseCsv(QString::fromUtf8(file.readAll()));
    const QStringList header{"step", "a.h5:kl_mean", "a.h5:loss", "a.h5:val_loss", "b.h5:loss"};
    QCOMPARE(rows[0], header);
    QCOMPARE(rows.size(), size_t(1 + 20));  // steps 1..20
    for (int s = 1; s <= 20; ++s) {
      const QStringList& row = rows[size_t(s)];
      QCOMPARE(row.size(), header.size());
      QCOMPARE(row[0].toInt(), s);
      QVERIFY(std::abs(row[2].toDouble() - 1.0 / s) < 1e-9);
      QCOMPARE(row[1].isEmpty(), s != 20);          // kl_mean only at the end
      QCOMPARE(row[3].isEmpty(), s % 5 != 0);       // val_loss every 5 steps
      if (s % 5 == 0) QVERIFY(std::abs(row[3].toDouble() - 2.0 / s) < 1e-9);
      QCOMPARE(row[4].isEmpty(), s > 12);            // b stops at 12
      if (s <= 12) QVERIFY(std::abs(row[4].toDouble() - 1.0 / s) < 1e-9);
    }
    // An unreadable file among the selection: the export fails naming it and writes nothing.
    const QString broken = QString::fromStdString(dir.file("broken.h5"));
    QFile junk(broken);
    QVERIFY(junk.open(QIODevice::WriteOnly));
    junk.write("not a run file");
    junk.close();
    const QString second = QString::fromStdString(dir.file("second.csv"));
    const QString error = browser.exportCsv(second, {browser.selectedPaths()[0], broken}, hh::gui::RunBrowser::CsvShape::Traces);
    QVERIFY2(error.contains("broken.h5"), qPrintable(error));
    QVERIFY(!QFile::exists(second));
  }

  void theMenuWritesTheShapeItNames() {
    hh::test::TempDir dir("run_browser_menu");
    writeRun(dir.file("a.h5"), "run-a", "m", 6, false, false);
    writeRun(dir.file("b.h5"), "run-b", "m", 4, false, false);
    hh::gui::RunBrowser browser;
    QSignalSpy scanned(&browser, &hh::gui::RunBrowser::scanned);
    browser.setFolder(QString::fromStdString(dir.path()));
    QVERIFY(scanned.wait(10000));
    browser.table()->selectAll();
    const auto traces = exportThroughMenu(browser, "csvTraces", QString::fromStdString(dir.file("traces.csv")));
    QCOMPARE(traces.size(), size_t(1 + 6));  // a row per step, not per run
    QCOMPARE(traces[0].value(0), QString("step"));
    const auto last = exportThroughMenu(browser, "csvLastValues", QString::fromStdString(dir.file("runs.csv")));
    QCOMPARE(last.size(), size_t(1 + 2));  // a row per run
    QCOMPARE(last[0].value(0), QString("run_id"));
  }

  void aRefreshKeepsTheSelectedRuns() {
    hh::test::TempDir dir("run_browser_reselect");
    writeRun(dir.file("a.h5"), "run-a", "m", 3, false, false);
    writeRun(dir.file("b.h5"), "run-b", "m", 3, false, false);
    hh::gui::RunBrowser browser;
    QSignalSpy scanned(&browser, &hh::gui::RunBrowser::scanned);
    browser.setFolder(QString::fromStdString(dir.path()));
    QVERIFY(scanned.wait(10000));
    auto* table = browser.table();
    int rowOfA = -1;
    for (int r = 0; r < table->rowCount(); ++r)
      if (table->item(r, 0)->text() == "a.h5") rowOfA = r;
    QVERIFY(rowOfA >= 0);
    table->selectRow(rowOfA);
    const QStringList selected = browser.selectedPaths();
    QCOMPARE(selected.size(), 1);
    writeRun(dir.file("c.h5"), "run-c", "m", 3, false, false);  // a new run: the rows shift
    browser.refresh();
    QVERIFY(scanned.wait(10000));
    QCOMPARE(table->rowCount(), 3);
    QCOMPARE(browser.selectedPaths(), selected);
  }

  void runsOfDifferentKindsAreDrawnRelative() {
    hh::test::TempDir dir("run_browser_kinds");
    writeRun(dir.file("distill.h5"), "d", "m", 10, true, false, "distill", 50.0);
    writeRun(dir.file("finetune.h5"), "f", "m", 10, false, false, "finetune", 1.0);
    hh::gui::RunOverlay overlay;
    std::vector<hh::gui::RunCurves> curves;
    curves.push_back(hh::gui::readRunCurves(QString::fromStdString(dir.file("distill.h5")), "distill"));
    curves.push_back(hh::gui::readRunCurves(QString::fromStdString(dir.file("finetune.h5")), "finetune"));
    QCOMPARE(curves[0].kind, QString("distill"));
    overlay.setRuns(std::move(curves));
    QVERIFY(overlay.relative());
    auto* plot = overlay.plot();
    const auto d = plot->seriesValues(overlay.seriesOf(0, "loss"));
    const auto f = plot->seriesValues(overlay.seriesOf(1, "loss"));
    QCOMPARE(d.front(), 1.0);
    QCOMPARE(f.front(), 1.0);
    QVERIFY(std::abs(d.back() - 0.1) < 1e-12 && std::abs(f.back() - 0.1) < 1e-12);
    // The held-out loss is divided by the same run's first loss: (2/5) / 50.
    QVERIFY(std::abs(plot->seriesValues(overlay.seriesOf(0, "val_loss")).front() - 2.0 / 5 / 50) < 1e-12);
    bool named = false;
    for (auto* label : overlay.findChildren<QLabel*>()) named |= label->text().contains("distill, finetune");
    QVERIFY(named);
    overlay.setRelative(false);
    QCOMPARE(plot->seriesValues(overlay.seriesOf(0, "loss")).front(), 50.0);
  }

  void fieldsAreQuotedOnlyWhenNeeded() {
    QCOMPARE(hh::gui::csvField("plain"), QString("plain"));
    QCOMPARE(hh::gui::csvField("a,b"), QString("\"a,b\""));
    QCOMPARE(hh::gui::csvField("say \"hi\""), QString("\"say \"\"hi\"\"\""));
    QCOMPARE(hh::gui::csvField("two\nlines"), QString("\"two\nlines\""));
    QCOMPARE(hh::gui::csvField(" padded"), QString("\" padded\""));
  }
};

HH_TEST_SUITE(TestRunBrowserExport, "app.gui.run_browser_export", &TestRunBrowserExport::overlayAndCsvOfSelectedRuns,
              &TestRunBrowserExport::wholeTracesAsOneWideCsv, &TestRunBrowserExport::theMenuWritesTheShapeItNames,
              &TestRunBrowserExport::aRefreshKeepsTheSelectedRuns,
              &TestRunBrowserExport::runsOfDifferentKindsAreDrawnRelative,
              &TestRunBrowserExport::fieldsAreQuotedOnlyWhenNeeded)

}  // namespace test_run_browser_export

#if HH_HAVE_QTEST
#include "test_run_browser_export.moc"
#endif
