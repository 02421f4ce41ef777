// engine.models.bad_checkpoints: one broken model folder per test, made from a copy of the tiny
// GPT-2 fixture. Each asserts that loadModel throws with a message naming the file and the
// problem, and that preflight — which must never throw — reports a Blocker for it. Cases:
// truncated weights, offsets past the end, overlapping tensors, an I64 weight, an unknown dtype,
// a missing tensor, shapes that disagree with config.json, config.json that is not JSON, a
// tokenizer larger than the embedding (preflight only: the model itself loads), pickle-only
// folders (garbage bytes: the file is refused by name, never parsed), an empty folder and a
// sharded index naming a missing shard.

#include <torch/types.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "engine/io/safetensors.h"
#include "engine/models/model_io.h"
#include "engine/models/preflight.h"
#include "engine/models/tensor_file.h"
#include "tests/support/temp_dir.h"
#include "tests/support/hh_test.h"

namespace test_bad_checkpoints {

namespace {

namespace fs = std::filesystem;
namespace m = hh::models;
using nlohmann::json;

const std::string kFixture = std::string(HH_FIXTURES_DIR) + "/tiny-random-gpt2";

// A copy of the GPT-2 fixture (without its reference outputs) in a temporary folder.
class Folder {
 public:
  explicit Folder(const std::string& tag, bool copyFixture = true) : dir_(tag) {
    if (!copyFixture) return;
    for (const auto& entry : fs::directory_iterator(kFixture))
      if (entry.path().filename() != "reference.safetensors")
        fs::copy_file(entry.path(), fs::path(dir_.path()) / entry.path().filename());
  }
  std::string path() const { return dir_.path(); }
  std::string file(const std::string& name) const { return dir_.file(name); }
  std::string weights() const { return file("model.safetensors"); }

 private:
  hh::test::TempDir dir_;
};

std::string readBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}
void writeBytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}
std::string u64le(uint64_t n) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[size_t(i)] = char((n >> (8 * i)) & 0xff);
  return s;
}

// Rewrites a safetensors file's JSON header through `edit`, keeping the data bytes.
void editHeader(const std::string& path, const std::function<void(json&)>& edit) {
  const auto bytes = readBytes(path);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | uint8_t(bytes[size_t(i)]);
  auto header = json::parse(bytes.substr(8, n));
  edit(header);
  const auto text = header.dump();
  writeBytes(path, u64le(text.size()) + text + bytes.substr(8 + n));
}

// Every tensor of the fixture, in name order, passed through `edit` (which may drop or change
// entries), written back as the folder's model.safetensors.
void rewriteTensors(const std::string& path,
                    const std::function<void(std::vector<std::pair<std::string, torch::Tensor>>&)>& edit) {
  std::vector<std::pair<std::string, torch::Tensor>> tensors;
  {
    const auto file = hh::io::SafetensorsFile::open(kFixture + "/model.safetensors");
    for (const auto& name : file.names()) tensors.emplace_back(name, hh::models::readTensor(file, name));
  }
  edit(tensors);
  hh::models::writeTensorFile(path, tensors);
}

// "" when preflight(dir) returns (never throws) with a Blocker holding every needle.
std::string blockerProblem(const std::string& dir, const std::vector<std::string>& needles) {
  m::PreflightReport report;
  try {
    report = m::preflight(dir);
  } catch (const std::exception& e) {
    return std::string("preflight threw: ") + e.what();
  }
  if (report.ready()) return "preflight says ready:\n" + report.text();
  for (const auto& f : report.findings) {
    if (f.severity != m::PreflightFinding::Severity::Blocker) continue;
    bool all = true;
    for (const auto& needle : needles) all = all && f.message.find(needle) != std::string::npos;
    if (all) {
      qInfo("  preflight blocker: %s", f.message.c_str());
      return "";
    }
  }
  return "no blocker names all of the needles:\n" + report.text();
}

// loadModel(dir) throws a message holding every needle ("" when it does).
std::string loadProblem(const std::string& dir, const std::vector<std::string>& needles) {
  try {
    m::loadModel(dir);
  } catch (const std::exception& e) {
    const std::string what = e.what();
    for (const auto& needle : needles)
      if (what.find(needle) == std::string::npos) return "\"" + what + "\" lacks \"" + needle + "\"";
    qInfo("  loadModel: %s", what.c_str());
    return "";
  }
  return "loadModel(" + dir + ") did not throw";
}

#define CHECK_LOAD_FAILS(dir, ...)                           \
  do {                                                       \
    const auto hh_problem = loadProblem(dir, {__VA_ARGS__}); \
    QVERIFY2(hh_problem.empty(), hh_problem.c_str());        \
  } while (0)
#define CHECK_BLOCKER(dir, ...)                                 \
  do {                                                          \
    const auto hh_problem = blockerProblem(dir, {__VA_ARGS__}); \
    QVERIFY2(hh_problem.empty(), hh_problem.c_str());           \
  } while (0)

}  // namespace

