// app.gui.generation_view: the generation panel with the GPT-2 fixture as the original and a
// converted copy (Hedgehog, decay rule) as the converted model: both panes stream text past the
// prompt, the latency plot gets one point per decoded token for each model, the converted
// model's cache memory stays flat while the original's KV cache grows, the state-norm heatmap has
// one row per layer/head and one column per token, and the decay plot one curve per layer.
// Stop ends a long run promptly, with "cancelled". A folder that is not a model is refused with
// a message naming it, and Generate stays disabled with nothing loaded. Loading runs off the GUI
// thread, and a Generate asked for meanwhile starts once the models are in. The folders, prompt and
// settings asked for are there again in the next view.
#include <QPushButton>
#include <QSignalSpy>
#include <QTest>

#include <chrono>

#include "app/gui/generation/generation_view.h"
#include "engine/models/model_io.h"
#include "tests/support/temp_dir.h"
#include "tests/support/hh_test.h"
#include "widgets/curve_plot.h"
#include "widgets/heatmap_view.h"

namespace test_generation_view {

namespace {
const std::string kFixture = std::string(HH_FIXTURES_DIR) + "/tiny-random-gpt2";

std::string convertedCopy(const hh::test::TempDir& dir) {
  auto model = hh::models::loadModel(kFixture);
  hh::attn::LinearAttentionConfig linear;
  linear.featureMap.kind = hh::attn::FeatureMapKind::Hedgehog;
  linear.rule.rule = hh::attn::UpdateRule::Decay;
  model->setAttentionPlan(hh::models::AttentionPlan::uniform(model->layerCount(), linear));
  const auto out = dir.file("converted");
  hh::models::saveModel(*model, out, kFixture);
  return out;
}
// Greedy decoding of `tokens` tokens after "The history of" (the fixture's random weights never
// pick its end-of-text token greedily), set on `view` with its prompt.
hh::gui::GenerationSettings greedyRun(hh::gui::GenerationView& view, int tokens) {
  hh::gui::GenerationSettings s;
  s.prompt = QStringLiteral("The history of");
  s.maxTokens = tokens;
  s.temperature = 0;
  view.setSettings(s);
  view.setPrompt(s.prompt);
  return s;
}
}  // namespace

class TestGenerationView : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void initTestCase() { setenv("HH_NUM_THREADS", "1", 0); }

  void streamsBothModelsWithLivePlots() {
    hh::test::TempDir dir("generation_view");
    hh::gui::GenerationView view;
    view.resize(1400, 900);
    view.show();
    view.setFolders(QString::fromStdString(kFixture), QString::fromStdString(convertedCopy(dir)));
    view.loadModels();
    QVERIFY(view.waitForLoad(60000));
    const auto s = greedyRun(view, 20);
    view.generate();
    QVERIFY(view.running());
    QVERIFY(view.waitForRun(60000));
    QCOMPARE(int(view.summaries().size()), 2);
    for (int side = 0; side < 2; ++side) {
      const auto& sum = view.summaries()[size_t(side)];
      QCOMPARE(sum.stopReason, QStringLiteral("max tokens"));
      QCOMPARE(sum.tokens, 20);
      QVERIFY(view.outputText(side).startsWith(s.prompt));
      QVERIFY(view.outputText(side).size() > s.prompt.size());
      QCOMPARE(view.latencyPlot()->pointCount(side), 19);  // the first token's time is the prefill
      QCOMPARE(view.memoryPlot()->pointCount(side), 20);
    }
    const auto originalMemory = view.memoryPlot()->seriesValues(0);
    const auto convertedMemory = view.memoryPlot()->seriesValues(1);
    QVERIFY(originalMemory.back() > originalMemory.front());     // KV cache grows (reserved: from the first token on)
    QCOMPARE(convertedMemory.front(), convertedMemory.back());  // recurrent state: flat
    QCOMPARE(view.stateView()->rows(), 5 * 4);  // 5 layers x 4 heads
    QCOMPARE(view.stateView()->cols(), 20);
    QVERIFY(view.decayPlot()->isVisible());
    QCOMPARE(view.decayPlot()->seriesCount(), 5);
  }

  // The precision box: in bf16 the original's KV cache takes half the bytes of fp32's, the text
  // still streams, and the pane's header says where the model decodes.
  void bfloat16HalvesTheKvCache() {
    std::vector<qint64> peaks;
    for (const char* dtype : {"float32", "bfloat16"}) {
      hh::gui::GenerationView view;
      view.computeChoiceBox()->setChoice({QStringLiteral("cpu"), QString::fromLatin1(dtype)});
      view.setFolders(QString::fromStdString(kFixture), QString());
      view.loadModels();
      QVERIFY(view.waitForLoad(60000));
      const auto s = greedyRun(view, 12);
      view.generate();
      QVERIFY(view.waitForRun(60000));
      QCOMPARE(view.summaries()[0].tokens, 12);
      QVERIFY(view.outputText(0).size() > s.prompt.size());
      peaks.push_back(view.summaries()[0].peakCacheBytes);
    }
    qInfo("KV cache peak: float32 %lld bytes, bfloat16 %lld", (long long)peaks[0], (long long)peaks[1]);
    QCOMPARE(peaks[1] * 2, peaks[0]);
  }

