// engine.generation.decoding: prefilling with the chunked form and then decoding token by token
// (recurrent form for linear layers, KV cache for softmax layers) gives the logits of one full
// forward pass over the same sequence, within 1e-4 relative (max |diff| / max |ref| over the
// logits of every position), for every feature map and update rule, for hybrid plans with GQA,
// and for the original softmax model; linearPrefill from a non-zero state equals the steps it
// replaces (fp64, 1e-10); the recurrent state's memory does not grow with position; generate()
// stops on stop tokens (every entry of an eos_token_id list), at max tokens, when the positions
// run out, and on cancel.

#include <torch/types.h>

#include <nlohmann/json.hpp>

#include "engine/generation/generator.h"
#include "engine/models/model_io.h"
#include "engine/tokenizers/tokenizer.h"
#include "tests/engine/models/model_test_support.h"
#include "tests/support/hh_test.h"

namespace test_decoding {

namespace {

namespace a = hh::attn;
namespace m = hh::models;

using hh::test::tinyLlama;

// Feature maps and gates away from their initialisation, so the test sees their parameters.
void perturbAdapters(m::TransformerModel& model) {
  at::NoGradGuard noGrad;
  torch::manual_seed(11);
  for (auto& [name, t] : model.adapterTensors())
    if (t.is_floating_point() && name.find("projection") == std::string::npos) t.add_(0.1 * torch::randn_like(t));
}

a::LinearAttentionConfig linearConfig(a::FeatureMapKind kind, a::UpdateRule rule) {
  a::LinearAttentionConfig c;
  c.featureMap.kind = kind;
  c.rule.rule = rule;
  c.rule.chunkSize = 8;  // the 13-token prefill crosses chunk boundaries
  return c;
}

// Logits [T, V] of a full forward pass and of prefill(prompt) + one step per later token.
std::pair<torch::Tensor, torch::Tensor> fullAndDecoded(m::TransformerModel& model, const torch::Tensor& idsIn,
                                                       int64_t prompt, bool teacher = false) {
  at::NoGradGuard noGrad;
  const auto ids = idsIn.to(model.parameters().front().device());
  m::ForwardOptions full;
  full.teacher = teacher;
  const auto reference = model.forward(ids, full).logits[0];  // [T,V]
  auto cache = model.newCache(1, 0, teacher);
  m::ForwardOptions step;
  step.cache = &cache;
  step.teacher = teacher;
  std::vector<torch::Tensor> rows{model.forward(ids.narrow(1, 0, prompt), step).logits[0]};
  for (int64_t t = prompt; t < ids.size(1); ++t) rows.push_back(model.forward(ids.narrow(1, t, 1), step).logits[0]);
  return {reference, torch::cat(rows, 0)};
}

}  // namespace

class TestDecoding : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void initTestCase() {
    HH_SKIP_UNLESS_TEST_DEVICE();  // the models decode on HH_TEST_DEVICE
    setenv("HH_NUM_THREADS", "1", 0);
  }

  void prefillContinuesAStateLikeSteps() {
    // fp64: 5 steps, then a 19-token prefill (chunk 4), against 24 steps.
    for (const auto rule : a::allUpdateRules()) {
      torch::manual_seed(3);
      const int64_t B = 2, H = 3, T = 24, F = 6, D = 5;
      const auto fq = torch::rand({B, H, T, F}, torch::kDouble) + 0.05;
      const auto fk = torch::rand({B, H, T, F}, torch::kDouble) + 0.05;
      const auto v = torch::randn({B, H, T, D}, torch::kDouble);
      a::RuleInputs gates;
      gates.gate = torch::rand({B, H, T}, torch::kDouble) * 0.5 + 0.5;
      gates.beta = torch::rand({B, H, T}, torch::kDouble);
      gates.keyDecay = torch::rand({B, H, T, F}, torch::kDouble) * 0.5 + 0.5;
      gates.valueDecay = torch::rand({B, H, T, D}, torch::kDouble) * 0.5 + 0.5;
      a::RuleOptions o;
      o.rule = rule;
      o.chunkSize = 4;
      auto stepped = a::initialState(B, H, F, D, o, torch::kDouble);
      auto mixed = a::initialState(B, H, F, D, o, torch::kDouble);
      std::vector<torch::Tensor> ys, mixedYs;
      for (int64_t t = 0; t < T; ++t) {
        const auto g = gates.slice(t, 1);
        ys.push_back(a::linearStep(stepped, fq.select(2, t), fk.select(2, t), v.select(2, t), g, o));
        if (t < 5) mixedYs.push_back(a::linearStep(mixed, fq.select(2, t), fk.select(2, t), v.select(2, t), g, o));
      }
      const auto rest = a::linearPrefill(mixed, fq.narrow(2, 5, T - 5), fk.narrow(2, 5, T - 5), v.narrow(2, 5, T - 5),
                                         gates.slice(5, T - 5), o);
      const auto expected = torch::stack(ys, 2), got = torch::cat({torch::stack(mixedYs, 2), rest}, 2);
      const double err = hh::test::relativeError(got, expected);
      QVERIFY2(err < 1e-10, (a::toString(rule) + " output " + std::to_string(err)).c_str());
      QVERIFY2(hh::test::relativeError(mixed.S, stepped.S) < 1e-10, (a::toString(rule) + " state S").c_str());
      if (stepped.z.defined()) QVERIFY(hh::test::relativeError(mixed.z, stepped.z) < 1e-10);
      QCOMPARE(mixed.position, int64_t(T));
    }
  }

