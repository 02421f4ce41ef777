// engine.attention.window: the sliding-window + linear hybrid (window_attention.h) against the
// fp64 brute force written from its definition (reference.h):
//   - quadratic, chunked and recurrent forms, causal, at lengths that divide neither W nor the
//     chunk (T = 37, W = 5, chunk 8; T = 50, W = 16, chunk 6), within 1e-10 in fp64 and 2e-5 in fp32;
//   - bidirectional quadratic and chunked forms, and padded keys (key mask) in every form;
//   - the weights are a distribution per row (sum 1 - eps/den) and 0 outside the causal past;
//   - W >= T is plain softmax whatever the mix;
//   - gradients of the chunked form (into q, k, fq, fk, v and the mix) equal the quadratic form's;
//   - prefill then steps equal the whole-sequence output, and the state's size does not grow with
//     the position (the ring buffer).
#include <torch/torch.h>

#include "engine/attention/reference.h"
#include "engine/attention/window_attention.h"
#include "tests/support/hh_test.h"

namespace test_window_attention {

namespace {

namespace a = hh::attn;

// Random inputs with positive features (as every map used with the window gives), q.k of order 1.
a::WindowInputs randomInputs(int64_t b, int64_t h, int64_t t, int64_t d, int64_t f, torch::ScalarType type,
                             uint64_t seed) {
  torch::manual_seed(seed);
  const auto opts = torch::TensorOptions().dtype(type);
  a::WindowInputs in;
  in.q = torch::randn({b, h, t, d}, opts);
  in.k = torch::randn({b, h, t, d}, opts);
  in.fq = torch::rand({b, h, t, f}, opts) + 0.1;
  in.fk = torch::rand({b, h, t, f}, opts) + 0.1;
  in.v = torch::randn({b, h, t, d}, opts);
  in.mix = torch::rand({h}, opts) * 0.8 + 0.1;
  return in;
}

double maxError(const torch::Tensor& got, const torch::Tensor& want) {
  return (got.to(torch::kDouble) - want.to(torch::kDouble)).abs().max().item<double>();
}

a::WindowOptions options(int64_t window, int64_t chunk, bool causal = true) {
  a::WindowOptions o;
  o.window = window;
  o.chunkSize = chunk;
  o.causal = causal;
  return o;
}

// Key mask [B,T] with the last `padded` keys of row 1 padded (their features zeroed as the layer does).
void padRowOne(a::WindowInputs& in, int64_t padded) {
  const int64_t t = in.q.size(2);
  in.keyMask = torch::ones({in.q.size(0), t}, torch::kBool);
  in.keyMask[1].narrow(0, t - padded, padded).fill_(false);
  in.fk = in.fk * in.keyMask.to(in.fk.scalar_type()).unsqueeze(1).unsqueeze(-1);
}

}  // namespace

class TestWindowAttention : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void causalFormsEqualTheReference() {
    for (const auto& [t, w, chunk] : {std::tuple{37, 5, 8}, {50, 16, 6}, {9, 64, 4}}) {
      const auto in = randomInputs(2, 3, t, 4, 6, torch::kDouble, 1);
      const auto o = options(w, chunk);
      const auto want = a::referenceWindowAttention(in, o);
      QVERIFY2(maxError(a::windowQuadratic(in, o), want) < 1e-10, "quadratic");
      QVERIFY2(maxError(a::windowChunked(in, o), want) < 1e-10, "chunked");
      QVERIFY2(maxError(a::windowRecurrent(in, o), want) < 1e-10, "recurrent");
    }
  }

  void fp32FormsStayClose() {
    const auto in = randomInputs(2, 2, 45, 8, 16, torch::kFloat, 2);
    const auto o = options(7, 8);
    const auto want = a::referenceWindowAttention(in, o);
    for (auto form : {a::AttentionForm::Quadratic, a::AttentionForm::Chunked, a::AttentionForm::Recurrent}) {
      const double err = maxError(a::windowAttention(form, in, o), want);
      QVERIFY2(err < 2e-5, (a::toString(form) + " " + std::to_string(err)).c_str());
    }
  }

  void bidirectionalAndPaddedKeysEqualTheReference() {
    for (bool causal : {true, false}) {
      auto in = randomInputs(2, 2, 29, 4, 6, torch::kDouble, 3);
      padRowOne(in, 6);
      const auto o = options(4, 8, causal);
      const auto want = a::referenceWindowAttention(in, o);
      QVERIFY2(maxError(a::windowQuadratic(in, o), want) < 1e-10, causal ? "causal quadratic" : "bidirectional quadratic");
      QVERIFY2(maxError(a::windowChunked(in, o), want) < 1e-10, causal ? "causal chunked" : "bidirectional chunked");
      if (causal) QVERIFY2(maxError(a::windowRecurrent(in, o), want) < 1e-10, "causal recurrent");
    }
  }

  void recurrentFormLeavesPaddedKeysOut() {
    // Padded keys inside the sequence (keys 3 and 4 of row 0, the last 6 of row 1) pass through
    // the ring buffer: the recurrent form leaves them out of the window term as the others do.
    auto in = randomInputs(2, 2, 29, 4, 6, torch::kDouble, 9);
    padRowOne(in, 6);
    in.keyMask[0].narrow(0, 3, 2).fill_(false);
    in.fk = in.fk * in.keyMask.to(in.fk.scalar_type()).unsqueeze(1).unsqueeze(-1);
    for (const int64_t w : {1, 4, 40}) {
      const auto o = options(w, 8);
      const auto want = a::referenceWindowAttention(in, o);
      const double err = maxError(a::windowRecurrent(in, o), want);
      QVERIFY2(err < 1e-10, ("W=" + std::to_string(w) + " recurrent error " + std::to_string(err)).c_str());
    }
    // A step cannot keep a key mask in the state: refused rather than ignored.
    auto state = a::initialWindowState(2, 2, 6, 4, options(4, 8), torch::kDouble, torch::kCPU);
    const a::WindowInputs token{in.q.narrow(2, 0, 1),      in.k.narrow(2, 0, 1), in.fq.narrow(2, 0, 1),
                                in.fk.narrow(2, 0, 1),     in.v.narrow(2, 0, 1), in.mix,
                                in.keyMask.narrow(1, 0, 1)};
    HH_VERIFY_THROWS(std::exception, a::windowStep(state, token, options(4, 8)));
  }

