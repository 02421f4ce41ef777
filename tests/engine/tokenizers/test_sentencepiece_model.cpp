// engine.tokenizers.sentencepiece: tokenizer.model files through the SentencePiece library, on
// stories260K's 512-piece model and Llama 2's 32,000-piece model (tests/data), against
// tests/data/sentencepiece_reference.json (the library's own Python module's ids and decodes for
// 21 texts: English, 6 real TinyStories stories, whitespace runs, accents, CJK, emoji, Cyrillic,
// the empty string, 300 repeated letters; scripts/sentencepiece_reference.py wrote it):
//   - a folder with tokenizer.model and no tokenizer.json loads it; roles bos 1, eos 2, unk 0;
//   - encode equals the library's ids exactly, encode with special tokens puts bos first
//     (add_bos_token), decode equals the library's decode, and decode(encode(s)) == s wherever
//     the library round-trips (20 of 21 on Llama 2's model, where a "▁" in the text comes back
//     a space; 18 on stories260K, whose normaliser also folds repeated spaces); byte fallback: characters outside the 512 pieces become <0xNN> pieces
//     and decode back to the same UTF-8;
//   - "<s>" and "</s>" in text are matched as units, and skipSpecialTokens drops them;
//   - add_eos_token / add_bos_token from tokenizer_config.json; without any config the model's
//     own role ids are used;
//   - a file that is not a SentencePiece model, an empty one and one over the size limit are
//     FormatErrors naming the file.
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "engine/io/safetensors.h"
#include "engine/tokenizers/sentencepiece_model.h"
#include "engine/tokenizers/tokenizer.h"
#include "tests/support/hh_test.h"
#include "tests/support/temp_dir.h"

namespace test_sentencepiece_model {

namespace {

using Ids = std::vector<int64_t>;
using nlohmann::json;
namespace fs = std::filesystem;

const std::string kData = HH_FIXTURES_DIR;

json reference() {
  std::ifstream in(kData + "/sentencepiece_reference.json");
  return json::parse(in);
}

std::string show(const Ids& ids) {
  std::string s = "[";
  for (size_t i = 0; i < ids.size() && i < 24; ++i) s += (i ? "," : "") + std::to_string(ids[i]);
  return s + (ids.size() > 24 ? ",...]" : "]");
}

// A folder with a copy of `model`'s tokenizer.model and, unless null, this tokenizer_config.json.
std::string folderWith(const hh::test::TempDir& dir, const std::string& model, const json& config) {
  const auto folder = dir.file(model);
  fs::create_directories(folder);
  fs::copy_file(kData + "/" + model + "/tokenizer.model", folder + "/tokenizer.model");
  if (!config.is_null()) std::ofstream(folder + "/tokenizer_config.json") << config.dump();
  return folder;
}

}  // namespace

class TestSentencePieceModel : public QObject {
  Q_OBJECT

 private:
  static void checkModel(const std::string& name) {
    const json ref = reference()["models"][name];
    const auto tok = hh::tok::loadTokenizer(kData + "/" + name);
    QCOMPARE(tok->kind(), std::string("sentencepiece"));
    QCOMPARE(tok->vocabSize(), ref["pieces"].get<int64_t>());
    QCOMPARE(tok->bosId(), ref["bos"].get<int64_t>());
    QCOMPARE(tok->eosId(), ref["eos"].get<int64_t>());
    QCOMPARE(tok->unkId(), ref["unk"].get<int64_t>());
    QCOMPARE(tok->prefixIds(), Ids{tok->bosId()});
    QVERIFY(tok->suffixIds().empty());
    int roundTrips = 0, libraryRoundTrips = 0, cases = 0;
    for (const auto& c : ref["cases"]) {
      const auto text = c["text"].get<std::string>();
      const auto expected = c["ids"].get<Ids>();
      const auto ids = tok->encode(text);
      QVERIFY2(ids == expected, (name + ": " + text.substr(0, 40) + ": " + show(ids) + " != " + show(expected)).c_str());
      Ids withBos{tok->bosId()};
      withBos.insert(withBos.end(), expected.begin(), expected.end());
      QCOMPARE(tok->encode(text, true), withBos);
      const auto decoded = tok->decode(ids);
      QCOMPARE(decoded, c["decoded"].get<std::string>());
      ++cases;
      roundTrips += decoded == text ? 1 : 0;
      libraryRoundTrips += c["decoded"] == c["text"] ? 1 : 0;
    }
    qInfo("%s: %d of %d texts equal the library's ids; %d round-trip, as with the library", name.c_str(), cases, cases,
          roundTrips);
    QCOMPARE(roundTrips, libraryRoundTrips);
    QVERIFY(roundTrips >= cases - 3);  // only whitespace the model's normaliser folds is lost
  }