  void everyFeatureMapAndRuleDecodesLikeTheFullForward() {
    auto model = tinyLlama();
    torch::manual_seed(5);
    const auto ids = torch::randint(61, {1, 40});
    int checked = 0;
    for (const auto kind : a::allFeatureMapKinds()) {
      for (const auto rule : a::allUpdateRules()) {
        if (!a::ruleFeatureMapConflict(linearConfig(kind, rule)).empty()) {  // refused (delta_mao on a signed map)
          ++checked;
          continue;
        }
        model->setAttentionPlan(m::AttentionPlan::uniform(model->layerCount(), linearConfig(kind, rule)));
        perturbAdapters(*model);
        // Identity and linear features are signed: the additive and gated normalisers can come close
        // to zero and amplify fp32 rounding (1.04e-4 and 2.1e-4 seen). Those are checked in fp64 below.
        const bool signedMap = kind == a::FeatureMapKind::Identity || kind == a::FeatureMapKind::Linear;
        if (signedMap && (rule == a::UpdateRule::Additive || rule == a::UpdateRule::Gated)) {
          ++checked;
          continue;
        }
        const auto [reference, decoded] = fullAndDecoded(*model, ids, 13);
        const double err = hh::test::relativeError(decoded, reference);
        const auto what = a::toString(kind) + "/" + a::toString(rule) + " rel " + std::to_string(err);
        QVERIFY2(std::isfinite(err) && err < 1e-4, what.c_str());
        ++checked;
      }
    }
    QCOMPARE(checked, int(a::allFeatureMapKinds().size() * a::allUpdateRules().size()));
  }

  void hybridPlanAndTeacherUseKvCaches() {
    auto model = tinyLlama();
    torch::manual_seed(6);
    const auto ids = torch::randint(61, {1, 33});
    model->setAttentionPlan(m::AttentionPlan::hybrid(3, {0, 2}, linearConfig(a::FeatureMapKind::Hedgehog, a::UpdateRule::Gated)));
    perturbAdapters(*model);
    auto [reference, decoded] = fullAndDecoded(*model, ids, 9);
    QVERIFY2(hh::test::relativeError(decoded, reference) < 1e-4, "hybrid plan");
    const auto cache = model->newCache();
    QVERIFY(cache.layers[0].linear && !cache.layers[1].linear && cache.layers[2].linear);
    // The converted model run as its teacher: every layer softmax with a KV cache.
    std::tie(reference, decoded) = fullAndDecoded(*model, ids, 9, /*teacher=*/true);
    QVERIFY2(hh::test::relativeError(decoded, reference) < 1e-4, "teacher");
    // Past 256 cached positions a single query takes the matrix-vector path (GQA: 2 heads per KV head).
    const auto longIds = torch::randint(61, {1, 300});
    std::tie(reference, decoded) = fullAndDecoded(*model, longIds, 280, /*teacher=*/true);
    QVERIFY2(hh::test::relativeError(decoded, reference) < 1e-4, "teacher, 300 positions");
    // A prompt of one token, then steps only.
    std::tie(reference, decoded) = fullAndDecoded(*model, ids, 1);
    QVERIFY2(hh::test::relativeError(decoded, reference) < 1e-4, "one-token prompt");
  }

