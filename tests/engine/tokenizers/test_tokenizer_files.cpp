// engine.tokenizers.files: the loadTokenizer factory on directories holding only legacy files
// (vocab.json + merges.txt, vocab.txt) against tokenizer.json, and one case per malformed input:
// each must throw hh::io::FormatError whose message names the file and the problem, never crash.
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "engine/io/safetensors.h"
#include "engine/tokenizers/tokenizer.h"
#include "tests/support/hh_test.h"
#include "tests/support/temp_dir.h"

namespace test_tokenizer_files {

namespace fs = std::filesystem;
using Ids = std::vector<int64_t>;

std::string fixture(const std::string& rel) { return std::string(HH_FIXTURES_DIR) + "/" + rel; }

// A fresh directory removed at the end of the scope.
struct TempDir {
  fs::path path;
  explicit TempDir(const std::string& name)
      : path(hh::test::tempRoot() / ("hh_tok_files_" + name + "_" + std::to_string(::getpid()))) {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
  std::string file(const std::string& name, const std::string& content) const {
    std::ofstream(path / name, std::ios::binary) << content;
    return (path / name).string();
  }
};

// Empty string when `fn` throws a FormatError whose message holds every needle, else what went wrong.
std::string failsWith(const std::function<void()>& fn, const std::vector<std::string>& needles) {
  try {
    fn();
  } catch (const hh::io::FormatError& e) {
    const std::string what = e.what();
    for (const auto& n : needles) {
      if (what.find(n) == std::string::npos) return "message '" + what + "' lacks '" + n + "'";
    }
    return "";
  } catch (const std::exception& e) {
    return std::string("not a FormatError: ") + e.what();
  }
  return "did not throw";
}

#define QVERIFY_FAILS(fn, ...)                                    \
  do {                                                            \
    const std::string hh_why = failsWith(fn, {__VA_ARGS__});      \
    QVERIFY2(hh_why.empty(), hh_why.c_str());                     \
  } while (0)

const char* kMinimalBpe = R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": ["a b"]}})";

class TestTokenizerFiles : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void legacyGpt2DirectoryMatchesTokenizerJson() {
    TempDir dir("gpt2");
    for (const char* name : {"vocab.json", "merges.txt", "tokenizer_config.json", "special_tokens_map.json"}) {
      fs::copy_file(fixture(std::string("gpt2-tokenizer/") + name), dir.path / name);
    }
    const auto legacy = hh::tok::loadTokenizer(dir.path.string());
    const auto json = hh::tok::loadTokenizer(fixture("gpt2-tokenizer"));
    QCOMPARE(legacy->kind(), std::string("bytelevel-bpe"));
    const std::string text = "It's 3:15 p.m.\n\n  \xC2\xBFQu\xC3\xA9 tal?<|endoftext|>\xF0\x9F\x98\x80 ok";
    QVERIFY(legacy->encode(text) == json->encode(text));
    QCOMPARE(legacy->eosId(), json->eosId());
    QCOMPARE(legacy->vocabSize(), int64_t{50257});
  }

  void legacyVocabTxtWithoutConfig() {
    TempDir dir("bert");
    fs::copy_file(fixture("bert-tiniest/vocab.txt"), dir.path / "vocab.txt");
    const auto tok = hh::tok::loadTokenizer(dir.path.string());  // no config: BERT defaults
    QCOMPARE(tok->kind(), std::string("wordpiece"));
    QVERIFY(tok->encode("Hello, World!", true) == (Ids{101, 7592, 1010, 2088, 999, 102}));
    QCOMPARE(tok->maskId(), int64_t{103});
    QCOMPARE(tok->padId(), int64_t{0});
  }

  void aTokenizerJsonPathWorksToo() {
    const auto tok = hh::tok::loadTokenizer(fixture("bert-tiniest/tokenizer.json"));
    QCOMPARE(tok->kind(), std::string("wordpiece"));
  }

