// app.gui.inspector: the attention inspector on a real model.
//   - ModelSession on the tiny GPT-2 fixture: per-head softmax entropy equals the engine's probe
//     table (attention_probe, the jobs' path) to 1e-6; a head's full map equals the softmax
//     weights the model itself captures, its scores equal q.k/sqrt(D) from the captured q, k;
//   - converted layers' maps and the comparison's "trained" map: app.gui.converted_maps;
//   - the main window opens the model, inspects the text, fills the layer x head grid, opens a
//     head large; hovering a cell reads that query/key token pair, its weight and q.k/sqrt(d);
//     the brightest cell of the large map is drawn in the colour map's top colour;
//   - the recall probe: the session hides a passkey in the text, the inspected first prompt holds
//     the needle twice (each answer's next token is the needle token at its target), the needle
//     weights are in [0, 1] and differ between softmax and the converted layers; through the
//     window, "Hide a needle" colours every frame by the converted heads' needle weight;
//   - while the worker holds the session (a 4096-token inspection), loaded() and summary() answer
//     within 50 ms: the GUI thread never waits on engine work for them;
//   - 4096 tokens on a tiny Llama (RoPE, 4096 positions): inspected in the background while the
//     GUI thread keeps ticking (longest gap < 250 ms: no freeze), the large map reduces for display.
#include <torch/types.h>

#include <QApplication>
#include <QComboBox>
#include <QElapsedTimer>
#include <QLabel>
#include <QMouseEvent>
#include <QSignalSpy>
#include <QStandardPaths>
#include <QTest>
#include <QThread>
#include <QTimer>

#include <atomic>
#include <cmath>
#include <thread>

#include "app/gui/comparison/comparison_controls.h"
#include "app/gui/comparison/comparison_view.h"
#include "app/gui/comparison/head_comparison.h"
#include "app/gui/inspector/inspector_view.h"
#include "app/gui/inspector/model_session.h"
#include "app/gui/shell/main_window.h"
#include "engine/attention/reference.h"
#include "engine/attention/softmax_attention.h"
#include "engine/config/attention_types.h"
#include "engine/jobs/attention_probe.h"
#include "engine/jobs/train_job.h"
#include "engine/models/model_io.h"
#include "engine/tokenizers/tokenizer.h"
#include "tests/app/gui/gui_test_support.h"
#include "tests/app/gui/inspector/inspector_test_support.h"
#include "tests/support/hh_test.h"
#include "tests/support/temp_dir.h"
#include "widgets/colormap.h"
#include "widgets/head_grid.h"
#include "widgets/heatmap_view.h"

#include "widgets/qcp.h"

namespace test_inspector {

namespace {

namespace m = hh::models;
using namespace hh::test::inspector;  // NOLINT: the suites' shared fixtures

}  // namespace

class TestInspector : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void initTestCase() { QStandardPaths::setTestModeEnabled(true); }