  void windowHybridDecodesWithAFlatRingBuffer() {
    // hedgehog_window(5) in layers 0 and 2 (GQA), softmax in layer 1: a 9-token prefill (longer
    // than the window) and a 1-token prompt, then steps; generation's state stays one size.
    auto model = tinyLlama();
    torch::manual_seed(12);
    const auto ids = torch::randint(61, {1, 40});
    model->setAttentionPlan(m::AttentionPlan::fromSpecs({"hedgehog_window(5)", "softmax", "hedgehog_window(5)"}));
    perturbAdapters(*model);
    for (const int64_t prompt : {9, 1}) {
      const auto [reference, decoded] = fullAndDecoded(*model, ids, prompt);
      QVERIFY2(hh::test::relativeError(decoded, reference) < 1e-4, ("prompt " + std::to_string(prompt)).c_str());
    }
    model->setAttentionPlan(m::AttentionPlan::fromSpecs({"hedgehog_window(5)", "hedgehog_window(5)", "hedgehog"}));
    hh::gen::GenerateOptions o;
    o.maxNewTokens = 60;
    std::vector<int64_t> bytes;
    hh::gen::generate(*model, {1, 2, 3}, o, [&](const hh::gen::TokenEvent& e) {
      bytes.push_back(e.cacheBytes);
      return true;
    });
    for (const auto b : bytes) QCOMPARE(b, bytes.front());
    // Per window layer: S (F 16 x D 8), z (16), ring keys and values (5 x 8 each), ring features
    // (5 x 16), 4 heads, fp32; the Hedgehog layer S and z.
    const int64_t window = 4 * (16 * 8 + 16 + 5 * 8 * 2 + 5 * 16) * 4, plain = 4 * (16 * 8 + 16) * 4;
    QCOMPARE(bytes.front(), 2 * window + plain);
  }

  void gpt2FixtureDecodes() {
    // Learned positions read at the cache's offset; a softmax GPT-2 and a converted one.
    auto model = hh::test::loadOnTestDevice(std::string(HH_FIXTURES_DIR) + "/tiny-random-gpt2");
    torch::manual_seed(8);
    const auto ids = torch::randint(1000, {1, 30});
    auto [reference, decoded] = fullAndDecoded(*model, ids, 7);
    QVERIFY2(hh::test::relativeError(decoded, reference) < 1e-4, "softmax GPT-2");
    model->setAttentionPlan(m::AttentionPlan::uniform(model->layerCount(), linearConfig(a::FeatureMapKind::Hedgehog, a::UpdateRule::Additive)));
    perturbAdapters(*model);
    std::tie(reference, decoded) = fullAndDecoded(*model, ids, 7);
    QVERIFY2(hh::test::relativeError(decoded, reference) < 1e-4, "Hedgehog GPT-2");
  }

  void identityNormaliserInFp64() {
    // Identity features are signed, so sum_j q.k_j can come close to zero and amplify fp32
    // rounding (1.04e-4 relative in the fp32 Llama above). In fp64 (GPT-2: its LayerNorm runs in
    // the model's dtype; the recurrent state follows the model's dtype) decoding matches to ~1e-11.
    auto model = hh::test::loadOnTestDevice(std::string(HH_FIXTURES_DIR) + "/tiny-random-gpt2");
    model->to(torch::kDouble);
    torch::manual_seed(9);
    const auto ids = torch::randint(1000, {1, 30});
    for (const auto kind : {a::FeatureMapKind::Identity, a::FeatureMapKind::Linear})
      for (const auto rule : {a::UpdateRule::Additive, a::UpdateRule::Gated}) {
        model->setAttentionPlan(m::AttentionPlan::uniform(model->layerCount(), linearConfig(kind, rule)));
        perturbAdapters(*model);
        const auto [reference, decoded] = fullAndDecoded(*model, ids, 7);
        const double err = hh::test::relativeError(decoded, reference);
        QVERIFY2(err < 1e-9, (a::toString(kind) + "/" + a::toString(rule) + " fp64 rel " + std::to_string(err)).c_str());
      }
  }

