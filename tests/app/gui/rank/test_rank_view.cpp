// app.gui.rank_view: the workbench's Layer ranking tab (app/gui/rank/rank_view.h).
//   - a rank.json written here (a RankResult built by hand, jobs::toJson) opens: the heatmap is
//     layers x heads with the output errors (the KL toggle shows the KL table), the rows are
//     labelled "L0".. with the kept layer starred, the list is the layers hardest first with their
//     scores, the budget runs 0 .. L and starts at the file's keep; a file that is not a ranking
//     is refused with a message;
//   - changing k recomputes the plan (k = 2: the two hardest layers softmax, the others the ranked
//     attention), shown per layer in the list and as --plan; keep-as changes what they run, and a
//     keep-as that is no layer spec leaves no plan and disables Convert, as does a plan that keeps
//     every layer softmax; after opening a ranking, another model folder ranks into its own
//     runs/rank/<name>, not the opened ranking's folder;
//   - "Convert with this plan…" emits convertRequested, and the convert config it means has the
//     ranked model and data and exactly the plan shown (and the engine's parser takes it);
//   - a real rank on the tiny GPT-2 fixture (2 steps, 2 probe rows) runs on the worker while the
//     GUI thread keeps turning, and ends completed with its ranking on screen and rank.json written;
//   - Cancel right after Start ends a long run cancelled within seconds, with no ranking shown;
//   - in the main window, Run > Rank layers… shows the tab with the loaded model's folder, and
//     "Convert with this plan…" opens the New conversion form (the main window's own path) whose
//     "model" and "plan" are the ranking's model and the plan shown.
#include <QAction>
#include <QComboBox>
#include <QMenuBar>
#include <QTabWidget>
#include <QTimer>
#include <QElapsedTimer>
#include <QLabel>
#include <QProgressBar>
#include <QPushButton>
#include <QSignalSpy>
#include <QSpinBox>
#include <QTest>
#include <QTreeWidget>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "app/gui/conversion/config_form.h"
#include "app/gui/rank/rank_results.h"
#include "app/gui/rank/rank_runner.h"
#include "app/gui/rank/rank_view.h"
#include "app/gui/shell/main_window.h"
#include "engine/jobs/rank_job.h"
#include "tests/app/gui/gui_test_support.h"
#include "tests/engine/jobs/jobs_test_support.h"
#include "tests/support/hh_test.h"
#include "tests/support/temp_dir.h"
#include "widgets/heatmap_view.h"