  void weightsAreDistributionsOverThePast() {
    const auto in = randomInputs(1, 2, 20, 4, 6, torch::kDouble, 4);
    const auto w = a::windowWeights(in, options(3, 8));  // [1,2,20,20]
    QVERIFY((w.sum(-1) - 1).abs().max().item<double>() < 1e-5);
    QVERIFY(w.triu(1).abs().max().item<double>() == 0.0);
    QVERIFY(w.min().item<double>() >= 0.0);
  }

  void aWindowAsLongAsTheTextIsSoftmax() {
    const auto in = randomInputs(1, 2, 12, 4, 6, torch::kDouble, 5);
    const auto softmax = a::referenceSoftmaxAttention(in.q, in.k, in.v, true);
    auto o = options(12, 5);
    o.eps = 0;  // the normaliser's guard is the one difference from softmax
    QVERIFY(maxError(a::windowChunked(in, o), softmax) < 1e-10);
  }

  void chunkedGradientsEqualTheQuadraticForms() {
    auto base = randomInputs(2, 2, 23, 4, 6, torch::kDouble, 6);
    const auto o = options(5, 8);
    auto grads = [&](bool chunked) {
      auto in = base;
      std::vector<torch::Tensor*> leaves{&in.q, &in.k, &in.fq, &in.fk, &in.v, &in.mix};
      for (auto* t : leaves) *t = t->detach().clone().requires_grad_(true);
      const auto y = chunked ? a::windowChunked(in, o) : a::windowQuadratic(in, o);
      (y * torch::cos(y)).sum().backward();
      std::vector<torch::Tensor> out;
      for (auto* t : leaves) out.push_back(t->grad());
      return out;
    };
    const auto want = grads(false), got = grads(true);
    for (size_t i = 0; i < want.size(); ++i) QVERIFY2(maxError(got[i], want[i]) < 1e-10, std::to_string(i).c_str());
  }

  void prefillThenStepsEqualTheWholeSequence() {
    const auto in = randomInputs(1, 2, 30, 4, 6, torch::kDouble, 7);
    const auto o = options(6, 8);
    const auto want = a::windowChunked(in, o);
    auto state = a::initialWindowState(1, 2, 6, 4, o, torch::kDouble, torch::kCPU);
    const auto slice = [&](int64_t t0, int64_t len) {
      return a::WindowInputs{in.q.narrow(2, t0, len), in.k.narrow(2, t0, len), in.fq.narrow(2, t0, len),
                             in.fk.narrow(2, t0, len), in.v.narrow(2, t0, len), in.mix, {}};
    };
    std::vector<torch::Tensor> out{a::windowPrefill(state, slice(0, 17), o)};
    const int64_t bytes = state.bytes();
    for (int64_t t = 17; t < 25; ++t) out.push_back(a::windowStep(state, slice(t, 1), o));
    out.push_back(a::windowPrefill(state, slice(25, 5), o));  // continuing prefill: token by token
    QVERIFY(maxError(torch::cat(out, 2), want) < 1e-10);
    QCOMPARE(state.position, int64_t(30));
    QCOMPARE(state.bytes(), bytes);
    // A padded prompt: the state cannot keep its mask, so the prefill refuses it.
    auto padded = slice(0, 4);
    padded.keyMask = torch::ones({1, 4}, torch::kBool);
    auto fresh = a::initialWindowState(1, 2, 6, 4, o, torch::kDouble, torch::kCPU);
    HH_VERIFY_THROWS(std::invalid_argument, a::windowPrefill(fresh, padded, o));
    QCOMPARE(fresh.position, int64_t(0));
  }

  void badInputsAreRefused() {
    auto in = randomInputs(1, 2, 8, 4, 6, torch::kDouble, 8);
    HH_VERIFY_THROWS(std::invalid_argument, a::windowChunked(in, options(0, 4)));
    in.mix = torch::ones({3}, torch::kDouble);
    HH_VERIFY_THROWS(std::invalid_argument, a::windowQuadratic(in, options(2, 4)));
  }
};

HH_TEST_SUITE(TestWindowAttention, "engine.attention.window", &TestWindowAttention::causalFormsEqualTheReference,
              &TestWindowAttention::fp32FormsStayClose,
              &TestWindowAttention::bidirectionalAndPaddedKeysEqualTheReference,
              &TestWindowAttention::recurrentFormLeavesPaddedKeysOut,
              &TestWindowAttention::weightsAreDistributionsOverThePast,
              &TestWindowAttention::aWindowAsLongAsTheTextIsSoftmax,
              &TestWindowAttention::chunkedGradientsEqualTheQuadraticForms,
              &TestWindowAttention::prefillThenStepsEqualTheWholeSequence, &TestWindowAttention::badInputsAreRefused)

}  // namespace test_window_attention

#if HH_HAVE_QTEST
#include "test_window_attention.moc"
#endif
