// engine.models.saved_dtypes: a saved folder stores its weights in the dtype its config.json
// names. A model held in bf16 or fp64 and saved with the default (float32) options stores F32
// tensors; saved as bfloat16 it stores BF16 ones; and a config that came with the newer "dtype"
// key next to (or instead of) "torch_dtype" has both say the stored dtype.

#include <torch/types.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include "engine/io/safetensors.h"
#include "engine/models/model_io.h"
#include "tests/support/hh_test.h"
#include "tests/support/temp_dir.h"

namespace test_saved_dtypes {

namespace {

namespace fs = std::filesystem;
namespace m = hh::models;
using nlohmann::json;

const std::string kGpt2 = std::string(HH_FIXTURES_DIR) + "/tiny-random-gpt2";

json readJson(const std::string& path) {
  std::ifstream in(path);
  return json::parse(in);
}

// The dtypes model.safetensors stores, e.g. {"F32"}.
std::set<std::string> storedDtypes(const std::string& dir) {
  const auto file = hh::io::SafetensorsFile::open(dir + "/model.safetensors");
  std::set<std::string> dtypes;
  for (const auto& name : file.names()) dtypes.insert(file.info(name).dtype);
  return dtypes;
}

}  // namespace

class TestSavedDtypes : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void weightsStoredAsConfigSays() {
    for (const auto held : {torch::kBFloat16, torch::kDouble, torch::kFloat}) {
      m::LoadOptions load;
      load.dtype = held;
      const auto model = m::loadModel(kGpt2, load);
      hh::test::TempDir dir("saved_dtypes");
      m::saveModel(*model, dir.file("f32"));
      const auto label = std::string("held in ") + c10::toString(held);
      QVERIFY2(storedDtypes(dir.file("f32")) == std::set<std::string>{"F32"}, label.c_str());
      QCOMPARE(readJson(dir.file("f32/config.json"))["torch_dtype"].get<std::string>(), std::string("float32"));
      m::SaveOptions bf16;
      bf16.dtype = torch::kBFloat16;
      m::saveModel(*model, dir.file("bf16"), bf16);
      QVERIFY2(storedDtypes(dir.file("bf16")) == std::set<std::string>{"BF16"}, label.c_str());
      QCOMPARE(readJson(dir.file("bf16/config.json"))["torch_dtype"].get<std::string>(), std::string("bfloat16"));
    }
  }

  void newerDtypeKeyFollowsTheStoredDtype() {
    // A transformers v5 config writes "dtype"; saved as float32, it must not still say bfloat16.
    hh::test::TempDir dir("saved_dtype_key");
    auto config = readJson(kGpt2 + "/config.json");
    config.erase("torch_dtype");
    config["dtype"] = "bfloat16";
    fs::create_directories(dir.file("v5"));
    hh::test::writeJson(dir.file("v5/config.json"), config);
    fs::copy_file(kGpt2 + "/model.safetensors", dir.file("v5/model.safetensors"));
    const auto model = m::loadModel(dir.file("v5"));
    m::saveModel(*model, dir.file("f32"));
    const auto saved = readJson(dir.file("f32/config.json"));
    QCOMPARE(saved["torch_dtype"].get<std::string>(), std::string("float32"));
    QCOMPARE(saved["dtype"].get<std::string>(), std::string("float32"));
    QCOMPARE(m::loadModelConfig(dir.file("f32")).torchDtype, std::string("float32"));
    m::SaveOptions bf16;
    bf16.dtype = torch::kBFloat16;
    m::saveModel(*model, dir.file("bf16"), bf16);
    QCOMPARE(readJson(dir.file("bf16/config.json"))["dtype"].get<std::string>(), std::string("bfloat16"));
    // A config without the newer key does not gain it.
    m::saveModel(*m::loadModel(kGpt2), dir.file("plain"));
    QVERIFY(!readJson(dir.file("plain/config.json")).contains("dtype"));
  }
};

// clang-format off
HH_TEST_SUITE(TestSavedDtypes, "engine.models.saved_dtypes", &TestSavedDtypes::weightsStoredAsConfigSays, &TestSavedDtypes::newerDtypeKeyFollowsTheStoredDtype)
// clang-format on

}  // namespace test_saved_dtypes

#if HH_HAVE_QTEST
#include "test_saved_dtypes.moc"
#endif
