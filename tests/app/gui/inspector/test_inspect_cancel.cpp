// app.gui.inspect_cancel: an inspection's progress and its cancellation.
//   - ModelSession on the tiny GPT-2 fixture previews every layer once, in order, with the layer
//     count, its thumbnails and measures as the result then holds them; the grid's numbers are
//     those of an inspection without a control;
//   - a cancel flag set before the start leaves the last inspection open (previousKept); set
//     after the first layer, it stops there ("cancelled after 1 of L layers") and nothing of it
//     can be opened (headMaps refuses) until the next inspection, which runs whole;
//   - a recall probe's previews carry its needle weights (scored before the first layer); its
//     scoring itself stops on the flag, the last inspection kept;
//   - the inspector's bar and Cancel show while an inspection waits or runs; Cancel stops it (the
//     worker held busy until then, so the flag is seen before the forward pass), the line above
//     the grid says so and the bar goes away; Inspect then runs whole and the bar counted every
//     layer; of two Inspects in a row only the second's result is shown; the open head stays open
//     through the next inspection; an inspection cancelled before it ran leaves the last one on
//     screen, its heads still open;
//   - the grid fills layer by layer: when the view has drawn its k-th layer, layers 0..k-1 have
//     their thumbnails and summaries, the later ones none yet, and the bar reads k; after a
//     finished inspection every cell holds the result's numbers.
#include <QLabel>
#include <QProgressBar>
#include <QPushButton>
#include <QSignalSpy>
#include <QStandardPaths>
#include <QTest>
#include <QThreadPool>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <future>
#include <memory>
#include <vector>

#include "app/gui/inspector/inspector_view.h"
#include "app/gui/inspector/model_session.h"
#include "tests/app/gui/inspector/inspector_test_support.h"
#include "tests/support/hh_test.h"
#include "widgets/head_grid.h"

namespace test_inspect_cancel {

namespace {

using namespace hh::test::inspector;  // NOLINT: the suites' shared fixtures

std::shared_ptr<hh::gui::ModelSession> loadedSession(hh::gui::ModelSummary* summary) {
  auto session = std::make_shared<hh::gui::ModelSession>();
  QString error;
  *summary = session->load(QString::fromStdString(kModel), &error);
  return error.isEmpty() ? session : nullptr;
}

// Equal value for value, a NaN (a masked cell) equal to a NaN.
template <typename T>
bool sameValues(const std::vector<T>& x, const std::vector<T>& y) {
  return std::equal(x.begin(), x.end(), y.begin(), y.end(),
                    [](T a, T b) { return a == b || (std::isnan(a) && std::isnan(b)); });
}

// Holds the pool's one thread until release(): what the worker is busy with before a request.
class BusyWorker {
 public:
  explicit BusyWorker(QThreadPool& pool) {
    pool.start([gate = gate_.get_future().share()] { gate.wait(); });
  }
  void release() { gate_.set_value(); }

 private:
  std::promise<void> gate_;
};

}  // namespace

class TestInspectCancel : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void initTestCase() { QStandardPaths::setTestModeEnabled(true); }

  void sessionReportsEachLayerAndStopsWhenCancelled() {
    hh::gui::ModelSummary summary;
    auto session = loadedSession(&summary);
    QVERIFY(session);
    const int layers = summary.layers;
    QVERIFY(layers >= 2);

    std::vector<hh::gui::LayerPreview> reported;
    hh::gui::InspectControl control;
    control.layerDone = [&](const hh::gui::LayerPreview& p) { reported.push_back(p); };
    const auto whole = session->inspect(kText, 4096, 16, control);
    QCOMPARE(whole.error, QString());
    QCOMPARE(int(reported.size()), layers);
    for (int l = 0; l < layers; ++l) {  // each layer once, in order, with what the result holds for it
      const auto& p = reported[size_t(l)];
      QCOMPARE(p.layer, l);
      QCOMPARE(p.done, l + 1);
      QCOMPARE(p.layers, layers);
      QCOMPARE(p.heads, whole.heads);
      QCOMPARE(p.thumbSize, whole.thumbSize);
      for (int h = 0; h < whole.heads; ++h) {
        const size_t i = size_t(l * whole.heads + h);
        QVERIFY(sameValues(p.thumbnails[size_t(h)], whole.thumbnails[i]));
        QCOMPARE(p.entropySoftmax[size_t(h)], whole.measures.entropySoftmax.values[i]);
        QVERIFY(std::isnan(p.kl[size_t(h)]));  // softmax layers: no linear map
      }
    }
    const auto plain = session->inspect(kText, 4096, 16);
    QCOMPARE(whole.thumbnails.size(), plain.thumbnails.size());
    for (size_t i = 0; i < whole.thumbnails.size(); ++i) QVERIFY(sameValues(whole.thumbnails[i], plain.thumbnails[i]));
    QVERIFY(sameValues(whole.measures.entropySoftmax.values, plain.measures.entropySoftmax.values));

    auto cancel = std::make_shared<std::atomic<bool>>(true);
    control.cancel = cancel;
    control.layerDone = {};
    const auto before = session->inspect(kText, 4096, 16, control);  // cancelled before it starts
    QVERIFY(before.cancelled && before.previousKept);
    QVERIFY2(before.error.contains(QStringLiteral("cancelled before it started")), qPrintable(before.error));
    QCOMPARE(session->headMaps(0, 0).error, QString());  // the last inspection stands

    *cancel = false;
    control.layerDone = [&](const hh::gui::LayerPreview& p) { *cancel = p.done == 1; };
    const auto stopped = session->inspect(kText, 4096, 16, control);
    QVERIFY(stopped.cancelled && !stopped.previousKept);
    QVERIFY2(stopped.error.contains(QStringLiteral("cancelled after 1 of %1 layers").arg(layers)),
             qPrintable(stopped.error));
    QCOMPARE(stopped.length, 0);
    QVERIFY(!session->headMaps(0, 0).error.isEmpty());  // nothing of it can be opened

    const auto again = session->inspect(kText, 4096, 16);
    QVERIFY(!again.cancelled);
    QCOMPARE(again.error, QString());
    QCOMPARE(session->headMaps(0, 0).error, QString());
  }