  void recurrentMemoryIsFlatAndKvGrows() {
    auto model = tinyLlama(2);
    model->setAttentionPlan(m::AttentionPlan::uniform(2, linearConfig(a::FeatureMapKind::Hedgehog, a::UpdateRule::Decay)));
    hh::gen::GenerateOptions o;
    o.maxNewTokens = 300;
    std::vector<int64_t> bytes;
    std::vector<float> decayMean;
    const auto result = hh::gen::generate(*model, {1, 2, 3}, o, [&](const hh::gen::TokenEvent& e) {
      bytes.push_back(e.cacheBytes);
      decayMean.push_back(e.decay.mean().item<float>());
      return true;
    });
    QCOMPARE(int64_t(result.tokens.size()), int64_t(300));
    QCOMPARE(result.stopReason, std::string("max tokens"));
    QVERIFY(bytes.front() > 0);
    for (const auto b : bytes) QCOMPARE(b, bytes.front());
    // 2 layers x 4 heads x F 16 x D 8 floats for S (the decay rule keeps no z).
    QCOMPARE(bytes.front(), int64_t(2 * 4 * 16 * 8 * 4));
    QVERIFY(decayMean.front() > 0 && decayMean.front() < 1);

    // The same model as softmax: the KV cache grows with position (no reservation).
    model->setAttentionPlan({});
    o.reserveCache = false;
    bytes.clear();
    bool normsAllNan = true;
    hh::gen::generate(*model, {1, 2, 3}, o, [&](const hh::gen::TokenEvent& e) {
      bytes.push_back(e.cacheBytes);
      normsAllNan = normsAllNan && torch::isnan(e.stateNorms).all().item<bool>();
      return true;
    });
    QVERIFY(normsAllNan);  // no recurrent state in a softmax model
    // layers x (K,V) x kv heads x positions x D x 4 bytes; the 300th token is never fed back: 302 positions
    QCOMPARE(bytes.back(), int64_t(2 * 2 * 2 * 302 * 8 * 4));
    QVERIFY(bytes.back() > bytes.front());
  }

  void generateStopsWhereItShould() {
    auto model = tinyLlama(2);
    hh::gen::GenerateOptions o;
    o.maxNewTokens = 20;
    const auto greedy = hh::gen::generate(*model, {4, 5, 6}, o);
    QCOMPARE(greedy.tokens.size(), size_t(20));
    // Greedy is deterministic; the first token it emits, used as a stop token, ends the run there.
    o.stopTokens = {greedy.tokens[2]};
    const auto stopped = hh::gen::generate(*model, {4, 5, 6}, o);
    QCOMPARE(stopped.stopReason, std::string("stop token"));
    QVERIFY(stopped.tokens.size() <= 3);
    QCOMPARE(stopped.tokens.back(), greedy.tokens[2]);
    // Cancel after 4 tokens.
    int seen = 0;
    const auto cancelled = hh::gen::generate(*model, {4, 5, 6}, {}, [&](const hh::gen::TokenEvent&) { return ++seen < 4; });
    QCOMPARE(cancelled.stopReason, std::string("cancelled"));
    QCOMPARE(cancelled.tokens.size(), size_t(4));
    // GPT-2's learned positions run out: the fixture has 512.
    auto gpt2 = m::loadModel(std::string(HH_FIXTURES_DIR) + "/tiny-random-gpt2");
    o.stopTokens.clear();
    o.maxNewTokens = 50;
    const auto full = hh::gen::generate(*gpt2, std::vector<int64_t>(500, 7), o);
    QCOMPARE(full.stopReason, std::string("context full"));
    // The prompt fills positions 0..499; tokens are produced for positions 500 .. 512 (the last
    // one from the forward pass at position 511, the model's last).
    QCOMPARE(full.tokens.size(), size_t(13));
  }

  void storiesEndWhereTheNextWouldBegin() {
    // stories260K: eos 2 from the config and the tokenizer, and its tokenizer starts every text
    // with <s> (1), as the model was trained: 1 ends a story too. GPT-2 frames nothing: its
    // end-of-text ids (config and tokenizer), not its bos.
    const std::string stories = std::string(HH_FIXTURES_DIR) + "/stories260K";
    const auto model = m::loadModel(stories);
    const auto tok = hh::tok::loadTokenizer(stories);
    QCOMPARE(hh::gen::endOfTextTokens(model->config(), *tok), (std::vector<int64_t>{2, 1}));
    const std::string gpt2 = std::string(HH_FIXTURES_DIR) + "/tiny-random-gpt2";
    const auto gpt2Tok = hh::tok::loadTokenizer(gpt2);
    const auto gpt2Config = m::loadModel(gpt2)->config();
    const auto ids = hh::gen::endOfTextTokens(gpt2Config, *gpt2Tok);
    QCOMPARE(ids, (std::vector<int64_t>{gpt2Config.eosTokenId, gpt2Tok->eosId()}));  // 98 and 0 in this fixture
    // A story sampled from "<s>Once upon a time" (seed 1) ends on one of them before 400 tokens.
    hh::gen::GenerateOptions o;
    o.maxNewTokens = 400;
    o.sampling.temperature = 1.0;
    o.sampling.seed = 1;
    o.stopTokens = hh::gen::endOfTextTokens(model->config(), *tok);
    const auto story = hh::gen::generate(*model, tok->encode("Once upon a time", true), o);
    qInfo("a sampled story: %zu tokens, stopped by %s (token %lld)", story.tokens.size(), story.stopReason.c_str(),
          (long long)story.tokens.back());
    QCOMPARE(story.stopReason, std::string("stop token"));
    QVERIFY(story.tokens.back() == 1 || story.tokens.back() == 2);
  }

