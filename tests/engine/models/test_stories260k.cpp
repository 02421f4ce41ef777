// engine.models.stories260k: a real pretrained Llama, Karpathy's stories260K (tests/data; 5 layers,
// 8 query heads over 4 kv heads, head dim 8, RoPE, SwiGLU, tied head), against
// reference.safetensors, computed by llama2.c's own PyTorch model on the original weights on two
// rows of real TinyStories text (BOS + 47 tokens):
//   - logits and every layer's softmax attention weights within 1e-4 absolute (the logits span
//     about +-20, the weights [0, 1]);
//   - the model predicts that text well: next-token loss about 1.5 nats (perplexity about 4.4,
//     the fixture's own figure), where a uniform guess over 512 pieces costs log 512 = 6.24;
//   - its SentencePiece tokenizer decodes the reference rows to text that re-encodes (with BOS) to
//     the same ids.
#include <torch/types.h>

#include <cmath>
#include <string>

#include "engine/io/safetensors.h"
#include "engine/models/model_io.h"
#include "engine/models/tensor_file.h"
#include "engine/tokenizers/tokenizer.h"
#include "tests/engine/models/model_test_support.h"
#include "tests/support/hh_test.h"

namespace test_stories260k {

namespace {

namespace m = hh::models;
const std::string kDir = std::string(HH_FIXTURES_DIR) + "/stories260K";
constexpr double kTolerance = 1e-4;

torch::Tensor referenceTensor(const std::string& name) {
  return m::readTensor(hh::io::SafetensorsFile::open(kDir + "/reference.safetensors"), name,
                       name == "input_ids" ? torch::kLong : torch::kFloat);
}

double maxAbsDiff(const torch::Tensor& a, const torch::Tensor& b) {
  return (a.to(torch::kCPU, torch::kDouble) - b.to(torch::kCPU, torch::kDouble)).abs().max().item<double>();
}

}  // namespace

class TestStories260K : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void initTestCase() { HH_SKIP_UNLESS_TEST_DEVICE(); }  // the model runs on HH_TEST_DEVICE

  void logitsAndAttentionsMatchLlama2c() {
    auto model = hh::test::loadOnTestDevice(kDir);
    QCOMPARE(model->config().layers, int64_t(5));
    QCOMPARE(model->config().heads, int64_t(8));
    QCOMPARE(model->config().kvHeads, int64_t(4));
    const auto ids = referenceTensor("input_ids");  // [2, 48]
    at::NoGradGuard noGrad;
    m::CaptureRequest capture;
    m::ForwardOptions options;
    options.capture = &capture;
    const auto out = model->forward(hh::test::onTestDevice(ids), options);
    const auto refLogits = referenceTensor("logits");  // [2, 48, 512]
    QCOMPARE(out.logits.sizes().vec(), refLogits.sizes().vec());
    std::vector<torch::Tensor> layers;
    for (const auto& c : out.captures) layers.push_back(c.softmaxWeights.cpu());
    const auto attentions = torch::stack(layers, 1);  // [2, 5, 8, 48, 48]
    const auto refAttentions = referenceTensor("attentions");
    QCOMPARE(attentions.sizes().vec(), refAttentions.sizes().vec());
    const double logitErr = maxAbsDiff(out.logits, refLogits), weightErr = maxAbsDiff(attentions, refAttentions);
    qInfo("max |logit diff| %.3g (logits up to %.1f), max |attention diff| %.3g", logitErr,
          refLogits.abs().max().item<double>(), weightErr);
    QVERIFY(logitErr < kTolerance);
    QVERIFY(weightErr < kTolerance);
  }

  void predictsTinyStoriesText() {
    auto model = hh::test::loadOnTestDevice(kDir);
    const auto ids = referenceTensor("input_ids");
    at::NoGradGuard noGrad;
    const auto logits = model->forward(hh::test::onTestDevice(ids)).logits.cpu();  // [B, T, V]
    const int64_t T = ids.size(1);
    const auto logp = torch::log_softmax(logits.narrow(1, 0, T - 1).to(torch::kDouble), -1);
    const double loss = -logp.gather(-1, ids.narrow(1, 1, T - 1).unsqueeze(-1)).mean().item<double>();
    qInfo("next-token loss %.3f nats, perplexity %.2f", loss, std::exp(loss));
    QVERIFY(loss > 0.5 && loss < 2.5);
  }

  void tokenizerRoundTripsTheReferenceRows() {
    const auto tok = hh::tok::loadTokenizer(kDir);
    QCOMPARE(tok->kind(), std::string("sentencepiece"));
    const auto ids = referenceTensor("input_ids");
    for (int64_t row = 0; row < ids.size(0); ++row) {
      const auto r = ids[row].contiguous();
      const std::vector<int64_t> expected(r.data_ptr<int64_t>(), r.data_ptr<int64_t>() + r.numel());
      const std::string text = tok->decode(expected, /*skipSpecialTokens=*/true);
      QVERIFY2(tok->encode(text, true) == expected, text.c_str());
    }
  }
};

HH_TEST_SUITE(TestStories260K, "engine.models.stories260k", &TestStories260K::initTestCase, &TestStories260K::logitsAndAttentionsMatchLlama2c,
              &TestStories260K::predictsTinyStoriesText, &TestStories260K::tokenizerRoundTripsTheReferenceRows)

}  // namespace test_stories260k

#if HH_HAVE_QTEST
#include "test_stories260k.moc"
#endif