  void recallProbeScoringStopsAndPreviewsCarryTheNeedle() {
    hh::gui::ModelSummary summary;
    auto session = loadedSession(&summary);
    QVERIFY(session);
    std::vector<hh::gui::LayerPreview> reported;
    hh::gui::InspectControl control;
    control.layerDone = [&](const hh::gui::LayerPreview& p) { reported.push_back(p); };
    const auto probe = session->recallProbe(kText, QStringLiteral("passkey"), 48, 4, 16, control);
    QCOMPARE(probe.error, QString());
    QVERIFY(probe.recall);
    QCOMPARE(int(reported.size()), summary.layers);
    for (const auto& p : reported)  // the needle weights were scored before the first layer's preview
      for (int h = 0; h < p.heads; ++h) {
        const size_t i = size_t(p.layer * p.heads + h);
        QCOMPARE(p.needleSoftmax.at(size_t(h)), probe.recall->teacherMass.at(i));
        QCOMPARE(p.needleConverted.at(size_t(h)), probe.recall->convertedMass.at(i));
      }

    control.layerDone = {};
    control.cancel = std::make_shared<std::atomic<bool>>(true);
    const auto stopped = session->recallProbe(kText, QStringLiteral("passkey"), 48, 4, 16, control);
    QVERIFY(stopped.cancelled && stopped.previousKept);
    QVERIFY2(stopped.error.contains(QStringLiteral("while the probe's prompts were scored")),
             qPrintable(stopped.error));
    QCOMPARE(session->headMaps(0, 0).error, QString());  // the probe's first prompt still open
  }

