// engine.attention.softmax_blocks: softmax attention a block of query rows at a time (inference
// on long texts) against the fp64 brute force of the whole matrix, at lengths the block does not
// divide, causal and bidirectional, with padded keys (a fully padded sequence included), and
// grouped sizes; float32 within 1e-5 relative (max-abs over the output), float64 within 1e-12. (The
// float32 cases without a mask run through fusedSoftmaxAttentionCpu where the build has a BLAS.)
// NaN inputs give NaN rows in both (only a row with no valid key is defined as zeros).
// And the per-head measurement the inspector uses (HeadMeasures::measureHeads, one head at a
// time) equals the per-layer one exactly.
#include <torch/types.h>

#include <cmath>
#include <limits>
#include <string>

#include "engine/attention/softmax_attention.h"
#include "engine/jobs/head_tables.h"
#include "tests/support/hh_test.h"

namespace test_softmax_blocks {

namespace {

double relError(const torch::Tensor& got, const torch::Tensor& want) {
  const double scale = std::max(want.abs().max().item<double>(), 1e-30);
  return (got.to(torch::kDouble) - want).abs().max().item<double>() / scale;
}

}  // namespace

class TestSoftmaxBlocks : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void blocksMatchTheWholeMatrix() {
    int cases = 0;
    for (const bool causal : {true, false}) {
      for (const int64_t t : {1, 15, 16, 17, 100, 257}) {
        for (const bool masked : {false, true}) {
          for (const auto dtype : {torch::kFloat, torch::kDouble}) {
            torch::manual_seed(t * 7 + (causal ? 1 : 0) + (masked ? 2 : 0));
            const int64_t B = 2, H = 3, D = 8;
            const auto q = torch::randn({B, H, t, D}, torch::kDouble) * 2;
            const auto k = torch::randn({B, H, t, D}, torch::kDouble) * 2;
            const auto v = torch::randn({B, H, t, 5}, torch::kDouble);
            torch::Tensor mask;
            if (masked) {  // sequence 0 padded after 2/3 of its keys, sequence 1 wholly padded
              mask = torch::ones({B, t}, torch::kBool);
              mask[0].narrow(0, (2 * t) / 3, t - (2 * t) / 3).fill_(false);
              mask[1].fill_(false);
            }
            const auto want = hh::attn::softmaxAttention(q, k, v, causal, mask);  // fp64, whole matrix
            // 16 rows per block (the least), whatever the length: many blocks and a ragged last one.
            const auto got = hh::attn::softmaxAttentionInBlocks(q.to(dtype), k.to(dtype), v.to(dtype), causal, mask, 1);
            QCOMPARE(got.sizes(), want.sizes());
            HH_COMPARE_DTYPE(got.scalar_type(), dtype);
            const double err = relError(got, want), tol = dtype == torch::kFloat ? 1e-5 : 1e-12;
            const std::string what = std::string(causal ? "causal" : "bidirectional") + " T=" + std::to_string(t) +
                                     (masked ? " masked " : " ") + (dtype == torch::kFloat ? "fp32" : "fp64") +
                                     " rel=" + std::to_string(err);
            QVERIFY2(std::isfinite(err) && err <= tol, what.c_str());
            ++cases;
          }
        }
      }
    }
    QCOMPARE(cases, 2 * 6 * 2 * 2);
  }

  void oneBlockIsTheWholeMatrix() {
    // With room for every row the blocked call is softmaxAttention itself: equal to the bit. (In fp64:
    // fp32 and bf16 without a key mask go to fusedSoftmaxAttentionCpu, test_fused_softmax_cpu.cpp.)
    torch::manual_seed(3);
    const auto q = torch::randn({1, 2, 40, 8}, torch::kDouble), k = torch::randn({1, 2, 40, 8}, torch::kDouble);
    const auto v = torch::randn({1, 2, 40, 8}, torch::kDouble);
    QVERIFY(torch::equal(hh::attn::softmaxAttentionInBlocks(q, k, v, true), hh::attn::softmaxAttention(q, k, v, true)));
  }