  void sessionMatchesTheEngine() {
    hh::gui::ModelSession session;
    QString error;
    const auto summary = session.load(QString::fromStdString(kModel), &error);
    QVERIFY2(error.isEmpty(), qPrintable(error));
    QCOMPARE(summary.layers, 5);
    QCOMPARE(summary.heads, 4);
    QVERIFY(!summary.converted());
    const auto result = session.inspect(kText, 4096, 16);
    QVERIFY2(result.error.isEmpty(), qPrintable(result.error));

    // Reference: the engine's own tokenizer, forward capture and probe tables.
    auto model = m::loadModel(kModel);
    const auto tokenizer = hh::tok::loadTokenizer(kModel);
    const auto ids = tokenizer->encode(kText.toStdString(), true);
    QCOMPARE(result.length, int(ids.size()));
    QCOMPARE(result.tokens.size(), qsizetype(ids.size()));
    const auto idTensor = torch::tensor(ids, torch::kLong).unsqueeze(0);
    const auto probe = hh::jobs::probeAttention(*model, idTensor, {}, hh::jobs::ProbeRequest{});
    const auto& entropy = probe.heads.entropySoftmax;
    for (int i = 0; i < 5 * 4; ++i) QVERIFY(std::abs(result.measures.entropySoftmax.values[size_t(i)] - entropy.values[size_t(i)]) < 1e-6);
    for (double kl : result.measures.kl.values) QVERIFY(std::isnan(kl));  // softmax layers: nothing to compare

    m::CaptureRequest capture;
    capture.queriesKeys = true;
    m::ForwardOptions options;
    options.capture = &capture;
    options.teacher = true;
    const auto out = model->forward(idTensor, options);
    const auto maps = session.headMaps(3, 2);
    QVERIFY2(maps.error.isEmpty(), qPrintable(maps.error));
    QVERIFY(maps.linear == nullptr);
    const auto& c = out.captures[3];
    const double weightErr = maxAbsDiff(*maps.softmax, c.softmaxWeights[0][2]);
    const double scoreErr = maxAbsDiff(maps.scores, hh::attn::attentionScores(c.queries, c.keys)[0][2]);
    qInfo("head (3, 2): max |weight diff| %.3g, max |score diff| %.3g", weightErr, scoreErr);
    QVERIFY(weightErr < 1e-6);
    QVERIFY(scoreErr < 1e-5);
    QVERIFY(maps.softmaxTop > 0 && maps.softmaxTop <= 1.0);
    QVERIFY(!session.headMaps(5, 0).error.isEmpty());  // out of range: an error, not a crash
  }

  void exportsWeightsWithTheEngineWriter() {
    hh::test::TempDir dir("inspector_export");
    const auto folder = writeConverted(dir);
    hh::gui::ModelSession session;
    QString error;
    session.load(QString::fromStdString(folder), &error);
    QVERIFY2(error.isEmpty(), qPrintable(error));
    const QString half = QString::fromStdString(dir.file("half"));
    QVERIFY2(session.exportModel(half, "float16", false).isEmpty(), "float16 export failed");
    // The dialog's adapters default: a file in a folder that does not exist yet.
    const QString adapters = QString::fromStdString(dir.file("new-export/adapters.safetensors"));
    const QString adaptersError = session.exportModel(adapters, "float32", true);
    QVERIFY2(adaptersError.isEmpty(), qPrintable(adaptersError));
    // The loaded model's own folder is refused: it would replace the weights being shown.
    QVERIFY(session.exportModel(QString::fromStdString(folder) + "/", "float16", false)
                .contains("is the model folder being exported"));
    // Reload both: the float16 folder is close to the original, the adapters re-applied exact.
    auto original = m::loadModel(folder);
    auto reloaded = m::loadModel(half.toStdString());
    auto base = m::loadModel(kModel);
    m::loadAdaptersFile(*base, adapters.toStdString());
    const auto ids = torch::randint(1000, {1, 12});
    at::NoGradGuard noGrad;
    const auto ref = original->forward(ids).logits;
    const double halfErr = (reloaded->forward(ids).logits - ref).abs().max().item<double>();
    const double adapterErr = (base->forward(ids).logits - ref).abs().max().item<double>();
    qInfo("exported: float16 max |logit diff| %.3g, adapters re-applied %.3g", halfErr, adapterErr);
    QVERIFY(halfErr < 1e-2);
    QVERIFY(adapterErr == 0.0);
    // A softmax model has no adapters: a clear refusal.
    hh::gui::ModelSession plain;
    plain.load(QString::fromStdString(kModel), &error);
    QVERIFY(plain.exportModel(QString::fromStdString(dir.file("none.safetensors")), "float32", true).contains("no linear"));
  }

