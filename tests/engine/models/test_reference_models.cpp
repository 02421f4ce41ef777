// engine.models.reference: BERT and Llama loaded from Hugging Face-style folders (config.json +
// model.safetensors of seeded random weights, scale 0.2-0.5 so that attention is far from
// uniform) against the independent fp64 reference in reference_transformer.{h,cpp}: logits and
// softmax weights within 1e-4 relative (max|diff| / max|ref|), fp32 engine vs fp64 reference.
// Cases: a small BERT with token types and a padding mask; the bert-tiniest fixture; Llama with
// grouped-query attention (8 query heads over 2, head_dim 8 given explicitly with C = 32) and
// rope_theta inside "rope_parameters"; Llama with head_dim 10 != C/H, top-level rope_theta and
// attention/MLP biases; Qwen2 (q/k/v biases, no o_proj bias, no key saying so); a tied-head Llama
// (head_dim implied); Llama with "llama3" RoPE scaling.
// Where a config key changes the numbers (rope_theta, rope scaling, token types, which kv head
// serves which query head), the test also shows that the reference without it differs by far
// more than the tolerance, so the key is really being checked. Plus RoPE at position 1 and the
// llama3 frequencies worked out by hand.

#include <torch/types.h>

#include <cmath>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "engine/io/safetensors.h"
#include "engine/models/layers.h"
#include "engine/config/model_config.h"
#include "engine/models/model_io.h"
#include "engine/models/tensor_file.h"
#include "tests/engine/models/model_test_support.h"
#include "tests/engine/models/reference_transformer.h"
#include "tests/support/hh_test.h"

namespace test_reference_models {

namespace {

namespace m = hh::models;
namespace ref = hh::test::ref;
using nlohmann::json;

constexpr double kTolerance = 1e-4;

// Seeded random weights, kept twice: as fp32 tensors for the file and as the same values in
// fp64 for the reference.
class Checkpoint {
 public:
  explicit Checkpoint(uint32_t seed) : rng_(seed) {}

  // offset + scale * N(0, 1), rounded to fp32 once (both sides see the same numbers).
  void add(const std::string& name, const std::vector<int64_t>& shape, double scale, double offset = 0.0) {
    std::normal_distribution<double> normal(0.0, 1.0);
    int64_t count = 1;
    for (auto d : shape) count *= d;
    std::vector<float> values(static_cast<size_t>(count));
    ref::Array array{shape, {}};
    for (auto& v : values) {
      v = static_cast<float>(offset + scale * normal(rng_));
      array.data.push_back(double(v));
    }
    tensors_.emplace_back(name, torch::from_blob(values.data(), shape, torch::kFloat).clone());
    weights_[name] = std::move(array);
  }
  void linear(const std::string& name, int64_t in, int64_t out, double scale, bool bias) {
    add(name + ".weight", {out, in}, scale);
    if (bias) add(name + ".bias", {out}, 0.1);
  }
  void layerNorm(const std::string& name, int64_t c) {
    add(name + ".weight", {c}, 0.1, 1.0);
    add(name + ".bias", {c}, 0.1);
  }

  void write(const std::string& dir, const json& config) const { hh::test::writeFolder(dir, config, tensors_); }
  const ref::Weights& weights() const { return weights_; }

 private:
  std::mt19937 rng_;
  std::vector<std::pair<std::string, torch::Tensor>> tensors_;
  ref::Weights weights_;
};

torch::Tensor idsTensor(const ref::Rows& rows) {
  const int64_t B = int64_t(rows.size()), T = int64_t(rows[0].size());
  auto t = torch::empty({B, T}, torch::kLong);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < T; ++i) t[b][i] = rows[size_t(b)][size_t(i)];
  return t;
}

torch::Tensor asTensor(const std::vector<double>& values, const std::vector<int64_t>& shape) {
  return torch::tensor(values, torch::kDouble).view(shape);
}

// Engine softmax weights of every layer stacked: [L, B, H, T, T].
torch::Tensor stackCaptures(const m::ModelOutput& out) {
  std::vector<torch::Tensor> layers;
  for (const auto& c : out.captures) layers.push_back(c.softmaxWeights.cpu());
  return torch::stack(layers, 0);
}
torch::Tensor stackReference(const ref::Output& r, int64_t heads) {
  std::vector<torch::Tensor> layers;
  for (const auto& a : r.attentions) layers.push_back(asTensor(a, {r.batch, heads, r.length, r.length}));
  return torch::stack(layers, 0);
}

struct Errors {
  double logits = 0, attentions = 0;
};

// Runs the engine on `dir` and compares with the reference output. `mask` (may be empty)
// selects the real tokens whose logits are compared.
Errors compare(const std::string& dir, const ref::Output& expected, int64_t heads, const ref::Rows& ids,
               const ref::Rows& types = {}, const ref::Rows& mask = {}) {
  auto model = hh::test::loadOnTestDevice(dir);
  at::NoGradGuard noGrad;
  m::CaptureRequest request;
  m::ForwardOptions options;
  options.capture = &request;
  if (!types.empty()) options.tokenTypes = hh::test::onTestDevice(idsTensor(types));
  if (!mask.empty()) options.attentionMask = hh::test::onTestDevice(idsTensor(mask));
  const auto out = model->forward(hh::test::onTestDevice(idsTensor(ids)), options);
  auto refLogits = asTensor(expected.logits, {expected.batch, expected.length, expected.vocab});
  auto logits = out.logits.to(torch::kCPU, torch::kDouble);
  if (!mask.empty()) {  // padded positions set to 0 on both sides
    const auto keep = idsTensor(mask).to(torch::kDouble).unsqueeze(-1);
    refLogits = refLogits * keep;
    logits = logits * keep;
  }
  Errors e;
  e.logits = hh::test::relativeError(logits, refLogits);
  e.attentions = hh::test::relativeError(stackCaptures(out), stackReference(expected, heads));
  return e;
}

// Mean over attention rows (with at least two allowed keys) of the row entropy divided by the
// log of its key count: 1 for uniform attention, 0 for one-hot rows.
double meanNormalizedEntropy(const ref::Output& r) {
  const int64_t T = r.length;
  double sum = 0;
  int64_t rows = 0;
  for (const auto& a : r.attentions)
    for (size_t start = 0; start < a.size(); start += size_t(T)) {
      double h = 0;
      int64_t keys = 0;
      for (int64_t j = 0; j < T; ++j) {
        const double p = a[start + size_t(j)];
        if (p > 0) h -= p * std::log(p), ++keys;
      }
      if (keys < 2) continue;
      sum += h / std::log(double(keys));
      ++rows;
    }
  return sum / double(rows);
}

double maxRelativeDifference(const std::vector<double>& a, const std::vector<double>& b) {
  double err = 0, scale = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    err = std::max(err, std::abs(a[i] - b[i]));
    scale = std::max(scale, std::abs(b[i]));
  }
  return err / scale;
}

