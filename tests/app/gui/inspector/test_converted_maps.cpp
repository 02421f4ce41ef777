// app.gui.converted_maps: the inspector's and the comparison's maps of converted layers, through
// ModelSession on the tiny GPT-2 fixture:
//   - a converted (Hedgehog) folder: per-head KL is finite, the head's linear map equals the
//     model's captured linear weights, and the comparison's "trained" map on that head gives
//     the same KL as the inspector (two paths through the engine);
//   - a softmax layer of a partly converted model compares without "trained" (noted in the
//     source); gated, delta, decay and window layers show their own linear maps (equal to the
//     model's captured weights, the gates reading the layer's input), with KL, and the
//     comparison's "trained" map is that map (a delta layer's map notes its signed weights, a
//     decay layer's its missing normaliser and value-side gate);
//   - exp_t in the comparison stays finite where exp(q), exp(k) overflow fp32.
#include <torch/types.h>

#include <QTest>

#include <cmath>
#include <string>

#include "app/gui/comparison/head_comparison.h"
#include "app/gui/inspector/model_session.h"
#include "engine/attention/reference.h"
#include "engine/attention/softmax_attention.h"
#include "engine/jobs/attention_probe.h"
#include "tests/app/gui/inspector/inspector_test_support.h"
#include "tests/support/hh_test.h"
#include "tests/support/temp_dir.h"

namespace test_converted_maps {

namespace m = hh::models;
using namespace hh::test::inspector;  // NOLINT: the suites' shared fixtures

class TestConvertedMaps : public QObject {
  Q_OBJECT
 private Q_SLOTS:
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

    const auto out = capturedOnText(folder);
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

      const auto out = capturedOnText(folder);
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
};

HH_TEST_SUITE(TestConvertedMaps, "app.gui.converted_maps", &TestConvertedMaps::convertedModelHasKlAndItsTrainedMap,
              &TestConvertedMaps::softmaxLayersCompareWithoutTrained,
              &TestConvertedMaps::gatedAndWindowLayersShowTheirOwnMaps,
              &TestConvertedMaps::comparisonExpTStaysFiniteOnLargeHeads)

}  // namespace test_converted_maps

#if HH_HAVE_QTEST
#include "test_converted_maps.moc"
#endif