namespace test_rank_view {

namespace {

namespace j = hh::jobs;
const std::string kModel = std::string(HH_FIXTURES_DIR) + "/tiny-random-gpt2";

// 4 layers x 3 heads; layer 2 is the hardest, then 0, 3, 1.
j::RankResult handMadeRanking() {
  j::RankResult r;
  r.outputError = {"output_error", 4, 3, {0.30, 0.20, 0.10, 0.05, 0.02, 0.02, 0.90, 0.60, 0.30, 0.10, 0.10, 0.10}};
  r.kl = {"kl", 4, 3, {0.3, 0.2, 0.1, 0.01, 0.02, 0.03, 1.5, 1.2, 0.9, 0.2, 0.1, 0.3}};
  for (int l = 0; l < 4; ++l) {
    double e = 0, k = 0;
    for (int h = 0; h < 3; ++h) e += r.outputError.values[size_t(l * 3 + h)], k += r.kl.values[size_t(l * 3 + h)];
    r.layerScore.push_back(e / 3);
    r.layerKl.push_back(k / 3);
  }
  r.hardestFirst = j::hardestFirst(r.layerScore);
  r.plan = j::proposePlan(r.hardestFirst, 1, "softmax", "hedgehog");
  r.measuredRows = 3;  // fewer than the config's probe_rows (8): the data held 3
  return r;
}

j::RankConfig handMadeConfig() {
  j::RankConfig c;
  c.modelDir = kModel;
  c.runDir = "/tmp/unused";
  c.attention = "hedgehog";
  c.steps = 10;
  c.keep = 1;
  c.data.sequenceLength = 48;
  return c;
}

std::string writeRanking(const hh::test::TempDir& dir) {
  const auto path = dir.file("rank.json");
  std::ofstream(path) << j::toJson(handMadeRanking(), handMadeConfig()).dump(2);
  return path;
}

// The fixture ranked on the word corpus: small enough to finish in seconds.
j::RankConfig tinyRankConfig(const hh::test::TempDir& dir, int64_t steps) {
  j::RankConfig c;
  c.modelDir = kModel;
  c.runDir = dir.file("rank");
  c.steps = steps;
  c.batchSize = 4;
  c.probeRows = 2;
  c.data.corpus = hh::test::writeWordCorpus(dir);
  c.data.sequenceLength = 32;
  c.data.validationFraction = 0.25;
  return c;
}

std::vector<std::string> planColumn(const QTreeWidget* list, int layers) {
  std::vector<std::string> plan(static_cast<size_t>(layers));
  for (int i = 0; i < list->topLevelItemCount(); ++i) {
    const auto* item = list->topLevelItem(i);
    plan[size_t(item->text(1).mid(1).toInt())] = item->text(4).toStdString();
  }
  return plan;
}

QAction* menuAction(const QMainWindow& window, const QString& text) {
  for (QAction* menu : window.menuBar()->actions())
    if (menu->menu())
      for (QAction* a : menu->menu()->actions())
        if (a->text().remove(QLatin1Char('&')).startsWith(text)) return a;
  return nullptr;
}

}  // namespace

class TestRankView : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void initTestCase() { setenv("HH_NUM_THREADS", "1", 0); }

  void opensARankingFile() {
    hh::test::TempDir dir("rank_view_open");
    hh::gui::RankView view;
    view.resize(1200, 700);
    view.show();
    QCOMPARE(view.openRanking(QString::fromStdString(writeRanking(dir))), QString());
    auto* panel = view.results();
    QVERIFY(panel->hasRanking());
    QVERIFY2(panel->summaryLabel()->text().contains("measured on 3 held-out rows"),
             qPrintable(panel->summaryLabel()->text()));
    auto* map = panel->heatmap();
    QCOMPARE(map->rows(), 4);
    QCOMPARE(map->cols(), 3);
    QCOMPARE(map->valueAt(2, 1), 0.60f);
    QCOMPARE(map->valueAt(3, 2), 0.10f);
    QCOMPARE(panel->rowLabels(), QStringList({"L0", "L1", "L2 \u2605", "L3"}));
    QVERIFY(map->readoutText(2, 1).startsWith("layer 2"));
    panel->setMetric(hh::gui::RankResultsPanel::Metric::Kl);
    QCOMPARE(map->valueAt(2, 0), 1.5f);
    panel->setMetric(hh::gui::RankResultsPanel::Metric::OutputError);
    QCOMPARE(map->valueAt(2, 0), 0.90f);

    const QTreeWidget* list = panel->layerList();
    QCOMPARE(list->topLevelItemCount(), 4);
    const QStringList order{"L2", "L0", "L3", "L1"};
    for (int i = 0; i < 4; ++i) QCOMPARE(list->topLevelItem(i)->text(1), order[i]);
    QCOMPARE(list->topLevelItem(0)->text(2), QString("0.6000"));  // (0.9 + 0.6 + 0.3) / 3
    QCOMPARE(list->topLevelItem(0)->text(3), QString("1.2000"));
    QVERIFY(list->topLevelItem(0)->font(1).bold());
    QVERIFY(!list->topLevelItem(1)->font(1).bold());
    QCOMPARE(panel->budgetBox()->maximum(), 4);
    QCOMPARE(panel->budget(), 1);
    QCOMPARE(panel->keepAs(), QString("softmax"));
    QVERIFY((panel->plan() == std::vector<std::string>{"hedgehog", "hedgehog", "softmax", "hedgehog"}));
    // The form takes the ranking's settings, so Start reruns it.
    QCOMPARE(view.modelFolder(), QString::fromStdString(kModel));
    QCOMPARE(view.stepsBox()->value(), 10);

    const auto bad = dir.file("bad.json");
    std::ofstream(bad) << R"({"plan": ["softmax"]})";
    const QString error = view.openRanking(QString::fromStdString(bad));
    QVERIFY2(error.contains("not a ranking"), qPrintable(error));
    QVERIFY(view.openRanking(QString::fromStdString(dir.file("missing.json"))).contains("cannot read"));
    QCOMPARE(panel->heatmap()->rows(), 4);  // the shown ranking stays
  }

