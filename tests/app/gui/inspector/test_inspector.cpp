// app.gui.inspector: the attention inspector and the comparison on a real model head.
//   - ModelSession on the tiny GPT-2 fixture: per-head softmax entropy equals the engine's probe
//     table (attention_probe, the jobs' path) to 1e-6; a head's full map equals the softmax
//     weights the model itself captures, its scores equal q.k/sqrt(D) from the captured q, k;
//   - a converted (Hedgehog) folder: per-head KL is finite, the head's linear map equals the
//     model's captured linear weights, and the comparison's "trained" map on that head gives
//     the same KL as the inspector (two paths through the engine);
//   - a softmax layer of a partly converted model compares without "trained" (noted in the
//     source); gated, delta, decay and window layers show their own linear maps (equal to the
//     model's captured weights, the gates reading the layer's input), with KL, and the
//     comparison's "trained" map is that map (a delta layer's map notes its signed weights, a
//     decay layer's its missing normaliser and value-side gate);
//   - the main window opens the model, inspects the text, fills the layer x head grid, opens a
//     head large; hovering a cell reads that query/key token pair, its weight and q.k/sqrt(d);
//     the brightest cell of the large map is drawn in the colour map's top colour;
//   - the recall probe: the session hides a passkey in the text, the inspected first prompt holds
//     the needle twice (each answer's next token is the needle token at its target), the needle
//     weights are in [0, 1] and differ between softmax and the converted layers; through the
//     window, "Hide a needle" colours every frame by the converted heads' needle weight;
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
#include <QTimer>

#include <cmath>

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
#include "tests/support/hh_test.h"
#include "tests/support/temp_dir.h"
#include "widgets/colormap.h"
#include "widgets/head_grid.h"
#include "widgets/heatmap_view.h"

#include "widgets/qcp.h"

namespace test_inspector {

namespace {

namespace m = hh::models;
const std::string kModel = std::string(HH_FIXTURES_DIR) + "/tiny-random-gpt2";
const std::string kGpt2Tokenizer = std::string(HH_FIXTURES_DIR) + "/gpt2-tokenizer";
const QString kText = QStringLiteral("The quick brown fox jumps over the lazy dog. It was not tired at all.");

// The tiny fixture with every layer converted to Hedgehog (feature maps nudged off the identity
// so that the trained map differs from an untrained one), saved as a model folder.
std::string writeConverted(const hh::test::TempDir& dir) {
  auto model = m::loadModel(kModel);
  hh::attn::LinearAttentionConfig lc;
  lc.featureMap.kind = hh::attn::FeatureMapKind::Hedgehog;
  model->setAttentionPlan(m::AttentionPlan::uniform(model->layerCount(), lc));
  torch::manual_seed(3);
  {
    at::NoGradGuard noGrad;
    for (auto& [name, t] : model->adapterTensors()) t.add_(0.05 * torch::randn_like(t));
  }
  const auto out = dir.file("converted");
  m::saveModel(*model, out, kModel);
  return out;
}

double maxAbsDiff(const std::vector<float>& a, const torch::Tensor& b) {  // b [T, T]
  const auto c = b.to(torch::kFloat).contiguous();
  double worst = 0;
  for (int64_t i = 0; i < c.numel(); ++i) {
    const float x = a[size_t(i)];
    if (std::isnan(x)) continue;  // masked
    worst = std::max(worst, std::abs(double(x) - double(c.data_ptr<float>()[i])));
  }
  return worst;
}

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

  void convertedModelHasKlAndItsTrainedMap() {
    hh::test::TempDir dir("inspector_converted");
    const auto folder = writeConverted(dir);
    hh::gui::ModelSession session;
    QString error;
    const auto summary = session.load(QString::fromStdString(folder), &error);
    QVERIFY2(error.isEmpty(), qPrintable(error));
    QVERIFY(summary.converted());
    QCOMPARE(summary.layerAttention.value(0), QString("hedgehog"));
    const auto result = session.inspect(kText);
    QVERIFY(result.converted);
    for (double kl : result.measures.kl.values) QVERIFY(std::isfinite(kl) && kl > 0);

    auto model = m::loadModel(folder);
    const auto tokenizer = hh::tok::loadTokenizer(folder);
    const auto idTensor = torch::tensor(tokenizer->encode(kText.toStdString(), true), torch::kLong).unsqueeze(0);
    m::CaptureRequest capture;
    m::ForwardOptions options;
    options.capture = &capture;
    options.teacher = true;
    const auto out = model->forward(idTensor, options);
    const auto maps = session.headMaps(1, 3);
    QCOMPARE(maps.featureMap, QString("hedgehog"));
    const double linearErr = maxAbsDiff(*maps.linear, out.captures[1].linearWeights[0][3]);
    qInfo("converted head (1, 3): max |linear weight diff| %.3g", linearErr);
    QVERIFY(linearErr < 1e-6);

    hh::gui::ComparisonSettings settings;
    settings.featureMaps = {"trained", "hedgehog", "t2r"};
    const auto cmp = session.headComparison(1, 3, settings);
    QVERIFY2(cmp.error.isEmpty(), qPrintable(cmp.error));
    QCOMPARE(int(cmp.maps.size()), 3);
    const double inspectKl = result.measures.kl.values[size_t(1 * 4 + 3)];
    qInfo("KL of head (1, 3): inspector %.6f, comparison's trained map %.6f, untrained hedgehog %.6f", inspectKl,
          cmp.maps[0].kl, cmp.maps[1].kl);
    QVERIFY(std::abs(cmp.maps[0].kl - inspectKl) < 1e-5 * std::max(1.0, inspectKl));
    QVERIFY(std::abs(cmp.maps[0].kl - cmp.maps[1].kl) > 1e-6);  // trained differs from the identity init
    // A random head has no trained map: "trained" is dropped, the rest computed.
    auto random = settings;
    random.length = 16;
    const auto r = hh::gui::computeComparison(random);
    QVERIFY2(r.error.isEmpty(), qPrintable(r.error));
    QCOMPARE(int(r.maps.size()), 2);
  }

