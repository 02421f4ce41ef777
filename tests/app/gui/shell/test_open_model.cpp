// app.gui.open_model: opening a model as a newcomer does (issue: the workbench as a daily tool).
//   - the window reopened on the feature-map comparison (its last tab) and a model is opened: it
//     lands on the inspector, which inspects the default text and shows a head with its token
//     labels (several per axis, not the one a view laid out while hidden had);
//   - the max-tokens box is bounded by the model's positions (the tiny GPT-2 has 512), and a text
//     longer than that says the model's limit cut it; a text cut by the box says so instead;
//   - File > Export weights while a model folder loads says to wait (the summary it would offer
//     is the model in place, not the one loading);
//   - the empty Experiments tab names the menu entry that opens an experiment, and that entry is
//     where it says (Run > Open an experiment...).
#include <QApplication>
#include <QDialog>
#include <QLabel>
#include <QMenuBar>
#include <QMessageBox>
#include <QRegularExpression>
#include <QSignalSpy>
#include <QStandardPaths>
#include <QTabWidget>
#include <QTest>
#include <QTimer>

#include "app/gui/comparison/comparison_controls.h"
#include "app/gui/inspector/inspector_view.h"
#include "app/gui/shell/main_window.h"
#include "tests/app/gui/gui_test_support.h"
#include "tests/support/hh_test.h"
#include "widgets/qcp.h"
#include "widgets/heatmap_view.h"

namespace test_open_model {

namespace {
const QString kModel = QStringLiteral(HH_FIXTURES_DIR) + QStringLiteral("/tiny-random-gpt2");

// Waits until the inspector shows a result of `tokens` tokens (any when -1) and its open head.
bool waitInspected(hh::gui::MainWindow& window, int tokens = -1) {
  auto* inspector = window.inspector();
  auto shown = [&] {
    const int n = inspector->result().length;
    return n > 0 && (tokens < 0 || n == tokens) && inspector->headMaps().length == n && !inspector->busy();
  };
  hh::test::spinMeasuringLatency(60000, shown);
  return shown();
}
}  // namespace

class TestOpenModel : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void initTestCase() { QStandardPaths::setTestModeEnabled(true); }

  void openingAModelShowsTheInspector() {
    hh::gui::MainWindow window;
    window.resize(1400, 900);
    window.show();
    QVERIFY(QTest::qWaitForWindowExposed(&window));
    window.showComparison();  // as if the window had reopened on its last tab
    QVERIFY(window.findChild<QTabWidget*>()->currentWidget() != window.inspector());
    QString text;
    for (int i = 0; i < 8; ++i) text += QStringLiteral("the cat sat on a mat ");
    window.inspector()->setText(text);
    QSignalSpy loaded(&window, &hh::gui::MainWindow::modelLoaded);
    window.openModel(kModel);
    QCOMPARE(window.findChild<QTabWidget*>()->currentWidget(), static_cast<QWidget*>(window.inspector()));
    QVERIFY(loaded.wait(30000));
    QVERIFY(waitInspected(window));
    const int tokens = window.inspector()->result().length;
    for (int i = 0; i < 10; ++i) QTest::qWait(20);  // queued replots
    const auto* view = window.inspector()->headView();
    const int x = static_cast<int>(view->plot()->xAxis->tickVectorLabels().size());
    const int y = static_cast<int>(view->plot()->yAxis->tickVectorLabels().size());
    qInfo("%d tokens: %d labels on the key axis, %d on the query axis", tokens, x, y);
    QVERIFY2(x >= 4 && y >= 4, qPrintable(QStringLiteral("%1 x %2").arg(x).arg(y)));
  }

  // The inspector's device and precision boxes: the model opens in bf16 (the line above the grid
  // says where it ran), and picking float32 loads it again and inspects it again.
  void precisionChoiceReloadsTheModel() {
    hh::gui::MainWindow window;
    window.resize(1400, 900);
    window.show();
    auto* box = window.inspector()->computeChoiceBox();
    box->setChoice({QStringLiteral("cpu"), QStringLiteral("bfloat16")});
    QSignalSpy loaded(&window, &hh::gui::MainWindow::modelLoaded);
    window.openModel(kModel);
    QVERIFY(loaded.wait(30000));
    QCOMPARE(loaded.takeFirst().at(0).toString(), QString());
    QVERIFY(waitInspected(window));
    QVERIFY2(window.inspector()->infoText().contains(QStringLiteral("ms on cpu, bfloat16")),
             qPrintable(window.inspector()->infoText()));
    box->setChoice({QStringLiteral("cpu"), QStringLiteral("float32")});
    Q_EMIT box->changed();  // what picking in the box does
    QVERIFY(loaded.wait(30000));
    QVERIFY(waitInspected(window));
    QVERIFY2(window.inspector()->infoText().contains(QStringLiteral("ms on cpu")) &&
                 !window.inspector()->infoText().contains(QStringLiteral("bfloat16")),
             qPrintable(window.inspector()->infoText()));
  }