  void budgetAndKeepAsChangeThePlan() {
    hh::test::TempDir dir("rank_view_budget");
    hh::gui::RankView view;
    QCOMPARE(view.openRanking(QString::fromStdString(writeRanking(dir))), QString());
    auto* panel = view.results();
    QSignalSpy changed(panel, &hh::gui::RankResultsPanel::planChanged);
    panel->budgetBox()->setValue(2);
    QCOMPARE(changed.count(), 1);
    const std::vector<std::string> two{"softmax", "hedgehog", "softmax", "hedgehog"};
    QVERIFY(panel->plan() == two);
    QVERIFY(planColumn(panel->layerList(), 4) == two);
    QVERIFY2(panel->planLabel()->text().contains("--plan softmax,hedgehog,softmax,hedgehog"),
             qPrintable(panel->planLabel()->text()));
    QCOMPARE(panel->rowLabels(), QStringList({"L0 \u2605", "L1", "L2 \u2605", "L3"}));

    panel->setKeepAs("hedgehog_window(64)");
    QVERIFY((panel->plan() == std::vector<std::string>{"hedgehog_window(64)", "hedgehog", "hedgehog_window(64)", "hedgehog"}));
    panel->setBudget(0);
    QVERIFY((panel->plan() == std::vector<std::string>(4, "hedgehog")));
    QCOMPARE(panel->rowLabels(), QStringList({"L0", "L1", "L2", "L3"}));
    panel->setBudget(4);
    QVERIFY((panel->plan() == std::vector<std::string>(4, "hedgehog_window(64)")));

    panel->setKeepAs("no_such_map(");
    QVERIFY(panel->plan().empty());
    QVERIFY(!panel->convertButton()->isEnabled());
    QVERIFY(panel->planLabel()->text().contains("not a layer attention"));
    panel->setKeepAs("softmax");
    QCOMPARE(panel->plan().size(), size_t(4));
    // Every layer kept as softmax: nothing to convert (the job would fail only after starting).
    QVERIFY(!panel->convertButton()->isEnabled());
    QVERIFY(panel->planLabel()->text().contains("nothing to convert"));
    panel->setBudget(3);
    QVERIFY(panel->convertButton()->isEnabled());
  }

  void anotherModelRanksIntoItsOwnFolder() {
    hh::test::TempDir dir("rank_view_other_model");
    auto config = handMadeConfig();
    config.keep = j::RankConfig{}.keep + 1;  // a budget of the opened ranking's own
    const auto path = dir.file("rank.json");
    std::ofstream(path) << j::toJson(handMadeRanking(), config).dump(2);
    hh::gui::RankView view;
    QCOMPARE(view.openRanking(QString::fromStdString(path)), QString());
    const auto opened = view.config();
    QCOMPARE(opened.keep, config.keep);
    view.setModelFolder(QStringLiteral("/models/other-model"));
    const auto other = view.config();
    QCOMPARE(other.runDir, std::string("runs/rank/other-model"));
    QVERIFY(opened.runDir != other.runDir);
    QCOMPARE(other.keep, j::RankConfig{}.keep);
  }