  void malformedFilesThrowFormatError() {
    TempDir dir("bad");
    const auto load = [](const std::string& path) { return [path] { hh::tok::loadTokenizerJson(path); }; };
    QVERIFY_FAILS(load(dir.file("a.json", "{not json")), "a.json", "not valid JSON");
    QVERIFY_FAILS(load(dir.file("b.json", "[1, 2]")), "b.json", "top level");
    QVERIFY_FAILS(load(dir.file("c.json", "{\"version\": \"1.0\"}")), "c.json", "no \"model\"");
    QVERIFY_FAILS(load(dir.file("d.json", "{\"model\": 3}")), "d.json", "model: expected an object");
    QVERIFY_FAILS(load(dir.file("e.json", R"({"model": {"type": "Unigram", "vocab": []}})")), "e.json", "Unigram");
    QVERIFY_FAILS(load(dir.file("f.json", R"({"model": {"type": "BPE", "vocab": ["a"], "merges": []}})")), "f.json", "vocab");
    QVERIFY_FAILS(load(dir.file("g.json", R"({"model": {"type": "BPE", "vocab": {"a": "zero"}, "merges": []}})")),
                  "g.json", "token 'a'");
    QVERIFY_FAILS(load(dir.file("h.json", R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": [7]}})")),
                  "h.json", "merges[0]");
    QVERIFY_FAILS(load(dir.file("i.json", R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1}, "merges": ["a b"]}})")),
                  "i.json", "'ab' is not in the vocabulary");
    QVERIFY_FAILS(load(dir.file("j.json", R"({"model": {"type": "BPE", "vocab": {"a": 0}}})")), "j.json", "without merges");
    QVERIFY_FAILS(load(dir.file("k.json", std::string(kMinimalBpe).insert(1, "\"added_tokens\": {}, "))), "k.json",
                  "added_tokens");
    QVERIFY_FAILS(load(dir.file("l.json", std::string(kMinimalBpe).insert(1, "\"normalizer\": {\"type\": \"Precompiled\"}, "))),
                  "l.json", "Precompiled");
    QVERIFY_FAILS(load(dir.file("m.json", std::string(kMinimalBpe).insert(1, "\"post_processor\": {\"type\": \"TemplateProcessing\", \"single\": [{\"SpecialToken\": {\"id\": \"<s>\"}}]}, "))),
                  "m.json", "'<s>' is not in the vocabulary");
    // Ids given as numbers must be the tokenizer's own: past the last one they indexed past the
    // model's embedding, and the job stopped in Torch with a stack trace and no file.
    QVERIFY_FAILS(
        load(dir.file(
            "m2.json",
            std::string(kMinimalBpe)
                .insert(
                    1,
                    R"("post_processor": {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "a"}}, {"Sequence": {"id": "A"}}], "special_tokens": {"a": {"ids": [999999]}}}, )"))),
        "m2.json", "id 999999 is not in the vocabulary (0..2)");
    QVERIFY_FAILS(
        load(dir.file(
            "m3.json",
            std::string(kMinimalBpe)
                .insert(1, R"("post_processor": {"type": "BertProcessing", "cls": ["a", 0], "sep": ["b", -1]}, )"))),
        "m3.json", "post_processor.sep: id -1");
    // "ids" must be a list: a bare number or an object was iterated as if it were one.
    QVERIFY_FAILS(
        load(dir.file(
            "m4.json",
            std::string(kMinimalBpe)
                .insert(
                    1,
                    R"("post_processor": {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "a"}}], "special_tokens": {"a": {"ids": 1}}}, )"))),
        "m4.json", "special_tokens.a.ids: expected an array");
    QVERIFY_FAILS(load(dir.file("n.json", R"({"model": {"type": "WordPiece", "vocab": {"a": 0}}})")), "n.json", "[UNK]");
    QVERIFY_FAILS(load(dir.file("o.json", std::string(kMinimalBpe).insert(1, "\"pre_tokenizer\": {\"type\": \"Split\", \"pattern\": {\"Regex\": \"\\\\w+\"}}, \"decoder\": {\"type\": \"ByteLevel\"}, "))),
                  "o.json", "Split pattern");
    QVERIFY_FAILS(load(dir.file("p.json", "")), "p.json", "not valid JSON");
    QVERIFY_FAILS(load((dir.path / "missing.json").string()), "missing.json", "cannot open");
    QVERIFY_FAILS(load(dir.file("q.json", std::string("\xFF\xFE{\x00}", 5))), "q.json");
    QVERIFY_FAILS(load(dir.file("r.json", R"({"model": {"type": "BPE", "vocab": {"a": -4}, "merges": []}})")), "r.json", "-4");

