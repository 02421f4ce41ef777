// engine.models.reference: BERT and Qwen2 loaded from Hugging Face-style folders (config.json +
// model.safetensors of seeded random weights, scale 0.2-0.5 so that attention is far from
// uniform) against the independent fp64 reference in reference_transformer.{h,cpp}: logits and
// softmax weights within 1e-4 relative (max|diff| / max|ref|), fp32 engine vs fp64 reference.
// Cases: a small BERT with token types and a padding mask; the bert-tiniest fixture; Qwen2 (q/k/v
// biases, no o_proj bias, no key saying so); a tied-head Llama (head_dim implied). Where a config
// key changes the numbers (token types), the test also shows that the reference without it
// differs by far more than the tolerance, so the key is really being checked. Llama's grouped
// queries and RoPE variants are engine.models.reference_llama.
#include <torch/types.h>

#include <filesystem>
#include <string>

#include "engine/config/model_config.h"
#include "engine/io/safetensors.h"
#include "engine/models/tensor_file.h"
#include "tests/engine/models/reference_checks.h"
#include "tests/support/hh_test.h"
#include "tests/support/temp_dir.h"

namespace test_reference_models {

using namespace hh::test::reference_checks;  // NOLINT: the suites' shared checks

class TestReferenceModels : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  // HH_TEST_DEVICE: the comparisons with the reference dumps run there (their tolerance is fp32's).
  void initTestCase() { HH_SKIP_UNLESS_TEST_DEVICE(); }

  void bertWithTokenTypesAndPadding() {
    // C=16, 2 layers, 4 heads, vocab 50, 2 token types; row 1 has 3 padding tokens.
    ref::BertSpec spec;
    spec.hidden = 16, spec.layers = 2, spec.heads = 4, spec.eps = 1e-12, spec.activation = "gelu";
    const int64_t V = 50, I = 32, P = 16;
    Checkpoint ck(11);
    ck.add("bert.embeddings.word_embeddings.weight", {V, 16}, 0.5);
    ck.add("bert.embeddings.position_embeddings.weight", {P, 16}, 0.3);
    ck.add("bert.embeddings.token_type_embeddings.weight", {2, 16}, 0.5);
    ck.layerNorm("bert.embeddings.LayerNorm", 16);
    for (int l = 0; l < 2; ++l) {
      const auto p = "bert.encoder.layer." + std::to_string(l) + ".";
      ck.linear(p + "attention.self.query", 16, 16, 0.4, true);
      ck.linear(p + "attention.self.key", 16, 16, 0.4, true);
      ck.linear(p + "attention.self.value", 16, 16, 0.3, true);
      ck.linear(p + "attention.output.dense", 16, 16, 0.25, true);
      ck.layerNorm(p + "attention.output.LayerNorm", 16);
      ck.linear(p + "intermediate.dense", 16, I, 0.3, true);
      ck.linear(p + "output.dense", I, 16, 0.2, true);
      ck.layerNorm(p + "output.LayerNorm", 16);
    }
    ck.linear("cls.predictions.transform.dense", 16, 16, 0.3, true);
    ck.layerNorm("cls.predictions.transform.LayerNorm", 16);
    ck.add("cls.predictions.bias", {V}, 0.1);
    const json config{{"model_type", "bert"},   {"architectures", {"BertForMaskedLM"}},
                      {"vocab_size", V},        {"hidden_size", 16},
                      {"num_hidden_layers", 2}, {"num_attention_heads", 4},
                      {"intermediate_size", I}, {"max_position_embeddings", P},
                      {"type_vocab_size", 2},   {"layer_norm_eps", 1e-12},
                      {"hidden_act", "gelu"}};
    hh::test::TempDir dir("ref_bert");
    ck.write(dir.path(), config);

    const ref::Rows ids{{2, 14, 33, 7, 49, 21, 3}, {2, 40, 9, 3, 0, 0, 0}};
    const ref::Rows types{{0, 0, 0, 1, 1, 1, 1}, {0, 0, 1, 1, 0, 0, 0}};
    const ref::Rows mask{{1, 1, 1, 1, 1, 1, 1}, {1, 1, 1, 1, 0, 0, 0}};
    const auto expected = ref::bertForward(spec, ck.weights(), ids, types, mask);
    const double entropy = meanNormalizedEntropy(expected);
    const auto e = compare(dir.path(), expected, 4, ids, types, mask);
    qInfo("bert small: logits rel err %.3g, attentions rel err %.3g (normalised entropy %.2f; uniform 1)", e.logits,
          e.attentions, entropy);
    QVERIFY(entropy < 0.85);
    QVERIFY(e.logits < kTolerance);
    QVERIFY(e.attentions < kTolerance);
    // Padding keys get no weight: the engine's captured weights are 0 there.
    auto model = m::loadModel(dir.path());
    at::NoGradGuard noGrad;
    m::CaptureRequest request;
    m::ForwardOptions options;
    options.capture = &request;
    options.tokenTypes = idsTensor(types);
    options.attentionMask = idsTensor(mask);
    const auto out = model->forward(idsTensor(ids), options);
    QCOMPARE(out.captures[0].softmaxWeights.select(0, 1).narrow(-1, 4, 3).abs().max().item<double>(), 0.0);
    // Token types matter: without them the logits move far beyond the tolerance.
    const auto noTypes = ref::bertForward(spec, ck.weights(), ids, {}, mask);
    QVERIFY(maxRelativeDifference(noTypes.logits, expected.logits) > 100 * kTolerance);
  }