  void convertUsesThePlanShown() {
    hh::test::TempDir dir("rank_view_convert");
    hh::gui::RankView view;
    QCOMPARE(view.openRanking(QString::fromStdString(writeRanking(dir))), QString());
    auto* panel = view.results();
    panel->setBudget(2);
    QSignalSpy requested(&view, &hh::gui::RankView::convertRequested);
    panel->convertButton()->click();
    QCOMPARE(requested.count(), 1);
    const j::ConvertConfig c = panel->conversionConfig();
    QCOMPARE(c.modelDir, kModel);
    QVERIFY(c.plan == panel->plan());
    QVERIFY((c.plan == std::vector<std::string>{"softmax", "hedgehog", "softmax", "hedgehog"}));
    QCOMPARE(c.data.sequenceLength, int64_t(48));  // the data the layers were ranked on
    QVERIFY(!c.runDir.empty());
    // The config the form gets is one the engine takes, and the distillation runs the plan.
    const j::ConvertConfig back = j::convertConfigFromJson(j::toJson(c));
    QVERIFY(back.plan == c.plan);
    QVERIFY(j::distillStage(back).plan == c.plan);
  }

  void ranksTheFixtureOnTheWorker() {
    hh::test::TempDir dir("rank_view_run");
    hh::gui::RankView view;
    view.show();
    view.setBaseConfig(tinyRankConfig(dir, 2));
    QSignalSpy finished(&view, &hh::gui::RankView::finished);
    view.startButton()->click();
    QVERIFY(view.running());
    QVERIFY(!view.startButton()->isEnabled());
    QVERIFY(view.cancelButton()->isEnabled());
    const double worstGapMs = hh::test::spinMeasuringLatency(180000, [&] { return finished.count() > 0; });
    QCOMPARE(finished.count(), 1);
    QVERIFY2(finished.at(0).at(0).toString() == "completed", qPrintable(finished.at(0).at(1).toString()));
    qInfo("longest GUI-thread stall while ranking: %.0f ms", worstGapMs);
    QVERIFY(worstGapMs < 1500);  // the job ran on the worker, not the GUI thread
    auto* panel = view.results();
    QVERIFY(panel->hasRanking());
    QCOMPARE(panel->heatmap()->rows(), 5);
    QVERIFY(panel->heatmap()->cols() > 0);
    QCOMPARE(panel->layerList()->topLevelItemCount(), 5);
    QCOMPARE(panel->plan().size(), size_t(5));
    QVERIFY(std::filesystem::exists(dir.file("rank/rank.json")));
    QVERIFY(view.logText().contains("rank.json"));
    QVERIFY(view.startButton()->isEnabled());
    QVERIFY(!view.cancelButton()->isEnabled());
    QCOMPARE(view.progressBar()->value(), view.progressBar()->maximum());
  }

  void cancelStopsARun() {
    hh::test::TempDir dir("rank_view_cancel");
    hh::gui::RankView view;
    view.setBaseConfig(tinyRankConfig(dir, 100000));
    QSignalSpy finished(&view, &hh::gui::RankView::finished);
    QCOMPARE(view.start(), QString());
    QTest::qWait(200);
    QElapsedTimer clock;
    clock.start();
    view.cancelButton()->click();
    QTRY_VERIFY_WITH_TIMEOUT(finished.count() > 0, 30000);
    qInfo("cancel took %lld ms", (long long)clock.elapsed());
    QCOMPARE(finished.at(0).at(0).toString(), QString("cancelled"));
    QVERIFY(clock.elapsed() < 10000);
    QVERIFY(!view.running());
    QVERIFY(!view.results()->hasRanking());
    QVERIFY(view.startButton()->isEnabled());
    QVERIFY(view.logText().startsWith("Cancelled"));
  }