    QVERIFY_FAILS(load(dir.file("s.json", R"({"model": {"type": "BPE", "vocab": {"a": 2000000000}, "merges": []}})")),
                  "s.json", "dense");
    std::string deep = R"({"type": "NFC"})";
    for (int i = 0; i < 1000; ++i) deep = R"({"type": "Sequence", "normalizers": [)" + deep + "]}";
    QVERIFY_FAILS(load(dir.file("t.json", std::string(kMinimalBpe).insert(1, "\"normalizer\": " + deep + ", "))), "t.json",
                  "nested");

    const std::string vocab = dir.file("vocab.json", R"({"a": 0, "b": 1, "ab": 2})");
    QVERIFY_FAILS([&] { hh::tok::loadGpt2Bpe(vocab, dir.file("m1.txt", "#version: 0.2\na b\nab\n")); }, "m1.txt", "line 3");
    QVERIFY_FAILS([&] { hh::tok::loadGpt2Bpe(dir.file("v2.json", "{\"a\": 0"), dir.file("m2.txt", "a b\n")); }, "v2.json");
    // A byte-level vocabulary missing most byte tokens loads (HF drops such bytes) but a merge
    // naming an unknown token does not.
    QVERIFY_FAILS([&] { hh::tok::loadGpt2Bpe(vocab, dir.file("m3.txt", "a c\n")); }, "m3.txt", "'c'");
    QVERIFY_FAILS([&] { hh::tok::loadWordPieceVocab(dir.file("vocab.txt", std::string("a\0b", 3))); }, "vocab.txt", "binary");
    QVERIFY_FAILS([&] { hh::tok::loadTokenizer(dir.path.string() + "/nothing-here"); }, "nothing-here", "no tokenizer files");

    TempDir cfg("badconfig");
    cfg.file("tokenizer.json", kMinimalBpe);
    cfg.file("tokenizer_config.json", "{\"bos_token\": 5}");
    QVERIFY_FAILS([&] { hh::tok::loadTokenizer(cfg.path.string()); }, "tokenizer_config.json", "bos_token");
  }

  void randomInputNeverBreaks() {
    // Random bytes, random code points (controls, surrogate-range encodings, CJK, emoji, marks):
    // no crash, no exception, and byte-level BPE gives the bytes back.
    const auto gpt2 = hh::tok::loadTokenizer(fixture("gpt2-tokenizer"));
    const auto bert = hh::tok::loadTokenizer(fixture("bert-tiniest"));
    TempDir dir("random");
    dir.file("tokenizer.json", kMinimalBpe);
    const auto sp = hh::tok::loadTokenizer(dir.path.string());
    uint64_t state = 12345;
    auto next = [&] { return (state = state * 6364136223846793005ULL + 1442695040888963407ULL) >> 33; };
    const std::vector<std::string> pieces = {" ", "  ", "\n", "\t", "'s", "'", "[CLS]", "<|endoftext|>", "##",
                                             "\xE2\x96\x81", "\xCC\x81", "\xE4\xB8\xAD", "\xF0\x9F\x98\x80",
                                             "\xED\xA0\x80", "\xC0\xAF", "\xEF\xBB\xBF", "\xC2\x85", "a", "Z", "7"};
    for (int round = 0; round < 300; ++round) {
      std::string s;
      const size_t n = next() % 64;
      for (size_t i = 0; i < n; ++i) {
        if (next() % 3 == 0) {
          s.push_back(static_cast<char>(next() % 256));
        } else {
          s += pieces[next() % pieces.size()];
        }
      }
      const auto ids = gpt2->encode(s);
      QVERIFY2(gpt2->decode(ids) == s, "byte-level round trip");
      for (const auto& t : {bert.get(), sp.get()}) {
        const auto other = t->encode(s, true);
        for (const int64_t id : other) QVERIFY(id >= 0 && id < t->vocabSize());
        (void)t->decode(other);
      }
    }
  }
};

HH_TEST_SUITE(TestTokenizerFiles, "engine.tokenizers.files", &TestTokenizerFiles::legacyGpt2DirectoryMatchesTokenizerJson, &TestTokenizerFiles::legacyVocabTxtWithoutConfig, &TestTokenizerFiles::aTokenizerJsonPathWorksToo, &TestTokenizerFiles::malformedFilesThrowFormatError, &TestTokenizerFiles::randomInputNeverBreaks)

}  // namespace test_tokenizer_files

#if HH_HAVE_QTEST
#include "test_tokenizer_files.moc"
#endif