  void windowInspectsAndReadsTheHoveredPair() {
    hh::gui::MainWindow window;
    window.resize(1400, 900);
    window.show();
    QSignalSpy loaded(&window, &hh::gui::MainWindow::modelLoaded);
    window.inspector()->setText(kText);
    window.openModel(QString::fromStdString(kModel));
    QVERIFY(loaded.wait(30000));
    QVERIFY2(loaded.at(0).at(0).toString().isEmpty(), qPrintable(loaded.at(0).at(0).toString()));
    auto* inspector = window.inspector();
    QTRY_VERIFY_WITH_TIMEOUT(inspector->result().length > 0 && !inspector->busy(), 30000);
    QCOMPARE(inspector->grid()->layers(), 5);
    QCOMPARE(inspector->grid()->heads(), 4);
    QVERIFY(!inspector->grid()->thumbnail(4, 3).isNull());

    QSignalSpy shown(inspector, &hh::gui::InspectorView::headShown);
    inspector->showHead(2, 1);
    QVERIFY(shown.wait(10000));
    auto* view = inspector->headView();
    const int t = inspector->result().length;
    QCOMPARE(view->rows(), t);
    view->replotNow();

    // Hover a pair: the readout names both tokens, the weight and q.k/sqrt(d).
    const int row = t - 1, col = 2;
    QSignalSpy hovered(view, &hh::widgets::HeatmapView::cellHovered);
    const QPointF at = view->cellCenter(row, col) - QPointF(view->plot()->pos());
    QMouseEvent move(QEvent::MouseMove, at, view->plot()->mapToGlobal(at), Qt::NoButton, Qt::NoButton, Qt::NoModifier);
    QCoreApplication::sendEvent(view->plot(), &move);
    QCOMPARE(hovered.count(), 1);
    QCOMPARE(hovered.at(0).at(0).toInt(), row);
    QCOMPARE(hovered.at(0).at(1).toInt(), col);
    const auto& maps = inspector->headMaps();
    const size_t i = size_t(row) * size_t(t) + size_t(col);
    QCOMPARE(hovered.at(0).at(2).toDouble(), double((*maps.softmax)[i]));
    // The score shown is q.k/sqrt(d) of that pair: recompute it from the model's own capture.
    QTRY_VERIFY(view->scoreAt(row, col).has_value());
    {
      auto model = m::loadModel(kModel);
      const auto tokenizer = hh::tok::loadTokenizer(kModel);
      const auto ids = torch::tensor(tokenizer->encode(kText.toStdString(), true), torch::kLong).unsqueeze(0);
      m::CaptureRequest capture;
      capture.queriesKeys = true;
      m::ForwardOptions options;
      options.capture = &capture;
      options.teacher = true;
      const auto c = model->forward(ids, options).captures[2];
      const double expected = hh::attn::attentionScores(c.queries, c.keys)[0][1][row][col].item<double>();
      QVERIFY(std::abs(double(*view->scoreAt(row, col)) - expected) < 1e-5);
    }
    const QString text = view->readoutText(row, col);
    QVERIFY2(text.contains(inspector->result().tokens[row].toHtmlEscaped()) &&
                 text.contains(inspector->result().tokens[col].toHtmlEscaped()) && text.contains(QStringLiteral("q\u00b7k")),
             qPrintable(text));

    // The brightest cell is drawn in viridis' top colour (the scale is clipped at p99, so the
    // maximum is at or above the top).
    size_t best = 0;
    const auto& softmax = *maps.softmax;
    for (size_t j = 0; j < softmax.size(); ++j)
      if (!std::isnan(softmax[j]) && softmax[j] > softmax[best]) best = j;
    const QImage image = view->grab().toImage();
    const QPointF c = view->cellCenter(int(best / size_t(t)), int(best % size_t(t)));
    const QColor drawn = image.pixelColor(c.toPoint());
    const QColor top = hh::widgets::viridisAt(1.0);
    QVERIFY2(std::abs(drawn.red() - top.red()) + std::abs(drawn.green() - top.green()) + std::abs(drawn.blue() - top.blue()) < 30,
             qPrintable(QStringLiteral("drawn %1, top %2").arg(drawn.name(), top.name())));

    // "Compare feature maps on this head" opens the comparison on the model head.
    QSignalSpy ready(&window, &hh::gui::MainWindow::comparisonReady);
    Q_EMIT inspector->compareRequested(2, 1);
    QTRY_VERIFY_WITH_TIMEOUT(window.comparisonView()->result().source.startsWith("layer 2, head 1"), 20000);
    QCOMPARE(window.comparisonView()->result().length, t);
    QVERIFY(window.comparisonView()->mapCount() >= 2);
  }