  void theInspectorsCancelStopsItAndTheBarCounts() {
    hh::gui::ModelSummary summary;
    auto session = loadedSession(&summary);
    QVERIFY(session);
    QThreadPool pool;
    pool.setMaxThreadCount(1);
    {
      hh::gui::InspectorView view(session, &pool);
      view.show();
      view.modelLoaded(summary);
      view.setText(kText);
      auto* bar = view.findChild<QProgressBar*>(QStringLiteral("inspectProgress"));
      auto* cancel = view.findChild<QPushButton*>(QStringLiteral("cancelInspection"));
      QVERIFY(bar && cancel);
      QVERIFY(!bar->isVisible() && !cancel->isVisible());
      QSignalSpy inspected(&view, &hh::gui::InspectorView::inspected);

      BusyWorker busy(pool);
      view.inspect();
      QVERIFY(view.inspecting());
      QVERIFY(bar->isVisible() && cancel->isVisible() && cancel->isEnabled());
      QTest::mouseClick(cancel, Qt::LeftButton);
      QVERIFY(!cancel->isEnabled());
      busy.release();
      QVERIFY(inspected.wait(30000));
      QVERIFY2(view.infoText().contains(QStringLiteral("Cancelled before it started")), qPrintable(view.infoText()));
      QCOMPARE(view.result().length, 0);
      QVERIFY(!view.inspecting());
      QVERIFY(!bar->isVisible() && !cancel->isVisible());

      BusyWorker busyAgain(pool);
      view.inspect();
      view.inspect();  // the newer request stops the older one, which is never shown
      QCOMPARE(bar->value(), 0);
      busyAgain.release();
      QVERIFY(inspected.wait(30000));
      QVERIFY(!view.result().cancelled);
      QCOMPARE(view.result().error, QString());
      QVERIFY(view.result().length > 0);
      QCOMPARE(bar->maximum(), summary.layers);
      QCOMPARE(bar->value(), summary.layers);  // every layer counted before the result arrived
      QCOMPARE(inspected.count(), 2);          // the stale first request was dropped
      QVERIFY(!bar->isVisible());

      // The open head stays open through the next inspection.
      QSignalSpy shown(&view, &hh::gui::InspectorView::headShown);
      view.showHead(1, 1);
      QTRY_VERIFY_WITH_TIMEOUT(view.headMaps().layer == 1 && view.headMaps().head == 1 && !view.busy(), 30000);
      view.inspect();
      QVERIFY(inspected.wait(30000));
      QTRY_VERIFY_WITH_TIMEOUT(!view.busy(), 30000);
      QCOMPARE(view.headMaps().layer, 1);
      QCOMPARE(view.headMaps().head, 1);

      // Cancelled before it ran: the last inspection stays on screen and can be opened.
      const int length = view.result().length;
      BusyWorker busyOnceMore(pool);
      view.inspect();
      view.cancelInspection();
      busyOnceMore.release();
      QVERIFY(inspected.wait(30000));
      QTRY_VERIFY_WITH_TIMEOUT(!view.busy(), 30000);
      QVERIFY2(view.infoText().contains(QStringLiteral("still shows the last inspection")),
               qPrintable(view.infoText()));
      QCOMPARE(view.result().length, length);
      QCOMPARE(view.grid()->layers(), summary.layers);
      QCOMPARE(session->headMaps(1, 1).error, QString());
      pool.waitForDone();
    }
  }

  void theGridFillsLayerByLayer() {
    hh::gui::ModelSummary summary;
    auto session = loadedSession(&summary);
    QVERIFY(session);
    QVERIFY(summary.layers >= 2);
    QThreadPool pool;
    pool.setMaxThreadCount(1);
    hh::gui::InspectorView view(session, &pool);
    view.show();
    view.modelLoaded(summary);
    view.setText(kText);
    auto* bar = view.findChild<QProgressBar*>(QStringLiteral("inspectProgress"));
    QVERIFY(bar);
    // Checked inside the signal, on the GUI thread: later layers' previews wait in the queue.
    std::vector<QString> wrong;
    int seen = 0;
    connect(&view, &hh::gui::InspectorView::layerPreviewed, this, [&](int done, int layers) {
      ++seen;
      const auto* grid = view.grid();
      if (done != seen || layers != summary.layers || bar->value() != done || grid->layers() != layers)
        wrong.push_back(
            QStringLiteral("preview %1: done %2 of %3, bar %4").arg(seen).arg(done).arg(layers).arg(bar->value()));
      for (int l = 0; l < grid->layers(); ++l)
        for (int h = 0; h < grid->heads(); ++h) {
          const bool drawn = !grid->thumbnail(l, h).isNull() && std::isfinite(grid->summary(l, h));
          if (drawn != (l < done))
            wrong.push_back(QStringLiteral("after layer %1: cell (%2, %3) %4")
                                .arg(done)
                                .arg(l)
                                .arg(h)
                                .arg(drawn ? QStringLiteral("already drawn") : QStringLiteral("not drawn")));
        }
    });
    QSignalSpy inspected(&view, &hh::gui::InspectorView::inspected);
    view.inspect();
    QVERIFY(inspected.wait(30000));
    QVERIFY2(wrong.empty(), qPrintable(wrong.empty() ? QString() : wrong.front()));
    QCOMPARE(seen, summary.layers);
    const auto& result = view.result();
    for (int l = 0; l < summary.layers; ++l)
      for (int h = 0; h < result.heads; ++h)
        QCOMPARE(view.grid()->summary(l, h), result.measures.entropySoftmax.values[size_t(l * result.heads + h)]);
    pool.waitForDone();
  }
};

HH_TEST_SUITE(TestInspectCancel, "app.gui.inspect_cancel", &TestInspectCancel::initTestCase,
              &TestInspectCancel::sessionReportsEachLayerAndStopsWhenCancelled,
              &TestInspectCancel::recallProbeScoringStopsAndPreviewsCarryTheNeedle,
              &TestInspectCancel::theInspectorsCancelStopsItAndTheBarCounts,
              &TestInspectCancel::theGridFillsLayerByLayer)

}  // namespace test_inspect_cancel

#if HH_HAVE_QTEST
#include "test_inspect_cancel.moc"
#endif