// A Llama checkpoint in Hugging Face names for `spec` (V tokens, MLP width I).
Checkpoint llamaCheckpoint(const ref::LlamaSpec& s, int64_t V, int64_t I, uint32_t seed) {
  Checkpoint ck(seed);
  const int64_t C = s.hidden, HD = s.heads * s.headDim, KD = s.kvHeads * s.headDim;
  ck.add("model.embed_tokens.weight", {V, C}, 0.5);
  for (int64_t l = 0; l < s.layers; ++l) {
    const auto p = "model.layers." + std::to_string(l) + ".";
    ck.add(p + "input_layernorm.weight", {C}, 0.1, 1.0);
    ck.linear(p + "self_attn.q_proj", C, HD, 0.3, s.qkvBias);
    ck.linear(p + "self_attn.k_proj", C, KD, 0.3, s.qkvBias);
    ck.linear(p + "self_attn.v_proj", C, KD, 0.3, s.qkvBias);
    ck.linear(p + "self_attn.o_proj", HD, C, 0.2, s.outputBias);
    ck.add(p + "post_attention_layernorm.weight", {C}, 0.1, 1.0);
    ck.linear(p + "mlp.gate_proj", C, I, 0.3, s.mlpBias);
    ck.linear(p + "mlp.up_proj", C, I, 0.3, s.mlpBias);
    ck.linear(p + "mlp.down_proj", I, C, 0.2, s.mlpBias);
  }
  ck.add("model.norm.weight", {C}, 0.1, 1.0);
  if (!s.tied) ck.add("lm_head.weight", {V, C}, 0.3);
  return ck;
}

json llamaConfig(const ref::LlamaSpec& s, int64_t V, int64_t I) {
  json j{{"model_type", "llama"},
         {"architectures", {"LlamaForCausalLM"}},
         {"vocab_size", V},
         {"hidden_size", s.hidden},
         {"num_hidden_layers", s.layers},
         {"num_attention_heads", s.heads},
         {"num_key_value_heads", s.kvHeads},
         {"intermediate_size", I},
         {"max_position_embeddings", 64},
         {"rms_norm_eps", s.eps},
         {"hidden_act", "silu"},
         {"attention_bias", s.outputBias},
         {"mlp_bias", s.mlpBias},
         {"tie_word_embeddings", s.tied}};
  if (s.headDim * s.heads != s.hidden) j["head_dim"] = s.headDim;  // otherwise implied: C / H
  return j;
}

const ref::Rows kLlamaIds{{3, 17, 42, 5, 29, 60, 11, 0, 33}, {8, 8, 51, 2, 19, 44, 7, 63, 25}};

}  // namespace

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

// clang-format off
HH_TEST_SUITE(TestReferenceModels, "engine.models.reference", &TestReferenceModels::initTestCase, &TestReferenceModels::bertWithTokenTypesAndPadding, &TestReferenceModels::bertTiniestFixture, &TestReferenceModels::llamaGqaRopeParameters, &TestReferenceModels::llamaExplicitHeadDimWithBiases, &TestReferenceModels::qwen2QkvBiases, &TestReferenceModels::llamaTiedHead, &TestReferenceModels::ropeByHand, &TestReferenceModels::llama3RopeScaling)
// clang-format on

}  // namespace test_reference_models

#if HH_HAVE_QTEST
#include "test_reference_models.moc"
#endif
