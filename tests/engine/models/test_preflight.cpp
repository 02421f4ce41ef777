// engine.models.preflight: the report on the GPT-2 and BERT fixtures (layers, heads, head dim,
// vocab in config vs tokenizer vs embedding rows, tied head, dtype, causal vs bidirectional,
// positional scheme, parameters, the weights file), its JSON and text forms, a converted folder
// (saveModel after setAttentionPlan) reporting its converted layers, a grouped-query Llama with
// RoPE (its theta printed as a whole number), and a BF16 folder (reported as BF16, loaded as F32);
// the weights' size in KiB below a MiB; and the verdict agrees with loading (the decoder bias
// under either name, a missing adapter tensor, an lm_head equal to the tied embedding).

#include <torch/types.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <string>

#include "engine/io/safetensors.h"
#include "engine/models/expected_weights.h"
#include "engine/models/model_io.h"
#include "engine/models/preflight.h"
#include "engine/models/tensor_file.h"
#include "tests/engine/models/model_test_support.h"
#include "tests/support/hh_test.h"

namespace test_preflight {

namespace {

namespace fs = std::filesystem;
namespace m = hh::models;
using Severity = m::PreflightFinding::Severity;

const std::string kGpt2 = std::string(HH_FIXTURES_DIR) + "/tiny-random-gpt2";
const std::string kBert = std::string(HH_FIXTURES_DIR) + "/bert-tiniest";

int countFindings(const m::PreflightReport& r, Severity severity) {
  int n = 0;
  for (const auto& f : r.findings) n += f.severity == severity ? 1 : 0;
  return n;
}
bool hasFinding(const m::PreflightReport& r, Severity severity, const std::string& needle) {
  for (const auto& f : r.findings)
    if (f.severity == severity && f.message.find(needle) != std::string::npos) return true;
  return false;
}

// Every tensor of `dir`'s model.safetensors, read as F32.
std::vector<std::pair<std::string, torch::Tensor>> readAll(const std::string& dir) {
  const auto file = hh::io::SafetensorsFile::open(dir + "/model.safetensors");
  std::vector<std::pair<std::string, torch::Tensor>> tensors;
  for (const auto& name : file.names()) tensors.emplace_back(name, m::readTensor(file, name));
  return tensors;
}

// `from`'s config.json and `tensors` as a model folder at `dir`.
void writeFolderLike(const std::string& from, const std::string& dir,
                     const std::vector<std::pair<std::string, torch::Tensor>>& tensors) {
  fs::create_directories(dir);
  fs::copy_file(from + "/config.json", dir + "/config.json");
  m::writeTensorFile(dir + "/model.safetensors", tensors);
}

// Whether loadModel takes the folder.
bool loads(const std::string& dir) {
  try {
    m::loadModel(dir);
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

hh::attn::LinearAttentionConfig hedgehog() {
  hh::attn::LinearAttentionConfig c;
  c.featureMap.kind = hh::attn::FeatureMapKind::Hedgehog;
  return c;
}

}  // namespace

class TestPreflight : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void gpt2Fixture() {
    const auto r = m::preflight(kGpt2);
    qInfo("%s", r.text().c_str());
    QVERIFY(r.ready());
    QVERIFY(r.configOk && r.weightsOk && r.tokenizerOk);
    QCOMPARE(r.architecture, std::string("gpt2"));
    QCOMPARE(r.modelType, std::string("gpt2"));
    QCOMPARE(r.head, std::string("causal LM"));
    QCOMPARE(r.layers, int64_t(5));
    QCOMPARE(r.heads, int64_t(4));
    QCOMPARE(r.kvHeads, int64_t(4));
    QCOMPARE(r.headDim, int64_t(8));
    QCOMPARE(r.hiddenSize, int64_t(32));
    QCOMPARE(r.intermediateSize, int64_t(128));  // n_inner null
    QCOMPARE(r.maxPositions, int64_t(512));
    QCOMPARE(r.activation, std::string("gelu_new"));
    QCOMPARE(r.configVocab, int64_t(1000));
    QCOMPARE(r.embeddingRows, int64_t(1000));
    QCOMPARE(r.tokenizerVocab, int64_t(1000));
    QVERIFY(r.tiedHead);
    QVERIFY(r.causal);
    QCOMPARE(r.positional, m::toString(m::PositionalScheme::Learned));
    QCOMPARE(r.ropeTheta, 0.0);
    QCOMPARE(r.dtype, std::string("F32"));
    QCOMPARE(r.weightsFile, kGpt2 + "/model.safetensors");
    QCOMPARE(r.shards, int64_t(1));
    QCOMPARE(r.tensorsInFile, int64_t(5 * 12 + 4));
    const auto file = hh::io::SafetensorsFile::open(kGpt2 + "/model.safetensors");
    QCOMPARE(r.weightBytes, uint64_t(fs::file_size(kGpt2 + "/model.safetensors") - file.dataStart()));
    QCOMPARE(r.parameters, m::expectedParameterCount(m::loadModelConfig(kGpt2)));
    QCOMPARE(r.parameters, m::loadModel(kGpt2)->parameterCount());
    QVERIFY(r.unusedTensors.empty());
    QCOMPARE(r.convertedLayers, int64_t(0));
    QCOMPARE(countFindings(r, Severity::Blocker), 0);
    QCOMPARE(countFindings(r, Severity::Warning), 0);
  }

  void bertFixture() {
    if (!fs::exists(kBert + "/model.safetensors")) QSKIP("bert-tiniest has no config.json/model.safetensors");
    const auto r = m::preflight(kBert);
    qInfo("%s", r.text().c_str());
    QVERIFY(r.ready());
    QCOMPARE(r.architecture, std::string("bert"));
    QCOMPARE(r.head, std::string("masked LM"));  // BertLMHeadModel: the same MLM head
    QCOMPARE(r.layers, int64_t(1));
    QCOMPARE(r.heads, int64_t(1));
    QCOMPARE(r.headDim, int64_t(4));
    QCOMPARE(r.hiddenSize, int64_t(4));
    QCOMPARE(r.configVocab, int64_t(30522));
    QCOMPARE(r.embeddingRows, int64_t(30522));
    QCOMPARE(r.tokenizerVocab, int64_t(30522));
    QVERIFY(r.tiedHead);
    QVERIFY(!r.causal);
    QCOMPARE(r.positional, m::toString(m::PositionalScheme::Learned));
    QCOMPARE(r.normEps, 1e-12);
    QCOMPARE(r.dtype, std::string("F32"));
    QVERIFY(r.unusedTensors.empty());
    QCOMPARE(r.parameters, m::loadModel(kBert)->parameterCount());
    QVERIFY(hasFinding(r, Severity::Info, "bidirectional"));
    QVERIFY(hasFinding(r, Severity::Warning, "head_dim 4"));  // not a multiple of 8
    QCOMPARE(countFindings(r, Severity::Blocker), 0);
  }

  void jsonAndTextForms() {
    const auto r = m::preflight(kGpt2);
    const auto j = nlohmann::json::parse(r.toJson().dump());  // survives serialisation
    QCOMPARE(j.at("ready").get<bool>(), true);
    QCOMPARE(j.at("architecture").get<std::string>(), std::string("gpt2"));
    QCOMPARE(j.at("layers").get<int64_t>(), int64_t(5));
    QCOMPARE(j.at("heads").get<int64_t>(), int64_t(4));
    QCOMPARE(j.at("kv_heads").get<int64_t>(), int64_t(4));
    QCOMPARE(j.at("head_dim").get<int64_t>(), int64_t(8));
    QCOMPARE(j.at("vocab_config").get<int64_t>(), int64_t(1000));
    QCOMPARE(j.at("embedding_rows").get<int64_t>(), int64_t(1000));
    QCOMPARE(j.at("tokenizer_vocab").get<int64_t>(), int64_t(1000));
    QCOMPARE(j.at("tied_head").get<bool>(), true);
    QCOMPARE(j.at("causal").get<bool>(), true);
    QCOMPARE(j.at("dtype").get<std::string>(), std::string("F32"));
    QCOMPARE(j.at("positional").get<std::string>(), r.positional);
    QCOMPARE(j.at("parameters").get<int64_t>(), r.parameters);
    QCOMPARE(j.at("shards").get<int64_t>(), int64_t(1));
    QCOMPARE(j.at("converted_layers").get<int64_t>(), int64_t(0));
    QVERIFY(j.at("unused_tensors").is_array() && j.at("unused_tensors").empty());
    QVERIFY(j.at("findings").is_array());
    // A broken folder: findings carry severity names and messages.
    hh::test::TempDir dir("preflight_json");
    const auto bad = nlohmann::json::parse(m::preflight(dir.path()).toJson().dump());
    QCOMPARE(bad.at("ready").get<bool>(), false);
    QVERIFY(!bad.at("findings").empty());
    for (const auto& f : bad.at("findings")) {
      const auto severity = f.at("severity").get<std::string>();
      QVERIFY(severity == "blocker" || severity == "warning" || severity == "info");
      QVERIFY(!f.at("message").get<std::string>().empty());
    }
    QCOMPARE(bad.at("findings")[0].at("severity").get<std::string>(), std::string("blocker"));
    // The text form: one line per field, the verdict, the findings.
    const auto text = r.text();
    for (const char* needle : {"pre-flight: ", "architecture", "gpt2", "layers", "head dim", "tied head", "F32",
                               "1000 tokens", "ready to convert", "all softmax"})
      QVERIFY2(text.find(needle) != std::string::npos, needle);
    QVERIFY(m::preflight(dir.path()).text().find("NOT ready to convert") != std::string::npos);
    // The weights' size in the unit that reads (a sub-MiB file was "0 MiB").
    const auto gpt2 = m::preflight(kGpt2);
    QVERIFY(gpt2.weightBytes > 1024 && gpt2.weightBytes < (1 << 20));
    const auto kib = std::to_string(gpt2.weightBytes >> 10) + " KiB)";
    QVERIFY2(gpt2.text().find(kib) != std::string::npos, kib.c_str());
    QCOMPARE(m::humanCount(111968), std::string("112.0 K"));
    QCOMPARE(m::humanCount(124439808), std::string("124.4 M"));
    QCOMPARE(m::humanCount(999), std::string("999"));
  }

  void convertedFolder() {
    auto model = m::loadModel(kGpt2);
    model->setAttentionPlan(m::AttentionPlan::hybrid(5, {1, 3}, hedgehog()));
    hh::test::TempDir dir("preflight_converted");
    m::saveModel(*model, dir.file("converted"), kGpt2);
    const auto r = m::preflight(dir.file("converted"));
    qInfo("%s", r.text().c_str());
    QVERIFY2(r.ready(), r.text().c_str());
    QCOMPARE(r.convertedLayers, int64_t(2));
    QCOMPARE(r.toJson().at("converted_layers").get<int64_t>(), int64_t(2));
    QVERIFY(r.text().find("2 layers already linear") != std::string::npos);
    QVERIFY(r.unusedTensors.empty());  // the adapter tensors are not "unused"
    QCOMPARE(r.tensorsInFile, int64_t(5 * 12 + 4 + model->adapterTensors().size()));
    QCOMPARE(r.tokenizerVocab, int64_t(1000));
    QCOMPARE(r.parameters, m::preflight(kGpt2).parameters);  // the body's count
  }

  void groupedQueryLlama() {
    const nlohmann::json config{{"model_type", "llama"},   {"vocab_size", 64},         {"hidden_size", 32},
                                {"num_hidden_layers", 2},  {"num_attention_heads", 8}, {"num_key_value_heads", 2},
                                {"intermediate_size", 48}, {"rope_theta", 500000.0}};
    const auto model = m::createModel(m::parseModelConfig(config, "llama"));
    hh::test::TempDir dir("preflight_llama");
    m::saveModel(*model, dir.file("llama"));
    const auto r = m::preflight(dir.file("llama"));
    QVERIFY2(r.ready(), r.text().c_str());
    QCOMPARE(r.architecture, std::string("llama"));
    QCOMPARE(r.heads, int64_t(8));
    QCOMPARE(r.kvHeads, int64_t(2));
    QCOMPARE(r.headDim, int64_t(4));
    QCOMPARE(r.positional, m::toString(m::PositionalScheme::Rotary));
    QCOMPARE(r.ropeTheta, 500000.0);
    QVERIFY(!r.tiedHead);
    QVERIFY(r.causal);
    QVERIFY(r.text().find("grouped-query") != std::string::npos);
    QVERIFY2(r.text().find("theta 500000\n") != std::string::npos, r.text().c_str());  // not 500000.000000
    QVERIFY(!r.tokenizerOk);  // no tokenizer files: a warning, not a blocker
    QVERIFY(hasFinding(r, Severity::Warning, "no usable tokenizer"));
  }

  // Pre-flight says what loading does: the decoder bias under its other name, a converted
  // folder without one adapter tensor, an lm_head.weight in a tied checkpoint (equal to the
  // embedding: tied; different: untied).
  void agreesWithTheLoader() {
    hh::test::TempDir dir("preflight_loader");
    if (fs::exists(kBert + "/model.safetensors")) {
      auto tensors = readAll(kBert);
      for (auto& [name, t] : tensors)
        if (name == "cls.predictions.bias") name = "cls.predictions.decoder.bias";
      writeFolderLike(kBert, dir.file("bert"), tensors);
      const auto r = m::preflight(dir.file("bert"));
      QVERIFY2(r.ready() && r.unusedTensors.empty(), r.text().c_str());
      QVERIFY(loads(dir.file("bert")));
    }
    auto converted = m::loadModel(kGpt2);
    converted->setAttentionPlan(m::AttentionPlan::hybrid(5, {1, 3}, hedgehog()));
    m::saveModel(*converted, dir.file("converted"), kGpt2);
    const std::string dropped = converted->adapterTensors().back().first;
    auto tensors = readAll(dir.file("converted"));
    tensors.erase(std::remove_if(tensors.begin(), tensors.end(), [&](const auto& t) { return t.first == dropped; }),
                  tensors.end());
    writeFolderLike(dir.file("converted"), dir.file("incomplete"), tensors);
    const auto incomplete = m::preflight(dir.file("incomplete"));
    QVERIFY2(!incomplete.ready() && hasFinding(incomplete, Severity::Blocker, "missing tensor \"" + dropped + "\""),
             incomplete.text().c_str());
    QVERIFY(!loads(dir.file("incomplete")));
    for (const bool equal : {true, false}) {
      auto withHead = readAll(kGpt2);
      torch::Tensor embedding;
      for (const auto& [name, t] : withHead)
        if (name.find("wte.weight") != std::string::npos) embedding = t;
      withHead.emplace_back("lm_head.weight", equal ? embedding.clone() : embedding + 1.0f);
      const auto folder = dir.file(equal ? "head_equal" : "head_differs");
      writeFolderLike(kGpt2, folder, withHead);
      const auto r = m::preflight(folder);
      QVERIFY2(r.ready() && r.unusedTensors.empty(), r.text().c_str());
      QCOMPARE(r.tiedHead, equal);
      QCOMPARE(m::loadModel(folder)->config().tieWordEmbeddings, equal);
    }
  }

  void bf16Folder() {
    hh::test::TempDir dir("preflight_bf16");
    fs::copy_file(kGpt2 + "/config.json", dir.file("config.json"));
    const auto file = hh::io::SafetensorsFile::open(kGpt2 + "/model.safetensors");
    std::vector<std::pair<std::string, torch::Tensor>> tensors;
    for (const auto& name : file.names()) tensors.emplace_back(name, hh::models::readTensor(file, name).to(torch::kBFloat16));
    hh::models::writeTensorFile(dir.file("model.safetensors"), tensors);
    const auto r = m::preflight(dir.path());
    QVERIFY2(r.ready(), r.text().c_str());
    QCOMPARE(r.dtype, std::string("BF16"));
    QVERIFY(hasFinding(r, Severity::Info, "BF16"));
    // Loaded as F32 with the BF16 values.
    at::NoGradGuard noGrad;
    auto model = m::loadModel(dir.path());
    for (const auto& [name, t] : model->exportWeights()) QVERIFY(t.scalar_type() == torch::kFloat);
    const auto ids = torch::remainder(torch::arange(16, torch::kLong) * 61, 1000).view({2, 8});
    const double err = hh::test::relativeError(model->forward(ids).logits, m::loadModel(kGpt2)->forward(ids).logits);
    qInfo("BF16 weights vs F32: logits relative error %.3g", err);
    QVERIFY(err < 5e-2);
  }
};

// clang-format off
HH_TEST_SUITE(TestPreflight, "engine.models.preflight", &TestPreflight::gpt2Fixture, &TestPreflight::bertFixture, &TestPreflight::jsonAndTextForms, &TestPreflight::convertedFolder, &TestPreflight::groupedQueryLlama, &TestPreflight::agreesWithTheLoader, &TestPreflight::bf16Folder)
// clang-format on

}  // namespace test_preflight

#if HH_HAVE_QTEST
#include "test_preflight.moc"
#endif
