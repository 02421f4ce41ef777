// safetensors reader/writer (docs/design.md, "Checkpoints, tokenizers, data" and "Pitfalls designed
// against"): round trips, the real fixtures, unaligned data, every validation error, sharded indexes and header padding.
#include <torch/types.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <random>

#include "engine/io/safetensors.h"
#include "engine/models/tensor_file.h"
#include "tests/support/hh_test.h"
#include "tests/support/temp_dir.h"

namespace test_safetensors {

using hh::io::FormatError;
using hh::io::SafetensorsFile;
using hh::io::ShardedSafetensors;
namespace fs = std::filesystem;

namespace {

// A fresh directory under the system temp dir, removed with everything in it on destruction.
struct ScratchDir {
  fs::path dir;
  ScratchDir() {
    std::random_device rd;
    dir = hh::test::tempRoot() / ("hh_st_" + std::to_string(rd()) + std::to_string(rd()));
    fs::create_directories(dir);
  }
  ~ScratchDir() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  std::string file(const std::string& name) const { return (dir / name).string(); }
};

void writeBytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string readBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

std::string u64le(uint64_t v) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[i] = static_cast<char>((v >> (8 * i)) & 0xff);
  return s;
}

// 8-byte length (the header's own unless given), header text, `dataBytes` bytes of data.
void writeRaw(const std::string& path, const std::string& header, size_t dataBytes, int64_t length = -1) {
  const uint64_t n = length < 0 ? header.size() : static_cast<uint64_t>(length);
  writeBytes(path, u64le(n) + header + std::string(dataBytes, '\x01'));
}

// The FormatError message thrown by fn, or "<no FormatError>".
std::string formatErrorOf(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const FormatError& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("<other exception> ") + e.what();
  }
  return "<no FormatError>";
}

bool has(const std::string& s, const std::string& needle) { return s.find(needle) != std::string::npos; }

// Opening `path` must throw a FormatError whose message names the file and contains `needle`.
#define QVERIFY_OPEN_FAILS(path, needle)                                                  \
  do {                                                                                     \
    const std::string hhMsg = formatErrorOf([&] { SafetensorsFile::open(path); });         \
    QVERIFY2(has(hhMsg, path) && has(hhMsg, needle), (std::string(needle) + ": " + hhMsg).c_str()); \
  } while (0)

bool sameTensor(const torch::Tensor& a, const torch::Tensor& b) {
  return a.scalar_type() == b.scalar_type() && a.sizes() == b.sizes() && torch::equal(a, b);
}

}  // namespace

