// engine.models.reference_llama: Llama checkpoints of seeded random weights (reference_checks.h)
// against the independent fp64 reference, logits and softmax weights within 1e-4 relative: grouped-
// query attention (8 query heads over 2, head_dim 8 given explicitly with C = 32) and rope_theta
// inside "rope_parameters"; head_dim 10 != C/H, top-level rope_theta and attention/MLP biases;
// "llama3" RoPE scaling. Where a config key changes the numbers (rope_theta, rope scaling, which
// kv head serves which query head), the reference without it is shown to differ by far more than
// the tolerance, so the key is really being checked. Plus RoPE at position 1 and the llama3
// frequencies worked out by hand.
#include <torch/types.h>

#include <cmath>
#include <string>
#include <vector>

#include "engine/config/model_config.h"
#include "tests/engine/models/reference_checks.h"
#include "tests/support/hh_test.h"
#include "tests/support/temp_dir.h"

namespace test_reference_llama {

using namespace hh::test::reference_checks;  // NOLINT: the suites' shared checks

class TestReferenceLlama : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  // HH_TEST_DEVICE: the comparisons with the reference dumps run there (their tolerance is fp32's).
  void initTestCase() { HH_SKIP_UNLESS_TEST_DEVICE(); }

  void llamaGqaRopeParameters() {
    // 8 query heads over 2 kv heads (g = 4), head_dim 8 given explicitly (C/H = 4), untied
    // head, rope_theta 500 given only inside "rope_parameters".
    ref::LlamaSpec spec;
    spec.hidden = 32, spec.layers = 2, spec.heads = 8, spec.kvHeads = 2, spec.headDim = 8;
    spec.eps = 1e-6, spec.theta = 500.0;
    const int64_t V = 64, I = 48;
    const auto ck = llamaCheckpoint(spec, V, I, 21);
    auto config = llamaConfig(spec, V, I);
    config["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 500.0}};
    hh::test::TempDir dir("ref_llama_gqa");
    ck.write(dir.path(), config);
    QCOMPARE(m::loadModelConfig(dir.path()).ropeTheta, 500.0);
    QCOMPARE(m::loadModelConfig(dir.path()).headDim, int64_t(8));

    const auto expected = ref::llamaForward(spec, ck.weights(), kLlamaIds);
    const auto e = compare(dir.path(), expected, spec.heads, kLlamaIds);
    qInfo(
        "llama GQA 8/2, rope_parameters theta 500: logits rel err %.3g, attentions rel err %.3g (normalised entropy "
        "%.2f)",
        e.logits, e.attentions, meanNormalizedEntropy(expected));
    QVERIFY(meanNormalizedEntropy(expected) < 0.85);
    QVERIFY(e.logits < kTolerance);
    QVERIFY(e.attentions < kTolerance);
    // The default theta (10000) would be caught.
    auto wrong = spec;
    wrong.theta = 10000.0;
    const double gap = maxRelativeDifference(ref::llamaForward(wrong, ck.weights(), kLlamaIds).logits, expected.logits);
    qInfo("  reference with theta 10000 instead differs by %.3g", gap);
    QVERIFY(gap > 100 * kTolerance);
    // So would an interleaved kv-head assignment (kv head h % H_kv instead of h / g): that model
    // equals the reference with query head h moved to slot (h % 2) * 4 + h / 2 (q_proj rows and
    // o_proj columns permuted together), which differs by far more than the tolerance.
    auto permuted = ck.weights();
    const int64_t D = spec.headDim, C = spec.hidden, H = spec.heads;
    for (int64_t l = 0; l < spec.layers; ++l) {
      const auto p = "model.layers." + std::to_string(l) + ".self_attn.";
      const auto& q = ck.weights().at(p + "q_proj.weight").data;  // [H*D, C]
      const auto& o = ck.weights().at(p + "o_proj.weight").data;  // [C, H*D]
      auto& q2 = permuted.at(p + "q_proj.weight").data;
      auto& o2 = permuted.at(p + "o_proj.weight").data;
      for (int64_t h = 0; h < H; ++h) {
        const int64_t slot = (h % 2) * 4 + h / 2;
        for (int64_t d = 0; d < D; ++d) {
          for (int64_t c = 0; c < C; ++c) {
            q2[size_t((slot * D + d) * C + c)] = q[size_t((h * D + d) * C + c)];
            o2[size_t(c * H * D + slot * D + d)] = o[size_t(c * H * D + h * D + d)];
          }
        }
      }
    }
    const double groupGap = maxRelativeDifference(ref::llamaForward(spec, permuted, kLlamaIds).logits, expected.logits);
    qInfo("  interleaved kv heads would differ by %.3g", groupGap);
    QVERIFY(groupGap > 100 * kTolerance);
  }

  void llamaExplicitHeadDimWithBiases() {
    // head_dim 10 while C/H = 6; 4 query heads over 2 kv heads; top-level rope_theta;
    // attention_bias and mlp_bias true; untied head.
    ref::LlamaSpec spec;
    spec.hidden = 24, spec.layers = 2, spec.heads = 4, spec.kvHeads = 2, spec.headDim = 10;
    spec.eps = 1e-5, spec.theta = 2000.0, spec.qkvBias = spec.outputBias = true, spec.mlpBias = true;
    const int64_t V = 64, I = 40;
    const auto ck = llamaCheckpoint(spec, V, I, 22);
    auto config = llamaConfig(spec, V, I);  // writes "head_dim": 10
    config["rope_theta"] = 2000.0;
    hh::test::TempDir dir("ref_llama_headdim");
    ck.write(dir.path(), config);
    QCOMPARE(m::loadModelConfig(dir.path()).headDim, int64_t(10));

    const auto expected = ref::llamaForward(spec, ck.weights(), kLlamaIds);
    const auto e = compare(dir.path(), expected, spec.heads, kLlamaIds);
    qInfo(
        "llama head_dim 10 (C/H = 6), biases, theta 2000: logits rel err %.3g, attentions rel err %.3g (normalised "
        "entropy %.2f)",
        e.logits, e.attentions, meanNormalizedEntropy(expected));
    QVERIFY(meanNormalizedEntropy(expected) < 0.85);
    QVERIFY(e.logits < kTolerance);
    QVERIFY(e.attentions < kTolerance);
  }

  void ropeByHand() {
    // D = 4, theta = 10000: inv_freq = [10000^0, 10000^(-2/4)] = [1, 0.01]. At position 1 the
    // angles are 1 and 0.01; dims (0, 2) rotate by 1 rad and (1, 3) by 0.01 rad:
    //   cos 1 = 0.5403023059, sin 1 = 0.8414709848, cos .01 = 0.9999500004, sin .01 = 0.0099998333
    // x = [1, 2, 3, 4], rotate_half(x) = [-3, -4, 1, 2], out = x cos + rotate_half(x) sin:
    //   out0 = 1 cos1 - 3 sin1     = 0.5403023059 - 2.5244129544 = -1.9841106486
    //   out1 = 2 cos.01 - 4 sin.01 = 1.9999000008 - 0.0399993333 =  1.9599006675
    //   out2 = 3 cos1 + 1 sin1     = 1.6209069176 + 0.8414709848 =  2.4623779024
    //   out3 = 4 cos.01 + 2 sin.01 = 3.9998000017 + 0.0199996667 =  4.0197996683
    const std::vector<double> hand{-1.9841106486, 1.9599006675, 2.4623779024, 4.0197996683};
    m::ModelConfig config;
    config.architecture = m::Architecture::Llama;
    config.positions = m::PositionalScheme::Rotary;
    config.headDim = 4;
    config.ropeTheta = 10000.0;
    const auto x = torch::tensor({1.0f, 2.0f, 3.0f, 4.0f}).view({1, 1, 1, 4});  // [B,H,T,D]
    const auto tables = m::ropeTables(config, /*length=*/1, /*offset=*/1, torch::kCPU);
    const auto engine = m::applyRope(x, tables).flatten();
    ref::LlamaSpec spec;
    spec.headDim = 4;
    spec.theta = 10000.0;
    const auto reference = ref::rotate({1, 2, 3, 4}, ref::llamaInverseFrequencies(spec), 1);
    double engineErr = 0, refErr = 0;
    for (size_t i = 0; i < 4; ++i) {
      engineErr = std::max(engineErr, std::abs(engine[int64_t(i)].item<double>() - hand[i]));
      refErr = std::max(refErr, std::abs(reference[i] - hand[i]));
    }
    qInfo("rope by hand: engine max abs err %.3g, reference %.3g", engineErr, refErr);
    QVERIFY(engineErr < 1e-6);
    QVERIFY(refErr < 1e-9);
    // Position 0 is the identity.
    const auto zero = m::applyRope(x, m::ropeTables(config, 1, 0, torch::kCPU));
    QVERIFY(torch::allclose(zero, x));
  }

  void llama3RopeScaling() {
    // theta 10000, D = 8: inv_freq = [1, 0.1, 0.01, 0.001], wavelengths 2 pi / f = [6.3, 62.8,
    // 628, 6283]. llama3 with factor 8, low_freq_factor 1, high_freq_factor 4 and
    // original_max_position_embeddings 64: low wavelength bound 64 / 1 = 64, high 64 / 4 = 16.
    //   f0 = 1     : 6.3 < 16, kept                 -> 1
    //   f1 = 0.1   : 16 <= 62.8 <= 64, blended with smooth = (64 / 62.83 - 1) / (4 - 1) = 0.0061972
    //                (1 - smooth) * 0.1 / 8 + smooth * 0.1 = 0.013042256
    //   f2 = 0.01  : 628 > 64, divided by 8          -> 0.00125
    //   f3 = 0.001 : divided by 8                    -> 0.000125
    const std::vector<double> hand{1.0, 0.013042256043820465, 0.00125, 0.000125};
    ref::LlamaSpec spec;
    spec.hidden = 32, spec.layers = 2, spec.heads = 4, spec.kvHeads = 2, spec.headDim = 8;
    spec.ropeType = "llama3", spec.factor = 8.0, spec.lowFreqFactor = 1.0, spec.highFreqFactor = 4.0;
    spec.originalMaxPositions = 64;
    const int64_t V = 64, I = 48;
    auto config = llamaConfig(spec, V, I);
    config["rope_scaling"] = {{"rope_type", "llama3"},
                              {"factor", 8.0},
                              {"low_freq_factor", 1.0},
                              {"high_freq_factor", 4.0},
                              {"original_max_position_embeddings", 64}};
    const auto parsed = m::parseModelConfig(config, "llama3 config");
    const auto engineInv = m::ropeInverseFrequencies(parsed);
    const auto refInv = ref::llamaInverseFrequencies(spec);
    double engineErr = 0, refErr = 0;
    for (size_t i = 0; i < 4; ++i) {
      engineErr = std::max(engineErr, std::abs(engineInv[int64_t(i)].item<double>() - hand[i]) / hand[i]);
      refErr = std::max(refErr, std::abs(refInv[i] - hand[i]) / hand[i]);
    }
    qInfo("llama3 inv_freq: engine max rel err %.3g, reference %.3g", engineErr, refErr);
    QVERIFY(engineErr < 1e-6);
    QVERIFY(refErr < 1e-12);

    // The whole model at 20 positions (up to 19: the scaled frequencies move the angles).
    const auto ck = llamaCheckpoint(spec, V, I, 24);
    hh::test::TempDir dir("ref_llama3");
    ck.write(dir.path(), config);
    ref::Rows ids{{}};
    for (int t = 0; t < 20; ++t) ids[0].push_back((7 * t + 3) % V);
    const auto expected = ref::llamaForward(spec, ck.weights(), ids);
    const auto e = compare(dir.path(), expected, spec.heads, ids);
    auto unscaled = spec;
    unscaled.ropeType = "default";
    const double gap = maxRelativeDifference(ref::llamaForward(unscaled, ck.weights(), ids).logits, expected.logits);
    qInfo("llama3 model: logits rel err %.3g, attentions rel err %.3g; unscaled reference differs by %.3g", e.logits,
          e.attentions, gap);
    QVERIFY(e.logits < kTolerance);
    QVERIFY(e.attentions < kTolerance);
    QVERIFY(gap > 100 * kTolerance);
  }
};

HH_TEST_SUITE(TestReferenceLlama, "engine.models.reference_llama", &TestReferenceLlama::initTestCase,
              &TestReferenceLlama::llamaGqaRopeParameters, &TestReferenceLlama::llamaExplicitHeadDimWithBiases,
              &TestReferenceLlama::ropeByHand, &TestReferenceLlama::llama3RopeScaling)

}  // namespace test_reference_llama

#if HH_HAVE_QTEST
#include "test_reference_llama.moc"
#endif
