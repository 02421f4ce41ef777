// app.gui.experiment_view: an experiment of two tiny distillation variants is run by the engine's
// runner, then opened: one table row per variant, a scatter point per variant at its summary
// metrics, one curve per variant equal to its run file's scalar, each variant's last snapshot of
// the chosen head (the linear weights), and PNG export of the three figures. A folder without a
// summary is refused with a message. A reload keeps the chosen axes, scalar and head; a run's row
// (not a mean or paired row) opens its run file on a double-click; live rows (variants not in
// the summary yet) follow the runs. A variant cancelled and
// resumed shows as one run (its run.h5 and continuation joined). With repeats, a bold row per
// declared variant above the runs gives each metric's mean +- sd over its repeats, the numbers of
// summary.json, an italic row per variant against the baseline (a metric column hidden from the
// header's menu stays hidden when the folder is opened again, until "Show every column"), the
// curves give a declared variant's repeats one colour and a dash each, and the scatter draws each
// declared variant's repeats as one series.
#include <QFile>
#include <QImage>
#include <QMenu>
#include <QSignalSpy>
#include <QTableWidget>
#include <QTest>

#include <filesystem>
#include <fstream>

#include "app/gui/experiments/experiment_view.h"
#include "engine/io/durable_file.h"
#include "engine/jobs/experiment_job.h"
#include "engine/runs/run_reader.h"
#include "tests/engine/jobs/experiment_test_support.h"
#include "tests/support/hh_test.h"
#include "tests/support/temp_dir.h"
#include "widgets/curve_plot.h"
#include "widgets/heatmap_view.h"
#include "widgets/qcp.h"

namespace test_experiment_view {

namespace {
namespace j = hh::jobs;
using nlohmann::json;

// The jobs suite's tiny experiment, with a snapshot of head (1, 0) at every evaluation.
json experimentWithSnapshots(const hh::test::TempDir& dir) {
  json e = hh::test::tinyExperiment(dir);
  e["base"]["snapshot_every"] = 2;
  e["base"]["snapshot_pairs"] = json::array({json::array({1, 0})});
  return e;
}
using hh::test::CancelAtStep;
}  // namespace

class TestExperimentView : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void initTestCase() { setenv("HH_NUM_THREADS", "1", 0); }