 private Q_SLOTS:
  void stories260KEqualsTheLibrary() { checkModel("stories260K"); }
  void llama2EqualsTheLibrary() { checkModel("llama2-tokenizer"); }

  void byteFallback() {
    const auto tok = hh::tok::loadTokenizer(kData + "/stories260K");
    const std::string text = "caf\xC3\xA9 \xE6\x97\xA5\xE6\x9C\xAC \xF0\x9F\x98\x80";  // café 日本 😀
    const auto ids = tok->encode(text);
    int bytePieces = 0;
    for (const auto id : ids) bytePieces += tok->idToToken(id).rfind("<0x", 0) == 0 ? 1 : 0;
    QVERIFY2(bytePieces >= 10, show(ids).c_str());  // 日本 and 😀 are 10 bytes with no piece of their own
    QCOMPARE(tok->decode(ids), text);
  }

  void specialTokensInText() {
    const auto tok = hh::tok::loadTokenizer(kData + "/stories260K");
    const auto ids = tok->encode("<s>Once upon a time</s>");
    QCOMPARE(ids.front(), int64_t(1));
    QCOMPARE(ids.back(), int64_t(2));
    Ids inner(ids.begin() + 1, ids.end() - 1);
    QCOMPARE(inner, tok->encode("Once upon a time"));
    QCOMPARE(tok->decode(ids), std::string("<s>Once upon a time</s>"));
    QCOMPARE(tok->decode(ids, /*skipSpecialTokens=*/true), std::string("Once upon a time"));
  }

  void configFlags() {
    hh::test::TempDir dir("sp_config");
    const auto eosOnly = hh::tok::loadTokenizer(
        folderWith(dir, "stories260K", json{{"add_bos_token", false}, {"add_eos_token", true}}));
    const auto plain = eosOnly->encode("Lily ran.");
    QCOMPARE(eosOnly->encode("Lily ran.", true), [&] { Ids v = plain; v.push_back(2); return v; }());
    // No config at all: the model's own roles, bos added as LlamaTokenizer does by default.
    hh::test::TempDir bare("sp_bare");
    const auto tok = hh::tok::loadTokenizer(folderWith(bare, "llama2-tokenizer", json()));
    QCOMPARE(tok->bosId(), int64_t(1));
    QCOMPARE(tok->eosId(), int64_t(2));
    QCOMPARE(tok->unkId(), int64_t(0));
    QCOMPARE(tok->encode("Hi", true).front(), int64_t(1));
  }

  void badFilesNameTheFile() {
    hh::test::TempDir dir("sp_bad");
    const auto garbage = dir.file("garbage/tokenizer.model");
    fs::create_directories(dir.file("garbage"));
    std::ofstream(garbage) << "this is not a protobuf \x01\x02\x03";
    HH_VERIFY_THROWS_WITH(hh::tok::loadTokenizer(dir.file("garbage")), garbage);
    const auto empty = dir.file("empty/tokenizer.model");
    fs::create_directories(dir.file("empty"));
    std::ofstream{empty};
    HH_VERIFY_THROWS_WITH(hh::tok::loadTokenizer(dir.file("empty")), empty);
    // Truncated: the first half of a real model.
    const auto cut = dir.file("cut/tokenizer.model");
    fs::create_directories(dir.file("cut"));
    fs::copy_file(kData + "/llama2-tokenizer/tokenizer.model", cut);
    fs::resize_file(cut, fs::file_size(cut) / 2);
    HH_VERIFY_THROWS_WITH(hh::tok::loadTokenizer(dir.file("cut")), cut);
    const auto huge = dir.file("huge/tokenizer.model");
    fs::create_directories(dir.file("huge"));
    std::ofstream{huge};
    fs::resize_file(huge, uintmax_t(hh::tok::kMaxModelBytes) + 1);  // sparse
    HH_VERIFY_THROWS_WITH(hh::tok::loadTokenizer(dir.file("huge")), "larger than any SentencePiece model");
  }
};

HH_TEST_SUITE(TestSentencePieceModel, "engine.tokenizers.sentencepiece", &TestSentencePieceModel::stories260KEqualsTheLibrary,
              &TestSentencePieceModel::llama2EqualsTheLibrary, &TestSentencePieceModel::byteFallback,
              &TestSentencePieceModel::specialTokensInText, &TestSentencePieceModel::configFlags,
              &TestSentencePieceModel::badFilesNameTheFile)

}  // namespace test_sentencepiece_model

#if HH_HAVE_QTEST
#include "test_sentencepiece_model.moc"
#endif