  void softmaxLayersCompareWithoutTrained() {
    hh::test::TempDir dir("inspector_hybrid");
    auto model = m::loadModel(kModel);
    model->setAttentionPlan(
        m::AttentionPlan::hybrid(model->layerCount(), {1}, *hh::attn::parseLayerAttention("hedgehog")));
    const std::string hybrid = dir.file("hybrid");
    m::saveModel(*model, hybrid, kModel);

    hh::gui::ModelSession session;
    QString error;
    session.load(QString::fromStdString(hybrid), &error);
    QVERIFY2(error.isEmpty(), qPrintable(error));
    QVERIFY(session.inspect(kText).error.isEmpty());
    hh::gui::ComparisonSettings settings;
    settings.featureMaps = {"trained", "hedgehog"};
    const auto onSoftmax = session.headComparison(0, 0, settings);  // layer 0 stayed softmax
    QVERIFY2(onSoftmax.error.isEmpty(), qPrintable(onSoftmax.error));
    QCOMPARE(int(onSoftmax.maps.size()), 1);
    QVERIFY2(onSoftmax.source.contains("no trained map"), qPrintable(onSoftmax.source));
    QCOMPARE(int(session.headComparison(1, 0, settings).maps.size()), 2);
  }

  // Layers whose weights read the layer's input (gated, delta, decay) or mix in a softmax window:
  // the inspector's linear map of a head is the layer's own (equal to the model's captured linear
  // weights), its KL is measured, and the comparison's "trained" map is that same map (its KL the
  // inspector's). A delta layer's map says its weights are signed, a decay layer's that it has no
  // normaliser and leaves out the value-side gate.
  void gatedAndWindowLayersShowTheirOwnMaps() {
    hh::test::TempDir dir("inspector_rules");
    auto model = m::loadModel(kModel);
    // Gated and window weights are distributions over the keys (KL finite); the delta rule's
    // effective matrix has signed entries and the decay rule's no normaliser, so their KL is what
    // the metric makes of them (NaN for a negative weight), the same in both views.
    struct Layer {
      const char *spec, *folder;
      bool distribution;
    };
    const Layer layers[] = {{"t2r/gated", "gated", true},
                            {"hedgehog/delta", "delta", false},
                            {"hedgehog/decay", "decay", false},
                            {"hedgehog_window(4)", "window", true}};
    for (const auto& [spec, name, distribution] : layers) {
      model->setAttentionPlan(m::AttentionPlan::uniform(model->layerCount(), *hh::attn::parseLayerAttention(spec)));
      const std::string folder = dir.file(name);
      m::saveModel(*model, folder, kModel);
      hh::gui::ModelSession session;
      QString error;
      session.load(QString::fromStdString(folder), &error);
      QVERIFY2(error.isEmpty(), qPrintable(error));
      const auto result = session.inspect(kText);
      QVERIFY2(result.error.isEmpty(), qPrintable(result.error));
      if (distribution)
        for (double kl : result.measures.kl.values) QVERIFY2(std::isfinite(kl) && kl >= 0, spec);

      auto reference = m::loadModel(folder);
      const auto idTensor =
          torch::tensor(hh::tok::loadTokenizer(folder)->encode(kText.toStdString(), true), torch::kLong).unsqueeze(0);
      m::CaptureRequest capture;
      m::ForwardOptions options;
      options.capture = &capture;
      options.teacher = true;
      const auto out = reference->forward(idTensor, options);
      const auto maps = session.headMaps(2, 1);
      QVERIFY2(maps.error.isEmpty() && maps.linear != nullptr, spec);
      const auto& captured = out.captures[2].linearWeights[0][1];  // [T, T]
      const double linearErr = maxAbsDiff(*maps.linear, captured), scale = captured.abs().max().item<double>();
      qInfo("%s head (2, 1): max |linear weight diff| %.3g of max |weight| %.3g, note '%s'", spec, linearErr, scale,
            qPrintable(maps.note));
      QVERIFY2(linearErr < 1e-6 * std::max(1.0, scale), spec);  // decay's weights are not normalised
      QCOMPARE(maps.note.contains("value-side gate"), std::string(spec) == "hedgehog/decay");
      QCOMPARE(maps.note.contains("signed"), std::string(spec) == "hedgehog/delta");

      hh::gui::ComparisonSettings settings;
      settings.featureMaps = {"trained", "hedgehog"};
      const auto cmp = session.headComparison(2, 1, settings);
      QVERIFY2(cmp.error.isEmpty(), qPrintable(cmp.error));
      const double inspectKl = result.measures.kl.values[size_t(2 * 4 + 1)];
      qInfo("%s head (2, 1): KL inspector %.6g, comparison's trained map %.6g", spec, inspectKl, cmp.maps[0].kl);
      QVERIFY2(std::isnan(inspectKl) ? std::isnan(cmp.maps[0].kl)
                                     : std::abs(cmp.maps[0].kl - inspectKl) < 1e-5 * std::max(1.0, std::abs(inspectKl)),
               spec);
      QVERIFY2(cmp.source.contains(QStringLiteral("the layer's ") + spec), qPrintable(cmp.source));
    }
  }