  void stopEndsALongRunPromptly() {
    // The demo teacher (256 positions, a few ms a token): a run of 250 tokens takes over a second.
    hh::gui::GenerationView view;
    view.setFolders(QStringLiteral(HH_SOURCE_DIR "/projects/demo/teacher"), QString());
    view.loadModels();
    QVERIFY(view.waitForLoad(60000));
    hh::gui::GenerationSettings s;
    s.prompt = QStringLiteral("The");
    s.maxTokens = 250;
    s.stopAtEos = false;
    view.setSettings(s);
    view.setPrompt(s.prompt);
    view.generate();
    QTRY_VERIFY_WITH_TIMEOUT(view.memoryPlot()->pointCount(0) >= 5, 20000);
    QVERIFY(view.running());
    const auto t0 = std::chrono::steady_clock::now();
    view.stop();
    QVERIFY(view.waitForRun(5000));
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    qInfo("stopped %.1f ms after Stop", ms);
    QVERIFY(ms < 1000);
    QCOMPARE(view.summaries()[0].stopReason, QStringLiteral("cancelled"));
  }

  void remembersFoldersAndSettings() {
    {
      hh::gui::GenerationView first;
      first.setFolders(QStringLiteral("/nowhere/original"), QStringLiteral("/nowhere/converted"));
      hh::gui::GenerationSettings s;
      s.maxTokens = 77;
      s.topK = 5;
      first.setSettings(s);
      first.setPrompt(QStringLiteral("remember me"));
      first.generate();  // nothing loaded: refused, but what was asked is stored
      QVERIFY(first.waitForRun(5000));
    }
    hh::gui::GenerationView second;
    QCOMPARE(second.settings().maxTokens, 77);
    QCOMPARE(second.settings().topK, 5);
    QCOMPARE(second.settings().prompt, QStringLiteral("remember me"));
  }

  // Loading runs off the GUI thread: loadModels() returns at once with Load and Generate
  // disabled, and a Generate asked for meanwhile starts once the models are in. A softmax model
  // on the converted side decodes with a KV cache, and the state view says it has no state.
  void loadsOffTheGuiThread() {
    hh::gui::GenerationView view;
    view.setFolders(QString::fromStdString(kFixture), QString::fromStdString(kFixture));
    QSignalSpy loaded(&view, &hh::gui::GenerationView::modelsLoaded);
    view.loadModels();
    QVERIFY(view.loading());
    for (auto* b : view.findChildren<QPushButton*>())
      if (b->text() == QStringLiteral("Load") || b->text() == QStringLiteral("Generate")) QVERIFY(!b->isEnabled());
    greedyRun(view, 5);
    view.generate();  // asked for while loading
    QVERIFY(!view.running());
    QVERIFY(view.waitForLoad(60000));
    QCOMPARE(loaded.count(), 1);
    QCOMPARE(loaded.at(0).at(0).toString(), QString());
    QVERIFY(view.running());
    QVERIFY(view.waitForRun(60000));
    QCOMPARE(view.summaries()[0].tokens, 5);
    QCOMPARE(view.summaries()[1].tokens, 5);
    QCOMPARE(view.outputText(1), view.outputText(0));  // greedy, the same weights
    QVERIFY(view.stateView()->emptyTextShown());
    QVERIFY2(view.stateView()->emptyText().contains(QStringLiteral("no recurrent state")),
             qPrintable(view.stateView()->emptyText()));
    for (auto* b : view.findChildren<QPushButton*>())
      if (b->text() == QStringLiteral("Load") || b->text() == QStringLiteral("Generate")) QVERIFY(b->isEnabled());
  }

  void badFolderIsRefused() {
    hh::test::TempDir dir("generation_bad");
    hh::gui::GenerationView view;
    QString message;
    connect(&view, &hh::gui::GenerationView::statusMessage, [&](const QString& m) { message = m; });
    view.setFolders(QString::fromStdString(dir.path()), QString());
    view.loadModels();
    QVERIFY(view.waitForLoad(60000));
    QVERIFY2(message.contains(QString::fromStdString(dir.path())), qPrintable(message));
    const auto buttons = view.findChildren<QPushButton*>();
    for (auto* b : buttons)
      if (b->text() == QStringLiteral("Generate")) QVERIFY(!b->isEnabled());
  }
};

HH_TEST_SUITE(TestGenerationView, "app.gui.generation_view", &TestGenerationView::initTestCase,
              &TestGenerationView::streamsBothModelsWithLivePlots, &TestGenerationView::bfloat16HalvesTheKvCache,
              &TestGenerationView::stopEndsALongRunPromptly, &TestGenerationView::remembersFoldersAndSettings,
              &TestGenerationView::loadsOffTheGuiThread, &TestGenerationView::badFolderIsRefused)

}  // namespace test_generation_view

#if HH_HAVE_QTEST
#include "test_generation_view.moc"
#endif