  void nanInputsStayNaN() {
    // A NaN in q row 40 of sequence 0 makes that row NaN, block by block as in the whole matrix;
    // only a row with no valid key (sequence 1 wholly padded) is defined as zeros.
    torch::manual_seed(11);
    auto q = torch::randn({2, 2, 100, 8}, torch::kDouble);
    const auto k = torch::randn({2, 2, 100, 8}, torch::kDouble), v = torch::randn({2, 2, 100, 8}, torch::kDouble);
    q[0][1][40][3] = std::numeric_limits<double>::quiet_NaN();
    auto mask = torch::ones({2, 100}, torch::kBool);
    mask[1].fill_(false);
    for (const bool causal : {true, false}) {
      for (const bool masked : {false, true}) {
        const auto keyMask = masked ? mask : torch::Tensor();
        const auto whole = hh::attn::softmaxAttention(q, k, v, causal, keyMask);
        const auto blocks = hh::attn::softmaxAttentionInBlocks(q, k, v, causal, keyMask, 1);  // 16-row blocks
        const std::string what = std::string(causal ? "causal" : "bidirectional") + (masked ? " masked" : "");
        for (const auto& y : {whole, blocks}) {
          QVERIFY2(y[0][1][40].isnan().all().item<bool>(), what.c_str());
          QVERIFY2(y[0][0].isfinite().all().item<bool>(), what.c_str());                   // another head
          QVERIFY2(y[0][1].narrow(0, 0, 40).isfinite().all().item<bool>(), what.c_str());  // other rows
          if (masked) QVERIFY2(y[1].abs().max().item<double>() == 0.0, what.c_str());      // fully padded
        }
        QVERIFY2(torch::allclose(blocks, whole, 1e-12, 1e-12, /*equal_nan=*/true), what.c_str());
      }
    }
  }

  void perHeadMeasuresEqualPerLayer() {
    torch::manual_seed(5);
    const int64_t H = 4, T = 30;
    const auto q = torch::randn({1, H, T, 8}), k = torch::randn({1, H, T, 8});
    const auto p = hh::attn::softmaxWeights(q, k, true);
    const auto a = torch::softmax(torch::randn({1, H, T, T}).masked_fill(torch::ones({T, T}).triu(1).to(torch::kBool), -1e30), -1);
    const auto valid = hh::attn::validPairs(T, T, true);
    hh::jobs::HeadMeasures layer(2, int(H)), heads(2, int(H));
    layer.measureLayer(1, p, a, torch::Tensor(), valid);
    for (int h = 0; h < H; ++h) heads.measureHeads(1, h, p.narrow(1, h, 1), a.narrow(1, h, 1), torch::Tensor(), valid);
    QVERIFY(layer.kl.values[size_t(H)] > 0);
    for (size_t i = size_t(H); i < size_t(2 * H); ++i) {
      QCOMPARE(heads.kl.values[i], layer.kl.values[i]);
      QCOMPARE(heads.entropySoftmax.values[i], layer.entropySoftmax.values[i]);
      QCOMPARE(heads.entropyLinear.values[i], layer.entropyLinear.values[i]);
    }
    QVERIFY(std::isnan(heads.kl.values[0]));  // layer 0 untouched
    QCOMPARE(heads.meanKl(), layer.meanKl());
    // A head range past the layer's heads is refused.
    HH_VERIFY_THROWS(std::exception,
                     heads.measureHeads(1, 3, p.narrow(1, 0, 2), torch::Tensor(), torch::Tensor(), valid));
  }
};

HH_TEST_SUITE(TestSoftmaxBlocks, "engine.attention.softmax_blocks", &TestSoftmaxBlocks::blocksMatchTheWholeMatrix,
              &TestSoftmaxBlocks::oneBlockIsTheWholeMatrix, &TestSoftmaxBlocks::nanInputsStayNaN,
              &TestSoftmaxBlocks::perHeadMeasuresEqualPerLayer)

}  // namespace test_softmax_blocks

#if HH_HAVE_QTEST
#include "test_softmax_blocks.moc"
#endif