class TestSafetensors : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void roundTripDtypes() {
    ScratchDir tmp;
    const auto path = tmp.file("round.safetensors");
    const auto f32 = torch::randn({3, 5});
    const auto f16 = torch::randn({4, 2}).to(torch::kHalf);
    const auto bf16 = (torch::arange(-16, 16) * 0.25).reshape({4, 8}).to(torch::kBFloat16);  // exact
    const auto i64 = torch::tensor({int64_t(-3), int64_t(1) << 40, int64_t(7)}, torch::kLong);
    const auto i32 = torch::tensor({1, -2, 3}, torch::kInt);
    const auto f64 = torch::randn({2, 2}, torch::kDouble);
    const auto empty = torch::zeros({0, 3});
    hh::models::writeTensorFile(path, {{"f32", f32}, {"f16", f16}, {"bf16", bf16}, {"i64", i64}, {"i32", i32},
                                    {"f64", f64}, {"empty", empty}},
                             {{"format", "pt"}, {"note", "round trip"}});
    const auto st = SafetensorsFile::open(path);
    QVERIFY2(st.names() == (std::vector<std::string>{"bf16", "empty", "f16", "f32", "f64", "i32", "i64"}),
             "names() is sorted and complete");
    QVERIFY2(sameTensor(hh::models::readTensor(st, "f32"), f32), "F32 round trip");
    QVERIFY2(sameTensor(hh::models::readTensor(st, "f16", torch::kHalf), f16), "F16 round trip");
    QVERIFY2(sameTensor(hh::models::readTensor(st, "f16"), f16.to(torch::kFloat)), "F16 -> F32 conversion");
    QVERIFY2(sameTensor(hh::models::readTensor(st, "bf16", torch::kBFloat16), bf16), "BF16 round trip");
    QVERIFY2(sameTensor(hh::models::readTensor(st, "bf16"), (torch::arange(-16, 16) * 0.25).reshape({4, 8})), "BF16 -> F32 exact");
    QVERIFY2(sameTensor(hh::models::readTensor(st, "i64"), i64), "I64 kept as kLong");
    QVERIFY2(sameTensor(hh::models::readTensor(st, "i32", torch::kLong), i32.to(torch::kLong)), "I32 -> kLong when asked");
    QVERIFY2(sameTensor(hh::models::readTensor(st, "f64", torch::kDouble), f64), "F64 round trip");
    QVERIFY2(hh::models::readTensor(st, "empty").sizes() == empty.sizes(), "zero-element tensor");
    QVERIFY2(st.info("bf16").dtype == "BF16" && st.info("f16").dtype == "F16" && st.info("i64").dtype == "I64",
             "dtype strings");
    QVERIFY2(st.metadata().at("note") == "round trip" && st.metadata().size() == 2, "metadata round trip");
    QVERIFY2(has(formatErrorOf([&] { hh::models::readTensor(st, "f32", torch::kLong); }), path), "float data refused as kLong");
  }

  void realFixtures() {
    const std::string model = HH_FIXTURES_DIR "/tiny-random-gpt2/model.safetensors";
    const auto st = SafetensorsFile::open(model);
    QVERIFY2(st.names().size() == 64, "tiny-random-gpt2 has 64 tensors");
    QVERIFY2(st.contains("transformer.wte.weight") && st.contains("transformer.h.0.attn.c_attn.weight"),
             "known GPT-2 names present");
    QCOMPARE(st.info("transformer.wte.weight").shape, (std::vector<int64_t>{1000, 32}));
    QCOMPARE(hh::models::readTensor(st, "transformer.h.0.attn.c_attn.weight").sizes().vec(), (std::vector<int64_t>{32, 96}));
    QVERIFY2(st.metadata().at("format") == "pt", "metadata read");
    for (const auto& name : st.names()) {
      QVERIFY2(torch::isfinite(hh::models::readTensor(st, name)).all().item<bool>(), name.c_str());
    }
    const auto ref = SafetensorsFile::open(HH_FIXTURES_DIR "/tiny-random-gpt2/reference.safetensors");
    QVERIFY2(ref.info("input_ids").dtype == "I64", "input_ids is I64");
    const auto ids = hh::models::readTensor(ref, "input_ids");
    QVERIFY2(ids.scalar_type() == torch::kLong, "I64 kept as kLong");
    QCOMPARE(ids.sizes().vec(), (std::vector<int64_t>{2, 24}));
    QVERIFY2(ids.min().item<int64_t>() >= 0 && ids.max().item<int64_t>() < 1000, "token ids within the vocab");
  }

  void unpaddedHeaderUnalignedData() {
    ScratchDir tmp;
    const auto path = tmp.file("unpadded.safetensors");
    std::string header = R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,12]},)"
                         R"("b":{"dtype":"F64","shape":[2],"data_offsets":[12,28]}})";
    if ((8 + header.size()) % 8 == 0) header += " ";
    const float a[3] = {1.5f, -2.25f, 3.0f};
    const double b[2] = {0.1, -7.0};
    std::string data(28, '\0');
    std::memcpy(&data[0], a, 12);
    std::memcpy(&data[12], b, 16);
    writeBytes(path, u64le(header.size()) + header + data);
    const auto st = SafetensorsFile::open(path);
    QVERIFY2(st.dataStart() % 8 != 0, "data buffer is unaligned");
    QVERIFY2(sameTensor(hh::models::readTensor(st, "a"), torch::tensor({1.5f, -2.25f, 3.0f})), "unaligned F32");
    QVERIFY2(sameTensor(hh::models::readTensor(st, "b", torch::kDouble), torch::tensor({0.1, -7.0}, torch::kDouble)), "unaligned F64");
  }

  void truncatedFile() {
    ScratchDir tmp;
    const auto path = tmp.file("truncated.safetensors");
    const auto bytes = readBytes(HH_FIXTURES_DIR "/tiny-random-gpt2/model.safetensors");
    const uint64_t n = SafetensorsFile::open(HH_FIXTURES_DIR "/tiny-random-gpt2/model.safetensors").dataStart();
    writeBytes(path, bytes.substr(0, n + (bytes.size() - n) / 2));
    QVERIFY_OPEN_FAILS(path, "past the end");
    writeBytes(path, "abc");
    QVERIFY_OPEN_FAILS(path, "shorter than");
  }

  void headerLengthPastEnd() {
    ScratchDir tmp;
    const auto path = tmp.file("past.safetensors");
    writeRaw(path, "{}", 4, 1000);
    QVERIFY_OPEN_FAILS(path, "past the end of the file");
  }

  void headerLengthTooLarge() {
    ScratchDir tmp;
    const auto path = tmp.file("huge.safetensors");
    writeRaw(path, "{}", 4, 200'000'000);
    QVERIFY_OPEN_FAILS(path, "100 MB");
  }

  void headerNotJson() {
    ScratchDir tmp;
    const auto path = tmp.file("notjson.safetensors");
    writeRaw(path, "this is not {json", 0);
    QVERIFY_OPEN_FAILS(path, "not valid JSON");
    writeRaw(path, "[1, 2]", 0);
    QVERIFY_OPEN_FAILS(path, "not a JSON object");
    writeRaw(path, R"({"a":{"dtype":"F32","shape":[1]}})", 4);
    QVERIFY_OPEN_FAILS(path, "data_offsets");
    writeRaw(path, R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", 4);
    QVERIFY_OPEN_FAILS(path, "negative");
    writeRaw(path, R"({"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,4]}})", 4);
    QVERIFY_OPEN_FAILS(path, "overflow");
  }

  void offsetsPastEnd() {
    ScratchDir tmp;
    const auto path = tmp.file("offsets.safetensors");
    writeRaw(path, R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,12]}})", 8);
    QVERIFY_OPEN_FAILS(path, "past the end of the data buffer");
  }

  void overlappingTensors() {
    ScratchDir tmp;
    const auto path = tmp.file("overlap.safetensors");
    writeRaw(path, R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,12]},)"
                   R"("b":{"dtype":"F32","shape":[3],"data_offsets":[8,20]}})", 20);
    QVERIFY_OPEN_FAILS(path, "overlapping tensors 'a' and 'b'");
    writeRaw(path, R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                   R"("b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})", 12);
    QVERIFY_OPEN_FAILS(path, "gap");
  }

  void sizeMismatch() {
    ScratchDir tmp;
    const auto path = tmp.file("size.safetensors");
    writeRaw(path, R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8);
    QVERIFY_OPEN_FAILS(path, "size mismatch");
    writeRaw(path, R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[8,0]}})", 8);
    QVERIFY_OPEN_FAILS(path, "< begin");
  }

  void unknownDtype() {
    ScratchDir tmp;
    const auto path = tmp.file("dtype.safetensors");
    writeRaw(path, R"({"a":{"dtype":"X9","shape":[1],"data_offsets":[0,4]}})", 4);
    QVERIFY_OPEN_FAILS(path, "X9");
  }

  void missingTensorName() {
    const std::string model = HH_FIXTURES_DIR "/tiny-random-gpt2/model.safetensors";
    const auto st = SafetensorsFile::open(model);
    QVERIFY2(!st.contains("lm_head.weight"), "tiny-random-gpt2 has no lm_head");
    const auto msg = formatErrorOf([&] { hh::models::readTensor(st, "lm_head.weight"); });
    QVERIFY2(has(msg, model) && has(msg, "lm_head.weight"), msg.c_str());
    const auto infoMsg = formatErrorOf([&] { st.info("nope"); });
    QVERIFY2(has(infoMsg, model), infoMsg.c_str());
  }

  void pickleRefused() {
    ScratchDir tmp;
    const auto path = tmp.file("pytorch_model.bin");
    writeBytes(path, std::string("\x80\x02}q\x00.", 6));
    const auto msg = formatErrorOf([&] { hh::io::refusePickle(path); });
    QVERIFY2(has(msg, path) && has(msg, "pickle") && has(msg, "weights_only"), msg.c_str());
    QVERIFY_OPEN_FAILS(path, "pickle");
    for (const char* name : {"a.pt", "b.PTH", "c.ckpt", "d.pkl"}) {
      QVERIFY2(has(formatErrorOf([&] { hh::io::refusePickle(name); }), name), name);
    }
    QVERIFY2(formatErrorOf([] { hh::io::refusePickle("model.safetensors"); }) == "<no FormatError>",
             "safetensors is not a pickle");
  }

  void shardedIndex() {
    ScratchDir tmp;
    const auto a = torch::randn({4, 3}), b = torch::arange(6, torch::kLong), c = torch::randn({2});
    hh::models::writeTensorFile(tmp.file("model-00001-of-00002.safetensors"), {{"a", a}, {"b", b}});
    hh::models::writeTensorFile(tmp.file("model-00002-of-00002.safetensors"), {{"c", c}});
    const auto index = tmp.file("model.safetensors.index.json");
    writeBytes(index, R"({"metadata": {"total_size": 100}, "weight_map": {)"
                      R"("a": "model-00001-of-00002.safetensors", "b": "model-00001-of-00002.safetensors",)"
                      R"("c": "model-00002-of-00002.safetensors"}})");
    const auto model = ShardedSafetensors::open(index);
    QVERIFY2(model.names() == (std::vector<std::string>{"a", "b", "c"}), "all tensors listed");
    QVERIFY2(model.shardCount() == 2, "two shards opened once each");
    QVERIFY2(sameTensor(hh::models::readTensor(model, "a"), a) && sameTensor(hh::models::readTensor(model, "b"), b) && sameTensor(hh::models::readTensor(model, "c"), c),
             "tensors read through the index");
    QVERIFY2(model.metadata().at("total_size") == "100", "index metadata");
    QVERIFY2(has(formatErrorOf([&] { hh::models::readTensor(model, "d"); }), index), "missing name names the index");

    const auto single = ShardedSafetensors::open(tmp.file("model-00002-of-00002.safetensors"));
    QVERIFY2(single.names() == (std::vector<std::string>{"c"}) && sameTensor(hh::models::readTensor(single, "c"), c), "single file");

    const auto missingShard = tmp.file("missing.safetensors.index.json");
    writeBytes(missingShard, R"({"weight_map": {"a": "nope.safetensors"}})");
    const auto msg = formatErrorOf([&] { ShardedSafetensors::open(missingShard); });
    QVERIFY2(has(msg, missingShard) && has(msg, "nope.safetensors"), msg.c_str());

    const auto escape = tmp.file("escape.safetensors.index.json");
    writeBytes(escape, R"({"weight_map": {"a": "../x.safetensors"}})");
    const auto escMsg = formatErrorOf([&] { ShardedSafetensors::open(escape); });
    QVERIFY2(has(escMsg, escape) && has(escMsg, "../x.safetensors"), escMsg.c_str());

    const auto wrongShard = tmp.file("wrong.safetensors.index.json");
    writeBytes(wrongShard, R"({"weight_map": {"c": "model-00001-of-00002.safetensors"}})");
    const auto wrongMsg = formatErrorOf([&] { ShardedSafetensors::open(wrongShard); });
    QVERIFY2(has(wrongMsg, wrongShard) && has(wrongMsg, "does not contain"), wrongMsg.c_str());

    // A shard name longer than the file system allows made std::filesystem throw its own error,
    // which named neither the index nor the problem in the index's terms.
    const auto longName = tmp.file("long.safetensors.index.json");
    writeBytes(longName, R"({"weight_map": {"a": ")" + std::string(300, 'x') + R"("}})");
    const auto longMsg = formatErrorOf([&] { ShardedSafetensors::open(longName); });
    QVERIFY2(has(longMsg, longName) && has(longMsg, "does not exist"), longMsg.c_str());
  }

  void writerPadsHeaderAndTiles() {
    ScratchDir tmp;
    const auto path = tmp.file("padded.safetensors");
    std::vector<std::pair<std::string, torch::Tensor>> tensors = {
        {"z.weight", torch::randn({3, 7})}, {"a", torch::randn({5}).to(torch::kHalf)},
        {"mid.bias_x", torch::arange(3, torch::kInt)}, {"q", torch::randn({2, 3}).t()}};  // non-contiguous
    for (int variant = 0; variant < 8; ++variant) {
      tensors.push_back({std::string(variant + 1, 'n'), torch::ones({1 + variant}, torch::kBFloat16)});
      hh::models::writeTensorFile(path, tensors, {{"k", std::string(variant, 'v')}});
      const auto bytes = readBytes(path);
      uint64_t n = 0;
      for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(bytes[i]);
      QVERIFY2((8 + n) % 8 == 0, "header padded to 8 bytes");
      QVERIFY2(std::distance(fs::directory_iterator(tmp.dir), fs::directory_iterator()) == 1,
               "the temporary file renamed away, nothing else left");
      const auto st = SafetensorsFile::open(path);  // validates the tiling too
      uint64_t expected = 0;
      for (const auto& [name, t] : tensors) {
        const auto& info = st.info(name);
        QVERIFY2(info.offset == expected, ("written in order: " + name).c_str());
        expected += info.size;
        QVERIFY2(sameTensor(hh::models::readTensor(st, name, t.scalar_type() == torch::kInt ? torch::kLong : t.scalar_type()),
                       t.scalar_type() == torch::kInt ? t.to(torch::kLong) : t),
                 name.c_str());
      }
      QVERIFY2(st.dataStart() + expected == bytes.size(), "tensors tile the whole buffer");
    }
    const auto badPath = (tmp.dir / "no_such_dir" / "x.safetensors").string();
    const auto msg = formatErrorOf([&] { hh::models::writeTensorFile(badPath, {{"a", torch::ones({1})}}); });
    QVERIFY2(has(msg, badPath), msg.c_str());
  }
};

HH_TEST_SUITE(TestSafetensors, "engine.io.safetensors", &TestSafetensors::roundTripDtypes,
              &TestSafetensors::realFixtures, &TestSafetensors::unpaddedHeaderUnalignedData,
              &TestSafetensors::truncatedFile, &TestSafetensors::headerLengthPastEnd,
              &TestSafetensors::headerLengthTooLarge, &TestSafetensors::headerNotJson,
              &TestSafetensors::offsetsPastEnd, &TestSafetensors::overlappingTensors,
              &TestSafetensors::sizeMismatch, &TestSafetensors::unknownDtype,
              &TestSafetensors::missingTensorName, &TestSafetensors::pickleRefused,
              &TestSafetensors::shardedIndex, &TestSafetensors::writerPadsHeaderAndTiles)

}  // namespace test_safetensors

#if HH_HAVE_QTEST
#include "test_safetensors.moc"
#endif