  void bertTiniestFixture() {
    const std::string dir = std::string(HH_FIXTURES_DIR) + "/bert-tiniest";
    if (!std::filesystem::exists(dir + "/model.safetensors"))
      QSKIP("bert-tiniest has no config.json/model.safetensors");
    const auto file = hh::io::SafetensorsFile::open(dir + "/model.safetensors");
    ref::Weights weights;
    for (const auto& name : file.names()) {
      const auto t = hh::models::readTensor(file, name, torch::kDouble).contiguous();
      weights[name] =
          ref::Array{t.sizes().vec(), std::vector<double>(t.data_ptr<double>(), t.data_ptr<double>() + t.numel())};
    }
    const auto config = m::loadModelConfig(dir);
    ref::BertSpec spec;
    spec.hidden = config.hiddenSize, spec.layers = config.layers, spec.heads = config.heads;
    spec.eps = config.normEps, spec.activation = config.activation;
    QCOMPARE(spec.hidden, int64_t(4));
    // "[CLS] hello world ! [SEP]" and a padded second row with a second segment.
    const ref::Rows ids{{101, 7592, 2088, 999, 102}, {101, 2748, 102, 0, 0}};
    const ref::Rows types{{0, 0, 0, 0, 0}, {0, 0, 1, 0, 0}};
    const ref::Rows mask{{1, 1, 1, 1, 1}, {1, 1, 1, 0, 0}};
    const auto expected = ref::bertForward(spec, weights, ids, types, mask);
    const auto e = compare(dir, expected, config.heads, ids, types, mask);
    qInfo("bert-tiniest: logits rel err %.3g, attentions rel err %.3g", e.logits, e.attentions);
    QVERIFY(e.logits < kTolerance);
    QVERIFY(e.attentions < kTolerance);
  }

  // Qwen2: q/k/v biases and no o_proj bias, with no attention_bias key (the model type says so).
  void qwen2QkvBiases() {
    ref::LlamaSpec spec;
    spec.hidden = 16, spec.layers = 2, spec.heads = 4, spec.kvHeads = 2, spec.headDim = 4;
    spec.eps = 1e-6, spec.theta = 1e6, spec.qkvBias = true, spec.tied = true;
    const int64_t V = 64, I = 24;
    const auto ck = llamaCheckpoint(spec, V, I, 24);
    auto config = llamaConfig(spec, V, I);
    config["model_type"] = "qwen2";
    config["architectures"] = {"Qwen2ForCausalLM"};
    config["rope_theta"] = 1e6;
    config.erase("attention_bias");
    hh::test::TempDir dir("ref_qwen2");
    ck.write(dir.path(), config);
    const auto loaded = m::loadModelConfig(dir.path());
    QVERIFY(loaded.qkvBias && !loaded.outputBias);
    const auto expected = ref::llamaForward(spec, ck.weights(), kLlamaIds);
    const auto e = compare(dir.path(), expected, spec.heads, kLlamaIds);
    // Without the biases the logits are another model's (the fault this pins: they were dropped).
    auto noBias = spec;
    noBias.qkvBias = false;
    const double biasGap =
        maxRelativeDifference(ref::llamaForward(noBias, ck.weights(), kLlamaIds).logits, expected.logits);
    qInfo("qwen2 q/k/v biases: logits rel err %.3g, attentions rel err %.3g; without the biases %.3g", e.logits,
          e.attentions, biasGap);
    QVERIFY(biasGap > 100 * kTolerance);
    QVERIFY(e.logits < kTolerance);
    QVERIFY(e.attentions < kTolerance);
  }

  void llamaTiedHead() {
    ref::LlamaSpec spec;
    spec.hidden = 16, spec.layers = 2, spec.heads = 4, spec.kvHeads = 4, spec.headDim = 4;
    spec.eps = 1e-5, spec.tied = true;
    const int64_t V = 64, I = 24;
    const auto ck = llamaCheckpoint(spec, V, I, 23);  // no lm_head.weight in the file
    hh::test::TempDir dir("ref_llama_tied");
    ck.write(dir.path(), llamaConfig(spec, V, I));
    const auto expected = ref::llamaForward(spec, ck.weights(), kLlamaIds);
    const auto e = compare(dir.path(), expected, spec.heads, kLlamaIds);
    qInfo("llama tied head: logits rel err %.3g, attentions rel err %.3g (normalised entropy %.2f)", e.logits,
          e.attentions, meanNormalizedEntropy(expected));
    QVERIFY(meanNormalizedEntropy(expected) < 0.85);
    QVERIFY(e.logits < kTolerance);
    QVERIFY(e.attentions < kTolerance);
  }
};

HH_TEST_SUITE(TestReferenceModels, "engine.models.reference", &TestReferenceModels::initTestCase,
              &TestReferenceModels::bertWithTokenTypesAndPadding, &TestReferenceModels::bertTiniestFixture,
              &TestReferenceModels::qwen2QkvBiases, &TestReferenceModels::llamaTiedHead)

}  // namespace test_reference_models

#if HH_HAVE_QTEST
#include "test_reference_models.moc"
#endif