  // Pause: the job waits at its next step (its log line says so, the bar says paused, no step
  // for a second); Resume goes on; a cancel while paused stops it.
  void pauseHoldsARun() {
    hh::test::TempDir dir("rank_view_pause");
    hh::gui::RankView view;
    view.setBaseConfig(tinyRankConfig(dir, 100000));
    QSignalSpy finished(&view, &hh::gui::RankView::finished);
    QVERIFY(!view.pauseButton()->isEnabled());
    QCOMPARE(view.start(), QString());
    QVERIFY(view.pauseButton()->isEnabled());
    QTRY_VERIFY_WITH_TIMEOUT(view.progressBar()->value() >= 2, 60000);
    view.pauseButton()->click();
    QCOMPARE(view.pauseButton()->text(), QString("Resume"));
    QTRY_VERIFY_WITH_TIMEOUT(view.logText().startsWith("paused at step"), 30000);
    QVERIFY2(view.progressBar()->text().startsWith("paused at"), qPrintable(view.progressBar()->text()));
    const int stoppedAt = view.progressBar()->value();
    QTest::qWait(1000);
    QCOMPARE(view.progressBar()->value(), stoppedAt);
    view.pauseButton()->click();
    QCOMPARE(view.pauseButton()->text(), QString("Pause"));
    QTRY_VERIFY_WITH_TIMEOUT(view.progressBar()->value() > stoppedAt, 30000);
    view.pauseButton()->click();
    QTest::qWait(300);
    view.cancelButton()->click();
    QTRY_VERIFY_WITH_TIMEOUT(finished.count() > 0, 30000);
    QCOMPARE(finished.at(0).at(0).toString(), QString("cancelled"));
    QCOMPARE(view.pauseButton()->text(), QString("Pause"));
    QVERIFY(!view.pauseButton()->isEnabled());
  }

  void mainWindowOpensTheTabAndTheForm() {
    hh::test::TempDir dir("rank_view_window");
    hh::gui::MainWindow window;
    QSignalSpy loaded(&window, &hh::gui::MainWindow::modelLoaded);
    window.openModel(QString::fromStdString(kModel));
    QTRY_VERIFY_WITH_TIMEOUT(loaded.count() > 0, 60000);
    QCOMPARE(loaded.at(0).at(0).toString(), QString());
    QAction* rank = menuAction(window, "Rank layers");
    QVERIFY(rank && menuAction(window, "Open a ranking"));
    rank->trigger();
    auto* view = window.rankView();
    QCOMPARE(window.findChild<QTabWidget*>()->currentWidget(), static_cast<QWidget*>(view));
    QCOMPARE(view->modelFolder(), QString::fromStdString(kModel));

    QCOMPARE(window.openRanking(QString::fromStdString(writeRanking(dir))), QString());
    view->results()->setBudget(2);
    // The form is modal: read it and close it from a timer while its exec() runs.
    nlohmann::json form;
    QTimer poll;
    connect(&poll, &QTimer::timeout, this, [&] {
      if (auto* dialog = window.findChild<hh::gui::ConversionDialog*>(); dialog && dialog->isVisible()) {
        form = dialog->form()->json();
        dialog->reject();
      }
    });
    poll.start(50);
    view->results()->convertButton()->click();  // returns once the form is closed
    poll.stop();
    QVERIFY(form.is_object());
    QCOMPARE(form.at("model").get<std::string>(), kModel);
    QVERIFY((form.at("plan").get<std::vector<std::string>>() ==
             std::vector<std::string>{"softmax", "hedgehog", "softmax", "hedgehog"}));
    QVERIFY(!window.jobRunning());  // rejected: nothing started
  }
};

HH_TEST_SUITE(TestRankView, "app.gui.rank_view", &TestRankView::initTestCase, &TestRankView::opensARankingFile,
              &TestRankView::budgetAndKeepAsChangeThePlan, &TestRankView::anotherModelRanksIntoItsOwnFolder,
              &TestRankView::convertUsesThePlanShown, &TestRankView::ranksTheFixtureOnTheWorker,
              &TestRankView::cancelStopsARun, &TestRankView::pauseHoldsARun,
              &TestRankView::mainWindowOpensTheTabAndTheForm)

}  // namespace test_rank_view

#if HH_HAVE_QTEST
#include "test_rank_view.moc"
#endif