  void recallProbeColoursHeadsByTheNeedle() {
    hh::test::TempDir dir("inspector_recall");
    const auto converted = QString::fromStdString(writeConverted(dir));
    hh::gui::ModelSession session;
    QString error;
    QVERIFY(!session.load(converted, &error).folder.isEmpty());
    const auto r = session.recallProbe(kText, QStringLiteral("passkey"), 48, 4);
    QVERIFY2(r.error.isEmpty(), qPrintable(r.error));
    QVERIFY(r.recall);
    QCOMPARE(r.length, 48);
    const auto& p = *r.recall;
    QCOMPARE(int(p.teacherMass.size()), r.layers * r.heads);
    QCOMPARE(p.answerPositions.size(), size_t(4));  // needle 6, cue 2
    for (size_t i = 0; i < p.answerPositions.size(); ++i)
      QCOMPARE(r.tokens[p.answerPositions[i] + 1], r.tokens[p.needlePositions[i]]);
    bool differs = false;
    for (size_t i = 0; i < p.teacherMass.size(); ++i) {
      QVERIFY(p.teacherMass[i] >= 0 && p.teacherMass[i] <= 1 && p.convertedMass[i] >= 0 && p.convertedMass[i] <= 1);
      differs = differs || p.teacherMass[i] != p.convertedMass[i];
    }
    QVERIFY(differs);
    QVERIFY(p.teacherAccuracy >= 0 && p.teacherAccuracy <= 1);

    hh::gui::MainWindow window;
    window.show();
    QSignalSpy loaded(&window, &hh::gui::MainWindow::modelLoaded);
    window.openModel(converted);
    QVERIFY(loaded.wait(30000));
    auto* inspector = window.inspector();
    QTRY_VERIFY_WITH_TIMEOUT(inspector->result().length > 0 && !inspector->busy(), 30000);
    inspector->setText(kText);
    inspector->runRecallProbe();
    QTRY_VERIFY_WITH_TIMEOUT(inspector->result().recall && !inspector->busy(), 30000);
    const auto& shown = *inspector->result().recall;
    QVERIFY(inspector->infoText().contains(QStringLiteral("passkey at 256 tokens")));
    for (int l = 0; l < inspector->grid()->layers(); ++l)
      for (int h = 0; h < inspector->grid()->heads(); ++h)
        QCOMPARE(inspector->grid()->summary(l, h), shown.convertedMass[size_t(l * inspector->grid()->heads() + h)]);
    // The legend's words follow what the frames show: an entropy is sharp or diffuse, not good or bad.
    QCOMPARE(inspector->grid()->legendWords(), QStringList({"most", "least"}));
    auto* colourBy = inspector->findChild<QComboBox*>(QStringLiteral("colourBy"));
    QVERIFY(colourBy != nullptr);
    colourBy->setCurrentIndex(0);
    QCOMPARE(inspector->grid()->legendWords(), QStringList({"sharp", "diffuse"}));
    colourBy->setCurrentIndex(1);
    QCOMPARE(inspector->grid()->legendWords(), QStringList({"best", "worst"}));
  }