  void showsAndExportsAnExperiment() {
    hh::test::TempDir dir("experiment_view");
    const json e = experimentWithSnapshots(dir);
    j::JobObserver quiet;
    const auto result = j::runExperiment(j::experimentConfigFromJson(e), quiet);
    QVERIFY2(result.status == j::JobStatus::Completed, result.message.c_str());

    hh::gui::ExperimentView view;
    view.resize(1200, 900);
    view.show();
    QVERIFY(!view.open(QString::fromStdString(dir.file("nowhere"))).isEmpty());
    const QString error = view.open(QString::fromStdString(dir.file("exp")));
    QVERIFY2(error.isEmpty(), qPrintable(error));
    QCOMPARE(view.variantCount(), 2);
    QCOMPARE(view.table()->rowCount(), 2);
    QCOMPARE(view.table()->item(1, 0)->text(), QString("t2r"));
    // A summary the view refuses leaves the open experiment as it was (the variants were cleared
    // while the table, title and plots still showed them).
    const QString empty = QString::fromStdString(dir.file("empty_summary.json"));
    hh::io::writeFileAtomically(empty.toStdString(), R"({"name": "x", "variants": []})");
    QVERIFY(view.open(empty).contains("lists no variants"));
    QCOMPARE(view.variantCount(), 2);
    QCOMPARE(view.table()->rowCount(), 2);

    QVERIFY(view.setScatterAxes("kl_mean", "val_loss"));
    QVERIFY(!view.setScatterAxes("kl_mean", "no_such_metric"));
    QCOMPARE(view.scatterPlot()->seriesCount(), 2);
    QCOMPARE(view.scatterPlot()->seriesName(1), QString("t2r"));
    const auto t2rRun = hh::runs::RunReader::open(result.variants[1].runDir + "/run.h5");
    QCOMPARE(view.scatterPlot()->seriesValues(1), QVector<double>({t2rRun.scalars("val_loss").values.back()}));

    QVERIFY(view.setCurveScalar("loss"));
    QCOMPARE(view.curvePlot()->seriesCount(), 2);
    const auto loss = t2rRun.scalars("loss").values;
    QCOMPARE(view.curvePlot()->seriesValues(1), QVector<double>(loss.begin(), loss.end()));

    QVERIFY(view.setMapPair(1, 0));
    QCOMPARE(view.maps().size(), size_t(2));
    const auto snap = t2rRun.snapshot(-1);
    QCOMPARE(view.maps()[1]->rows(), snap.size);
    QCOMPARE(double(view.maps()[1]->valueAt(snap.size - 1, 0)), double(snap.linear[size_t((snap.size - 1) * snap.size)]));

    // A reload (the summary rewritten as a variant ends) keeps the chosen axes, scalar and head;
    // opening the folder again starts from the defaults (the held-out loss over steps).
    QCOMPARE(view.reload(), QString());
    QCOMPARE(view.scatterPlot()->seriesValues(1), QVector<double>({t2rRun.scalars("val_loss").values.back()}));
    QCOMPARE(view.curvePlot()->seriesValues(1), QVector<double>(loss.begin(), loss.end()));
    QCOMPARE(double(view.maps()[1]->valueAt(snap.size - 1, 0)),
             double(snap.linear[size_t((snap.size - 1) * snap.size)]));
    QCOMPARE(view.open(view.folder()), QString());
    const auto valLoss = t2rRun.scalars("val_loss").values;
    QCOMPARE(view.curvePlot()->seriesValues(1), QVector<double>(valLoss.begin(), valLoss.end()));

    // Grey rows after the runs for variants not in the summary yet; they open nothing.
    view.setLiveRows({{"seed1", "running"}, {"seed2", "waiting"}});
    QCOMPARE(view.table()->rowCount(), 4);
    QCOMPARE(view.table()->item(3, 0)->text() + " " + view.table()->item(3, 1)->text(), QString("seed2 waiting"));
    QCOMPARE(view.runFileOf(2), QString());
    // A variant the summary lists, running again (its last record a cancel, say): its own row,
    // the status greyed with the last record in brackets; no extra row.
    const QString second = view.table()->item(1, 0)->text(), recorded = view.table()->item(1, 1)->text();
    view.setLiveRows({{second, "running"}, {"seed2", "waiting"}});
    QCOMPARE(view.table()->rowCount(), 3);
    QCOMPARE(view.liveRowCount(), 1);
    QCOMPARE(view.table()->item(1, 1)->text(), QString("running (last: %1)").arg(recorded));
    QCOMPARE(view.table()->item(2, 0)->text(), QString("seed2"));
    view.setLiveRows({});
    QCOMPARE(view.table()->rowCount(), 2);
    QCOMPARE(view.table()->item(1, 1)->text(), recorded);

    // A double-click on a run's row asks for its run file (the main window opens it).
    QSignalSpy requested(&view, &hh::gui::ExperimentView::runRequested);
    const QRect cell = view.table()->visualItemRect(view.table()->item(1, 0));
    QVERIFY(QTest::qWaitForWindowExposed(&view) && view.table()->viewport()->rect().contains(cell.center()));
    QTest::mouseClick(view.table()->viewport(), Qt::LeftButton, {}, cell.center());
    QTest::mouseDClick(view.table()->viewport(), Qt::LeftButton, {}, cell.center());
    QCOMPARE(requested.count(), 1);
    QCOMPARE(requested.at(0).at(0).toString(), QString::fromStdString(result.variants[1].runDir + "/run.h5"));

    const QString out = QString::fromStdString(dir.file("figures"));
    const QString exportError = view.exportFigures(out, 800, 500);
    QVERIFY2(exportError.isEmpty(), qPrintable(exportError));
    for (const char* name : {"scatter.png", "curves.png", "maps.png"}) {
      const QImage image(out + "/" + name);
      QVERIFY2(!image.isNull(), name);
      QVERIFY(image.width() >= 800);
    }
  }