  // exp_t in the comparison is the map its layers compute (shifted, engine/attention/stable_exp.h):
  // on a head with q + k past 88, where exp(q), exp(k) overflow fp32, its weights are finite and
  // equal to the fp64 brute force of the unshifted map.
  void comparisonExpTStaysFiniteOnLargeHeads() {
    torch::manual_seed(7);
    const int64_t t = 12, d = 8;
    const auto q = 45.0 + torch::randn({1, 1, t, d}, torch::kDouble), k = 45.0 + torch::randn({1, 1, t, d}, torch::kDouble);
    hh::gui::ComparisonSettings settings;
    settings.featureMaps = {"exp_t"};
    hh::gui::ComparisonResult result;
    hh::gui::compareHead(q, k, true, settings, nullptr, result);
    QCOMPARE(int(result.maps.size()), 1);
    hh::attn::RuleOptions ro;
    const auto want = hh::attn::referenceLinearWeights(torch::exp(q), torch::exp(k), {}, ro);  // [1,1,T,T]
    double worst = 0;
    for (int64_t i = 0; i < t; ++i)
      for (int64_t j = 0; j <= i; ++j) {
        const float got = result.maps[0].weights[size_t(i * t + j)];
        QVERIFY(std::isfinite(got));
        worst = std::max(worst, std::abs(got - want[0][0][i][j].item<double>()));
      }
    QVERIFY2(worst < 1e-5, std::to_string(worst).c_str());
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

  void fourThousandTokensStayResponsive() {
    hh::test::TempDir dir("inspector_long");
    hh::jobs::ArchitectureConfig a;
    a.modelType = "llama";
    a.nEmbd = 32;
    a.nLayer = 2;
    a.nHead = 2;
    a.nPositions = 4096;
    const auto tokenizer = hh::tok::loadTokenizer(kGpt2Tokenizer);
    torch::manual_seed(0);
    auto model = m::createModel(m::parseModelConfig(
        hh::jobs::architectureToHfJson(a, tokenizer->vocabSize(), tokenizer->bosId(), tokenizer->eosId()), "test"));
    const auto folder = dir.file("long");
    m::saveModel(*model, folder, kGpt2Tokenizer);

    hh::gui::MainWindow window;
    window.resize(1400, 900);
    window.show();
    QString text;
    for (int i = 0; i < 1200; ++i) text += QStringLiteral("the cat sat on a mat ");  // > 4096 tokens
    window.inspector()->setText(text);
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
              &TestInspector::convertedModelHasKlAndItsTrainedMap, &TestInspector::softmaxLayersCompareWithoutTrained,
              &TestInspector::gatedAndWindowLayersShowTheirOwnMaps,
              &TestInspector::comparisonExpTStaysFiniteOnLargeHeads, &TestInspector::exportsWeightsWithTheEngineWriter,
              &TestInspector::windowInspectsAndReadsTheHoveredPair, &TestInspector::recallProbeColoursHeadsByTheNeedle,
              &TestInspector::fourThousandTokensStayResponsive)

}  // namespace test_inspector

#if HH_HAVE_QTEST
#include "test_inspector.moc"
#endif