  void loadedAndSummaryDoNotWaitForTheWorker() {
    // The GUI thread asks loaded() and summary() (Inspect, File > Export weights) while the worker
    // holds the session for seconds (a long inspection here; a big model's load likewise).
    hh::test::TempDir dir("inspector_busy");
    const auto folder = QString::fromStdString(writeLongLlama(dir));
    auto session = std::make_shared<hh::gui::ModelSession>();
    QString error;
    QCOMPARE(session->load(folder, &error).folder, folder);
    const QString text = longText();
    std::atomic<bool> done{false};
    hh::gui::InspectResult result;
    std::thread worker([&] {
      result = session->inspect(text, 4096);
      done = true;
    });
    // Ask as the GUI thread would, every 5 ms until the inspection ends; the longest call counts.
    QElapsedTimer call;
    qint64 worst = 0;
    int asked = 0;
    bool loaded = true;
    hh::gui::ModelSummary summary;
    while (!done) {
      call.start();
      loaded = loaded && session->loaded();
      summary = session->summary();
      worst = std::max(worst, call.elapsed());
      ++asked;
      QThread::msleep(5);
    }
    worker.join();
    QCOMPARE(result.error, QString());
    QCOMPARE(result.length, 4096);
    QVERIFY(loaded);
    QCOMPARE(summary.folder, folder);
    QCOMPARE(summary.layers, 2);
    QVERIFY2(worst < 50, qPrintable(QStringLiteral("loaded() and summary() waited up to %1 ms during an inspection "
                                                   "of %2 ms (asked %3 times)")
                                        .arg(worst)
                                        .arg(result.milliseconds)
                                        .arg(asked)));
    QVERIFY2(asked >= 10, qPrintable(QStringLiteral("asked only %1 times during the inspection").arg(asked)));
  }

  void fourThousandTokensStayResponsive() {
    hh::test::TempDir dir("inspector_long");
    const auto folder = writeLongLlama(dir);

    hh::gui::MainWindow window;
    window.resize(1400, 900);
    window.show();
    window.inspector()->setText(longText());
    window.inspector()->setMaxTokens(4096);
    QSignalSpy loaded(&window, &hh::gui::MainWindow::modelLoaded);
    window.openModel(QString::fromStdString(folder));
    QVERIFY(loaded.wait(30000));
    QElapsedTimer timer;
    timer.start();
    auto* inspector = window.inspector();
    QElapsedTimer shownFor;
    const double worst = hh::test::spinMeasuringLatency(120000, [&] {
      const bool shown = inspector->result().length == 4096 && inspector->headMaps().length == 4096 && !inspector->busy();
      if (!shown) return false;
      if (!shownFor.isValid()) shownFor.start();
      return shownFor.elapsed() > 500;  // and half a second more: the large map's first reduce and paint
    });
    QCOMPARE(inspector->result().length, 4096);
    QVERIFY(inspector->result().truncated);
    QCOMPARE(inspector->headView()->rows(), 4096);
    QVERIFY(inspector->headView()->displaySize().width() <= hh::widgets::HeatmapView::kMaxDisplayCells);
    qInfo("4096 tokens: inspected and head shown in %lld ms (inspect %.0f ms, of which forward %.0f; head maps %.0f ms); "
          "longest GUI-thread gap %.1f ms",
          timer.elapsed(), inspector->result().milliseconds, inspector->result().forwardMilliseconds,
          inspector->headMaps().milliseconds, worst);
    // No freeze: the one long GUI-thread step is handing the 16.8 M-value map to the view, shared,
    // not copied (range and block reduction: 47-69 ms on 2 vCPUs; with the 67 MB copy it was
    // 238 ms, docs/workbench.md); everything else runs on the worker.
    QVERIFY2(worst < 200.0, qPrintable(QString::number(worst)));
  }
};

HH_TEST_SUITE(TestInspector, "app.gui.inspector", &TestInspector::initTestCase, &TestInspector::sessionMatchesTheEngine,
              &TestInspector::exportsWeightsWithTheEngineWriter, &TestInspector::windowInspectsAndReadsTheHoveredPair,
              &TestInspector::recallProbeColoursHeadsByTheNeedle, &TestInspector::loadedAndSummaryDoNotWaitForTheWorker,
              &TestInspector::fourThousandTokensStayResponsive)

}  // namespace test_inspector

#if HH_HAVE_QTEST
#include "test_inspector.moc"
#endif