  void resumedVariantIsOneRun() {
    // A variant cancelled at step 3 and resumed: run.h5 up to 3, run-resumed-3.h5 after. The
    // view shows one curve over steps 1-4 and the continuation's last snapshot.
    hh::test::TempDir dir("experiment_view_resumed");
    const auto config = j::experimentConfigFromJson(experimentWithSnapshots(dir));
    CancelAtStep cancel;
    cancel.at = 3;
    QVERIFY(j::runExperiment(config, cancel).status == j::JobStatus::Cancelled);
    j::ExperimentOptions resume;
    resume.resume = true;
    j::JobObserver quiet;
    const auto result = j::runExperiment(config, quiet, resume);
    QVERIFY2(result.status == j::JobStatus::Completed, result.message.c_str());
    const auto first = hh::runs::RunReader::open(result.variants[0].runDir + "/run.h5");
    const auto continuation = hh::runs::RunReader::open(result.variants[0].runDir + "/run-resumed-3.h5");

    hh::gui::ExperimentView view;
    view.resize(1200, 900);
    QCOMPARE(view.open(QString::fromStdString(dir.file("exp"))), QString());
    QVERIFY(view.setCurveScalar("loss"));
    QVector<double> expected;
    for (double v : first.scalars("loss").values) expected << v;
    expected << continuation.scalars("loss").values.back();
    QCOMPARE(view.curvePlot()->seriesValues(0), expected);
    QVERIFY(view.setMapPair(1, 0));
    QVERIFY2(view.maps()[0]->title().contains("step 4"), qPrintable(view.maps()[0]->title()));
  }

  // A variant that failed before its run file (a model folder that is not there) has no metrics:
  // it is a table row, and the others still get their scatter points, curves and maps (the lists
  // of metrics, scalars and snapshot pairs had come from the first variant: all empty).
  void aVariantWithoutRunFilesLeavesTheOthersDrawn() {
    hh::test::TempDir dir("experiment_view_failed");
    json e = experimentWithSnapshots(dir);
    json broken = e["variants"][0];
    broken["name"] = "broken";
    broken["set"]["model"] = dir.file("no_model_here");
    e["variants"].insert(e["variants"].begin(), broken);
    j::JobObserver quiet;
    const auto result = j::runExperiment(j::experimentConfigFromJson(e), quiet);
    QVERIFY(result.variants.size() == 3 && result.variants[0].status == j::JobStatus::Failed);
    hh::gui::ExperimentView view;
    view.resize(1200, 900);
    QCOMPARE(view.open(QString::fromStdString(dir.file("exp"))), QString());
    QCOMPARE(view.table()->rowCount(), 3);
    QVERIFY(view.setScatterAxes("kl_mean", "val_loss"));
    QCOMPARE(view.scatterPlot()->seriesCount(), 2);
    QCOMPARE(view.scatterPlot()->seriesName(0), QString("hedgehog"));
    QVERIFY(view.setCurveScalar("loss"));
    QCOMPARE(view.curvePlot()->seriesCount(), 2);
    QCOMPARE(view.maps().size(), size_t(3));  // the failed variant's tile says it has no snapshot
    QCOMPARE(view.maps()[0]->rows(), 0);
    QVERIFY(view.maps()[1]->rows() > 0 && view.maps()[2]->rows() > 0);
  }