  void aHeadInspectedHiddenIsLabelledWhenShown() {
    // A project opens its model without leaving the current tab (here before the window is even
    // shown): the inspector inspects hidden, and its head must be labelled once it is shown.
    hh::gui::MainWindow window;
    window.resize(1400, 900);
    window.showComparison();  // the window reopens on its last tab: the model is inspected before it is shown
    QString text;
    for (int i = 0; i < 8; ++i) text += QStringLiteral("the cat sat on a mat ");
    window.inspector()->setText(text);
    QSignalSpy loaded(&window, &hh::gui::MainWindow::modelLoaded);
    window.openModel(kModel, false);
    QVERIFY(loaded.wait(30000));
    QVERIFY(waitInspected(window));
    QVERIFY(window.findChild<QTabWidget*>()->currentWidget() != window.inspector());
    window.show();
    QVERIFY(QTest::qWaitForWindowExposed(&window));
    for (int i = 0; i < 5; ++i) QTest::qWait(20);
    window.findChild<QTabWidget*>()->setCurrentWidget(window.inspector());
    for (int i = 0; i < 10; ++i) QTest::qWait(20);
    const auto* view = window.inspector()->headView();
    const int x = static_cast<int>(view->plot()->xAxis->tickVectorLabels().size());
    const int y = static_cast<int>(view->plot()->yAxis->tickVectorLabels().size());
    qInfo("shown after inspecting hidden: %d labels on the key axis, %d on the query axis", x, y);
    QVERIFY2(x >= 4 && y >= 4, qPrintable(QStringLiteral("%1 x %2").arg(x).arg(y)));
  }

  void positionLimitIsSaid() {
    hh::gui::MainWindow window;
    window.resize(1400, 900);
    window.show();
    QString text;
    for (int i = 0; i < 120; ++i) text += QStringLiteral("the cat sat on a mat ");  // 1,082 tokens in the tiny GPT-2's vocabulary
    window.inspector()->setText(text);
    window.inspector()->setMaxTokens(4096);
    QSignalSpy loaded(&window, &hh::gui::MainWindow::modelLoaded);
    window.openModel(kModel);
    QVERIFY(loaded.wait(30000));
    QCOMPARE(window.inspector()->maxTokensLimit(), 512);
    QVERIFY(waitInspected(window, 512));
    qInfo("%s", qPrintable(window.inspector()->infoText()));
    QVERIFY2(window.inspector()->infoText().contains(QRegularExpression("cut from \\d+ tokens: the model has 512 positions")),
             qPrintable(window.inspector()->infoText()));
    // Cut by the box instead.
    window.inspector()->setMaxTokens(100);
    window.inspector()->inspect();
    QVERIFY(waitInspected(window, 100));
    QVERIFY2(window.inspector()->infoText().contains(QRegularExpression("cut from \\d+ tokens by the max-tokens setting")),
             qPrintable(window.inspector()->infoText()));
  }

  void exportWeightsWaitsForALoad() {
    // File > Export weights while a model folder loads: the session's summary is still the model
    // in place (the GUI thread does not wait for the load), so the dialog would offer that model's
    // name for the one the worker is loading. The workbench says to wait instead.
    hh::gui::MainWindow window;
    QSignalSpy loaded(&window, &hh::gui::MainWindow::modelLoaded);
    window.openModel(kModel);  // on the worker: loading until modelLoaded
    QAction* exportWeights = nullptr;
    for (QAction* menu : window.menuBar()->actions())
      if (menu->menu() && menu->text().remove('&') == QString("File"))
        for (QAction* action : menu->menu()->actions())
          if (action->text().remove('&').startsWith(QString("Export weights"))) exportWeights = action;
    QVERIFY(exportWeights);
    QString shown;  // what came up: a message box's text or a dialog's class
    QTimer poll;
    connect(&poll, &QTimer::timeout, this, [&] {
      QWidget* modal = QApplication::activeModalWidget();
      if (auto* box = qobject_cast<QMessageBox*>(modal)) {
        shown = box->text();
        box->done(QMessageBox::Ok);
      } else if (auto* dialog = qobject_cast<QDialog*>(modal)) {
        shown = QString::fromLatin1(dialog->metaObject()->className());
        dialog->reject();
      }
    });
    poll.start(20);
    exportWeights->trigger();  // returns once what it opened is closed
    poll.stop();
    QVERIFY2(shown.contains(QString("is loading")), qPrintable(shown));
    QVERIFY(loaded.count() > 0 || loaded.wait(30000));
  }

  void emptyExperimentsTabNamesItsMenu() {
    hh::gui::MainWindow window;
    window.showExperiments();
    QWidget* page = window.findChild<QTabWidget*>()->currentWidget();
    QString pointer;
    for (auto* label : page->findChildren<QLabel*>())
      if (label->text().contains("Open an experiment")) pointer = label->text();
    QVERIFY2(pointer.contains("Run > Open an experiment"), qPrintable(pointer));
    bool found = false;
    for (QAction* menu : window.menuBar()->actions()) {
      if (menu->text().remove('&') != "Run" || !menu->menu()) continue;
      for (QAction* action : menu->menu()->actions()) found |= action->text().remove('&') == QString("Open an experiment\u2026");
    }
    QVERIFY(found);
  }
};

HH_TEST_SUITE(TestOpenModel, "app.gui.open_model", &TestOpenModel::initTestCase,
              &TestOpenModel::openingAModelShowsTheInspector, &TestOpenModel::precisionChoiceReloadsTheModel,
              &TestOpenModel::aHeadInspectedHiddenIsLabelledWhenShown, &TestOpenModel::positionLimitIsSaid,
              &TestOpenModel::exportWeightsWaitsForALoad, &TestOpenModel::emptyExperimentsTabNamesItsMenu)

}  // namespace test_open_model

#if HH_HAVE_QTEST
#include "test_open_model.moc"
#endif