  void everyListedEndOfTextStops() {
    // eos_token_id as Llama 3 writes it, a list: every entry ends a text, not the first alone.
    const std::string stories = std::string(HH_FIXTURES_DIR) + "/stories260K";
    const auto tok = hh::tok::loadTokenizer(stories);
    auto config = m::loadModel(stories)->config();
    auto j = m::modelConfigToJson(config);
    j["eos_token_id"] = nlohmann::json::array({40, 41, 42});
    config = m::parseModelConfig(j, "eos list");
    QCOMPARE(hh::gen::endOfTextTokens(config, *tok), (std::vector<int64_t>{40, 41, 42, 2, 1}));
    // A sampled run of a small model (seeded), then the same run told to stop at a list whose
    // second entry is a token it samples after a few others: it stops right there.
    auto model = tinyLlama(2);
    hh::gen::GenerateOptions o;
    o.maxNewTokens = 12;
    o.sampling.temperature = 1.0;
    o.sampling.seed = 3;
    const auto free = hh::gen::generate(*model, {3, 4, 5}, o);
    size_t at = 2;  // the first token from the third on that was not sampled before
    while (at < free.tokens.size() && std::find(free.tokens.begin(), free.tokens.begin() + long(at), free.tokens[at]) !=
                                          free.tokens.begin() + long(at))
      ++at;
    QVERIFY(at < free.tokens.size());
    int64_t unused = 0;
    while (std::find(free.tokens.begin(), free.tokens.end(), unused) != free.tokens.end()) ++unused;
    auto listed = m::modelConfigToJson(model->config());
    listed["eos_token_id"] = nlohmann::json::array({unused, free.tokens[at]});
    o.stopTokens = m::parseModelConfig(listed, "eos list").eosTokenIds;
    const auto stopped = hh::gen::generate(*model, {3, 4, 5}, o);
    QCOMPARE(stopped.stopReason, std::string("stop token"));
    QCOMPARE(stopped.tokens, std::vector<int64_t>(free.tokens.begin(), free.tokens.begin() + long(at) + 1));
  }

  void badInputsAreRefused() {
    auto model = tinyLlama(1);
    HH_VERIFY_THROWS(std::invalid_argument, hh::gen::generate(*model, {}, {}));
    HH_VERIFY_THROWS(std::invalid_argument, hh::gen::generate(*model, {3, 61}, {}));
    HH_VERIFY_THROWS(std::invalid_argument, hh::gen::generate(*model, {3, -1}, {}));
    hh::gen::GenerateOptions o;
    o.sampling.topP = 0;
    HH_VERIFY_THROWS(std::invalid_argument, hh::gen::generate(*model, {3}, o));
    auto gpt2 = m::loadModel(std::string(HH_FIXTURES_DIR) + "/tiny-random-gpt2");
    HH_VERIFY_THROWS(std::invalid_argument, hh::gen::generate(*gpt2, std::vector<int64_t>(512, 1), {}));
    auto bert = m::loadModel(std::string(HH_FIXTURES_DIR) + "/bert-tiniest");
    HH_VERIFY_THROWS(std::exception, hh::gen::generate(*bert, {1, 2}, {}));
  }
};

HH_TEST_SUITE(TestDecoding, "engine.generation.decoding", &TestDecoding::initTestCase,
              &TestDecoding::prefillContinuesAStateLikeSteps,
              &TestDecoding::everyFeatureMapAndRuleDecodesLikeTheFullForward,
              &TestDecoding::hybridPlanAndTeacherUseKvCaches, &TestDecoding::windowHybridDecodesWithAFlatRingBuffer,
              &TestDecoding::gpt2FixtureDecodes, &TestDecoding::identityNormaliserInFp64,
              &TestDecoding::recurrentMemoryIsFlatAndKvGrows, &TestDecoding::generateStopsWhereItShould,
              &TestDecoding::storiesEndWhereTheNextWouldBegin, &TestDecoding::everyListedEndOfTextStops,
              &TestDecoding::badInputsAreRefused)

}  // namespace test_decoding

#if HH_HAVE_QTEST
#include "test_decoding.moc"
#endif