  void noSnapshotsNoMapsFigure() {
    // A language-model experiment records no attention snapshots: no empty maps.png.
    hh::test::TempDir dir("experiment_view_lm");
    const json e = {{"name", "lm"},
                    {"job", "train"},
                    {"run_dir", dir.file("exp")},
                    {"base",
                     {{"architecture", {{"n_embd", 32}, {"n_layer", 2}, {"n_head", 4}, {"n_positions", 32}}},
                      {"tokenizer", std::string(HH_FIXTURES_DIR) + "/tiny-random-gpt2"},
                      {"steps", 4},
                      {"batch_size", 4},
                      {"eval_every", 2},
                      {"eval_batches", 1},
                      {"data", {{"corpus", hh::test::writeWordCorpus(dir)}, {"sequence_length", 32}, {"validation_fraction", 0.25}}}}},
                    {"variants", json::array({{{"name", "softmax"}}})}};
    j::JobObserver quiet;
    const auto result = j::runExperiment(j::experimentConfigFromJson(e), quiet);
    QVERIFY2(result.status == j::JobStatus::Completed, result.message.c_str());
    hh::gui::ExperimentView view;
    view.resize(1200, 900);
    QCOMPARE(view.open(QString::fromStdString(dir.file("exp"))), QString());
    QVERIFY(view.maps().empty());
    const QString out = QString::fromStdString(dir.file("figures"));
    QCOMPARE(view.exportFigures(out, 800, 500), QString());
    QVERIFY(QFile::exists(out + "/curves.png"));
    QVERIFY(!QFile::exists(out + "/maps.png"));
  }