class TestBadCheckpoints : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void fixtureIsGood() {
    // The base of every case loads and passes preflight untouched.
    Folder f("bad_base");
    QVERIFY(m::loadModel(f.path()) != nullptr);
    const auto report = m::preflight(f.path());
    QVERIFY2(report.ready(), report.text().c_str());
  }

  void truncatedWeights() {
    Folder f("bad_truncated");
    fs::resize_file(f.weights(), fs::file_size(f.weights()) / 2);
    HH_VERIFY_THROWS(hh::io::FormatError, m::loadModel(f.path()));
    CHECK_LOAD_FAILS(f.path(), f.weights(), "truncated");
    CHECK_BLOCKER(f.path(), f.weights(), "truncated");
  }

  void offsetsPastTheEnd() {
    // wte is the last tensor in the buffer: claim one more row than the file holds.
    Folder f("bad_offsets");
    editHeader(f.weights(), [](json& h) {
      auto& wte = h["transformer.wte.weight"];
      wte["shape"] = {1001, 32};
      wte["data_offsets"][1] = wte["data_offsets"][1].get<uint64_t>() + 32 * 4;
    });
    CHECK_LOAD_FAILS(f.path(), f.weights(), "transformer.wte.weight", "past the end");
    CHECK_BLOCKER(f.path(), f.weights(), "past the end");
  }

  void overlappingTensors() {
    // A hand-written header: wpe's bytes [8, 24) overlap wte's [0, 16).
    Folder f("bad_overlap");
    const std::string header = R"({"transformer.wte.weight":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]},)"
                               R"("transformer.wpe.weight":{"dtype":"F32","shape":[2,2],"data_offsets":[8,24]}})";
    writeBytes(f.weights(), u64le(header.size()) + header + std::string(24, '\0'));
    CHECK_LOAD_FAILS(f.path(), f.weights(), "overlapping", "transformer.wte.weight", "transformer.wpe.weight");
    CHECK_BLOCKER(f.path(), f.weights(), "overlapping");
  }

  void integerWeight() {
    Folder f("bad_i64");
    rewriteTensors(f.weights(), [](auto& tensors) {
      for (auto& [name, t] : tensors)
        if (name == "transformer.ln_f.weight") t = t.to(torch::kLong);
    });
    CHECK_LOAD_FAILS(f.path(), f.weights(), "transformer.ln_f.weight", "I64");
    CHECK_BLOCKER(f.path(), f.weights(), "transformer.ln_f.weight", "I64");
  }

  void unsupportedDtype() {
    // An 8-bit float name the reader does not know (same byte count as U8).
    Folder f("bad_dtype");
    editHeader(f.weights(), [](json& h) { h["transformer.ln_f.bias"]["dtype"] = "F8_E4M3"; });
    CHECK_LOAD_FAILS(f.path(), f.weights(), "transformer.ln_f.bias", "F8_E4M3");
    CHECK_BLOCKER(f.path(), f.weights(), "F8_E4M3");
  }

  void missingTensor() {
    Folder f("bad_missing");
    rewriteTensors(f.weights(), [](auto& tensors) {
      tensors.erase(std::remove_if(tensors.begin(), tensors.end(),
                                   [](const auto& t) { return t.first == "transformer.h.2.mlp.c_fc.bias"; }),
                    tensors.end());
    });
    CHECK_LOAD_FAILS(f.path(), f.weights(), "missing tensor", "transformer.h.2.mlp.c_fc.bias");
    CHECK_BLOCKER(f.path(), f.weights(), "missing tensor", "transformer.h.2.mlp.c_fc.bias");
  }

  void shapesDisagreeWithConfig() {
    // config.json says n_embd 16; the file holds 32-wide tensors.
    Folder f("bad_shape");
    auto config = json::parse(readBytes(f.file("config.json")));
    config["n_embd"] = 16;
    hh::test::writeJson(f.file("config.json"), config);
    CHECK_LOAD_FAILS(f.path(), f.weights(), "transformer.wte.weight", "[1000, 32]", "[1000, 16]", "n_embd");
    CHECK_BLOCKER(f.path(), f.weights(), "transformer.wte.weight", "[1000, 32]", "[1000, 16]");
  }

  void configNotJson() {
    Folder f("bad_config");
    writeBytes(f.file("config.json"), "{\"model_type\": \"gpt2\", \"n_embd\": 32,,}");
    HH_VERIFY_THROWS(m::ConfigError, m::loadModel(f.path()));
    CHECK_LOAD_FAILS(f.path(), f.file("config.json"), "not valid JSON");
    CHECK_BLOCKER(f.path(), f.file("config.json"), "not valid JSON");
  }

  void tokenizerLargerThanEmbedding() {
    // The real GPT-2 tokenizer (50257 tokens) beside a 1000-row embedding.
    Folder f("bad_tokenizer");
    for (const char* name : {"tokenizer.json", "vocab.json", "merges.txt"})
      fs::copy_file(std::string(HH_FIXTURES_DIR) + "/gpt2-tokenizer/" + name, f.file(name),
                    fs::copy_options::overwrite_existing);
    QVERIFY(m::loadModel(f.path()) != nullptr);  // the weights themselves are fine
    CHECK_BLOCKER(f.path(), "50257", "1000 rows");
  }

  void pickleOnly() {
    // Garbage with a pickle's first bytes: it must be refused by name, never parsed.
    std::string garbage = "\x80\x02}q\x00(X";
    for (int i = 0; i < 4096; ++i) garbage.push_back(char((i * 7919) & 0xff));
    for (const bool withConfig : {false, true}) {
      Folder f(withConfig ? "bad_pickle_config" : "bad_pickle", /*copyFixture=*/false);
      writeBytes(f.file("pytorch_model.bin"), garbage);
      if (withConfig) fs::copy_file(kFixture + "/config.json", f.file("config.json"));
      CHECK_LOAD_FAILS(f.path(), f.file("pytorch_model.bin"), "pickle", "save_file", "safetensors");
      CHECK_BLOCKER(f.path(), f.file("pytorch_model.bin"), "pickle");
      QVERIFY(readBytes(f.file("pytorch_model.bin")) == garbage);
    }
  }

  void emptyFolder() {
    Folder f("bad_empty", /*copyFixture=*/false);
    CHECK_LOAD_FAILS(f.path(), f.path());
    CHECK_BLOCKER(f.path(), f.file("config.json"));
    CHECK_BLOCKER(f.path(), "no model.safetensors");
    // Not a folder at all.
    CHECK_LOAD_FAILS(f.file("nothing-here"), f.file("nothing-here"));
    CHECK_BLOCKER(f.file("nothing-here"), f.file("nothing-here"));
  }

  void shardMissing() {
    // The fixture split in two shards under an index; first both present (loads, same logits),
    // then the second removed.
    Folder f("bad_shards");
    const auto file = hh::io::SafetensorsFile::open(kFixture + "/model.safetensors");
    std::vector<std::pair<std::string, torch::Tensor>> first, second;
    json weightMap = json::object();
    for (const auto& name : file.names()) {
      const bool inFirst = name.find(".h.3.") == std::string::npos && name.find(".h.4.") == std::string::npos &&
                           name.find("wte") == std::string::npos;
      (inFirst ? first : second).emplace_back(name, hh::models::readTensor(file, name));
      weightMap[name] = inFirst ? "model-00001-of-00002.safetensors" : "model-00002-of-00002.safetensors";
    }
    fs::remove(f.weights());
    hh::models::writeTensorFile(f.file("model-00001-of-00002.safetensors"), first);
    hh::models::writeTensorFile(f.file("model-00002-of-00002.safetensors"), second);
    hh::test::writeJson(f.file("model.safetensors.index.json"),
                        json{{"metadata", {{"total_size", 447872}}}, {"weight_map", weightMap}});
    {
      at::NoGradGuard noGrad;
      const auto ids = torch::remainder(torch::arange(12, torch::kLong) * 37, 1000).view({1, 12});
      QVERIFY(torch::equal(m::loadModel(f.path())->forward(ids).logits, m::loadModel(kFixture)->forward(ids).logits));
      const auto report = m::preflight(f.path());
      QVERIFY2(report.ready(), report.text().c_str());
      QCOMPARE(report.shards, int64_t(2));
    }
    fs::remove(f.file("model-00002-of-00002.safetensors"));
    CHECK_LOAD_FAILS(f.path(), f.file("model.safetensors.index.json"), "model-00002-of-00002.safetensors",
                     "does not exist");
    CHECK_BLOCKER(f.path(), "model-00002-of-00002.safetensors", "does not exist");
  }
};

// clang-format off
HH_TEST_SUITE(TestBadCheckpoints, "engine.models.bad_checkpoints", &TestBadCheckpoints::fixtureIsGood, &TestBadCheckpoints::truncatedWeights, &TestBadCheckpoints::offsetsPastTheEnd, &TestBadCheckpoints::overlappingTensors, &TestBadCheckpoints::integerWeight, &TestBadCheckpoints::unsupportedDtype, &TestBadCheckpoints::missingTensor, &TestBadCheckpoints::shapesDisagreeWithConfig, &TestBadCheckpoints::configNotJson, &TestBadCheckpoints::tokenizerLargerThanEmbedding, &TestBadCheckpoints::pickleOnly, &TestBadCheckpoints::emptyFolder, &TestBadCheckpoints::shardMissing)
// clang-format on

}  // namespace test_bad_checkpoints

#if HH_HAVE_QTEST
#include "test_bad_checkpoints.moc"
#endif