  void repeatsAddARowPerVariant() {
    hh::test::TempDir dir("experiment_view_repeats");
    json e = hh::test::tinyExperiment(dir);
    e["repeats"] = json::array(
        {{{"name", "s1"}, {"set", {{"data", {{"seed", 1}}}}}}, {{"name", "s2"}, {"set", {{"data", {{"seed", 2}}}}}}});
    e["baseline"] = "hedgehog";
    j::JobObserver quiet;
    const auto result = j::runExperiment(j::experimentConfigFromJson(e), quiet);
    QVERIFY2(result.status == j::JobStatus::Completed, result.message.c_str());
    hh::gui::ExperimentView view;
    view.resize(1200, 900);
    QCOMPARE(view.open(QString::fromStdString(dir.file("exp"))), QString());
    QCOMPARE(view.variantCount(), 4);
    QCOMPARE(view.groupCount(), 2);
    auto* table = view.table();
    QCOMPARE(table->rowCount(), 7);  // two groups, t2r against the baseline, four runs
    QCOMPARE(table->item(1, 0)->text(), QString("t2r: mean \u00b1 sd"));
    QCOMPARE(table->item(1, 1)->text(), QString("2 of 2 completed"));
    QCOMPARE(table->item(2, 0)->text(), QString("t2r \u2212 hedgehog"));
    QCOMPARE(table->item(6, 0)->text(), QString("t2r.s2"));
    QVERIFY(table->item(1, 0)->font().bold() && !table->item(6, 0)->font().bold());
    // Only the runs' rows open a run: not the mean +- sd rows, not the paired one.
    for (int row : {0, 1, 2}) QCOMPARE(view.runFileOf(row), QString());
    QCOMPARE(view.runFileOf(6), QString::fromStdString(result.variants[3].runDir + "/run.h5"));
    QVERIFY(table->item(2, 0)->font().italic() && !table->item(2, 0)->font().bold());
    int column = -1;
    for (int c = 0; c < table->columnCount(); ++c)
      if (table->horizontalHeaderItem(c)->text() == "kl_mean") column = c;
    QVERIFY(column > 0);
    const auto summary = json::parse(std::ifstream(result.summaryJson));
    const auto& kl = summary["groups"][1]["metrics"]["kl_mean"];
    QCOMPARE(table->item(1, column)->text(), QString("%1 \u00b1 %2")
                                                 .arg(QString::number(kl["mean"].get<double>(), 'g', 5),
                                                      QString::number(kl["sd"].get<double>(), 'g', 2)));
    // The paired row: t2r's kl_mean minus hedgehog's, seed by seed, from the runs themselves.
    const auto& m = result.variants;
    const double d1 = m[2].metrics.at("kl_mean") - m[0].metrics.at("kl_mean");
    const double d2 = m[3].metrics.at("kl_mean") - m[1].metrics.at("kl_mean");
    const auto& paired = summary["groups"][1]["against_baseline"]["metrics"]["kl_mean"];
    QCOMPARE(paired["diff_mean"].get<double>(), (d1 + d2) / 2);
    const QString cell = table->item(2, column)->text();
    QVERIFY2(cell.startsWith(((d1 + d2) / 2 > 0 ? "+" : "") + QString::number((d1 + d2) / 2, 'g', 4) + " \u00b1 "),
             qPrintable(cell));
    QVERIFY2(
        cell.endsWith(QString(", %1 lower / %2 higher").arg(int(d1 < 0) + int(d2 < 0)).arg(int(d1 > 0) + int(d2 > 0))),
        qPrintable(cell));
    // The header's menu hides a metric column, which stays hidden when the folder is opened
    // again, until "Show every column".
    QMenu menu;
    view.fillColumnMenu(&menu);
    QAction* klAction = nullptr;
    for (QAction* a : menu.actions())
      if (a->text() == "kl_mean") klAction = a;
    QVERIFY(klAction && klAction->isCheckable() && klAction->isChecked());
    klAction->setChecked(false);
    QVERIFY(table->isColumnHidden(column));
    QCOMPARE(view.hiddenMetricColumns(), QStringList{"kl_mean"});
    QCOMPARE(view.open(QString::fromStdString(dir.file("exp"))), QString());
    QVERIFY(view.table()->isColumnHidden(column));
    QVERIFY(!view.table()->isColumnHidden(0) && !view.table()->isColumnHidden(column + 1));
    QMenu again;
    view.fillColumnMenu(&again);
    QCOMPARE(again.actions().last()->text(), QString("Show every column"));
    again.actions().last()->trigger();
    QVERIFY(!view.table()->isColumnHidden(column));
    QVERIFY(view.hiddenMetricColumns().isEmpty());
    QVERIFY(view.showOnlyMetricColumns({"kl_mean"}));
    QVERIFY(!view.table()->isColumnHidden(column) && view.table()->isColumnHidden(column + 1));
    QVERIFY(!view.showOnlyMetricColumns({"kl_mean", "no_such_metric"}));

    // The curves: a declared variant's repeats in one colour, a dash each; the variants apart.
    QVERIFY(view.setCurveScalar("kl_mean"));
    auto* curves = view.curvePlot()->plot();
    QCOMPARE(curves->graphCount(), 4);
    QCOMPARE(curves->graph(2)->pen().color(), curves->graph(3)->pen().color());
    QVERIFY(curves->graph(2)->pen().style() != curves->graph(3)->pen().style());
    QVERIFY(curves->graph(0)->pen().color() != curves->graph(2)->pen().color());
    QCOMPARE(curves->graph(0)->pen().style(), curves->graph(2)->pen().style());
    // The scatter: one series per declared variant, a point per repeat.
    QVERIFY(view.setScatterAxes("kl_mean", "val_loss"));
    QCOMPARE(view.scatterPlot()->seriesCount(), 2);
    QCOMPARE(view.scatterPlot()->seriesName(1), QString("t2r (2 runs)"));
    QCOMPARE(view.scatterPlot()->seriesValues(1),
             QVector<double>({result.variants[2].metrics.at("val_loss"), result.variants[3].metrics.at("val_loss")}));
  }
};

HH_TEST_SUITE(TestExperimentView, "app.gui.experiment_view", &TestExperimentView::initTestCase,
              &TestExperimentView::showsAndExportsAnExperiment, &TestExperimentView::resumedVariantIsOneRun,
              &TestExperimentView::aVariantWithoutRunFilesLeavesTheOthersDrawn,
              &TestExperimentView::noSnapshotsNoMapsFigure, &TestExperimentView::repeatsAddARowPerVariant)

}  // namespace test_experiment_view

#if HH_HAVE_QTEST
#include "test_experiment_view.moc"
#endif
