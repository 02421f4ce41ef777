// engine.tokenizers.llama: SentencePiece-style BPE with byte fallback on hand-made
// tokenizer.json files in the Llama layout (no Llama fixture ships). Vocabulary: <unk> 0, <s> 1,
// </s> 2, <0x00>..<0xFF> 3..258, then ▁ 259, h 260, e 261, l 262, o 263, w 264, r 265, d 266
// and the merge results ▁h 267, ll 268, ▁he 269, llo 270, ▁hello 271, ▁w 272, or 273,
// ▁wor 274, ld 275, ▁world 276, in merge order. Worked by hand:
//   "hello world" -> "▁hello▁world" -> ▁ h e l l o ▁ w o r l d -> [▁hello, ▁world] = [271, 276]
//   "hi ü" -> ▁ h <0x69> ▁ <0xC3> <0xBC> -> [267, 108, 259, 198, 191] ('i' and 'ü' by bytes)
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "engine/tokenizers/tokenizer.h"
#include "tests/support/hh_test.h"
#include "tests/support/temp_dir.h"

namespace test_sentencepiece_bpe {

namespace {

using Ids = std::vector<int64_t>;
using nlohmann::json;
namespace fs = std::filesystem;

const std::string kSp = "\xE2\x96\x81";  // ▁

std::string show(const Ids& ids) {
  std::string s = "[";
  for (size_t i = 0; i < ids.size(); ++i) s += (i ? "," : "") + std::to_string(ids[i]);
  return s + "]";
}

json llamaJson(bool mergesAsPairs) {
  json vocab = json::object();
  vocab["<unk>"] = 0;
  vocab["<s>"] = 1;
  vocab["</s>"] = 2;
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    vocab[name] = 3 + b;
  }
  int next = 259;
  for (const std::string& t : {kSp, std::string("h"), std::string("e"), std::string("l"), std::string("o"),
                              std::string("w"), std::string("r"), std::string("d")}) {
    vocab[t] = next++;
  }
  const std::vector<std::pair<std::string, std::string>> merges = {
      {kSp, "h"}, {"l", "l"}, {kSp + "h", "e"}, {"ll", "o"}, {kSp + "he", "llo"},
      {kSp, "w"}, {"o", "r"}, {kSp + "w", "or"}, {"l", "d"}, {kSp + "wor", "ld"}};
  json m = json::array();
  for (const auto& [a, b] : merges) {
    vocab[a + b] = next++;
    if (mergesAsPairs) {
      m.push_back(json::array({a, b}));
    } else {
      m.push_back(a + " " + b);
    }
  }
  auto added = [](int id, const char* content) {
    return json{{"id", id}, {"content", content}, {"single_word", false}, {"lstrip", false},
                {"rstrip", false}, {"normalized", false}, {"special", true}};
  };
  json j;
  j["version"] = "1.0";
  j["added_tokens"] = json::array({added(0, "<unk>"), added(1, "<s>"), added(2, "</s>")});
  j["normalizer"] = {{"type", "Sequence"},
                     {"normalizers", json::array({json{{"type", "Prepend"}, {"prepend", kSp}},
                                                  json{{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", kSp}}})}};
  j["pre_tokenizer"] = nullptr;
  j["post_processor"] = {
      {"type", "TemplateProcessing"},
      {"single", json::array({json{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}},
                              json{{"Sequence", {{"id", "A"}, {"type_id", 0}}}}})},
      {"pair", json::array()},
      {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", json::array({1})}, {"tokens", json::array({"<s>"})}}}}}};
  j["decoder"] = {{"type", "Sequence"},
                  {"decoders", json::array({json{{"type", "Replace"}, {"pattern", {{"String", kSp}}}, {"content", " "}},
                                            json{{"type", "ByteFallback"}}, json{{"type", "Fuse"}},
                                            json{{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}})}};
  j["model"] = {{"type", "BPE"},        {"dropout", nullptr}, {"unk_token", "<unk>"}, {"continuing_subword_prefix", nullptr},
                {"end_of_word_suffix", nullptr}, {"fuse_unk", true}, {"byte_fallback", true}, {"vocab", vocab}, {"merges", m}};
  return j;
}

// Writes `j` as tokenizer.json into a fresh directory and loads it.
std::unique_ptr<hh::tok::Tokenizer> load(const json& j, const std::string& name) {
  const fs::path dir = hh::test::tempRoot() / ("hh_tok_llama_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::ofstream(dir / "tokenizer.json") << j.dump();
  auto tok = hh::tok::loadTokenizer(dir.string());
  fs::remove_all(dir);
  return tok;
}

}  // namespace

class TestSentencePieceBpe : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void mergesAndByteFallback() {
    for (const bool pairs : {false, true}) {
      const auto tok = load(llamaJson(pairs), pairs ? "pairs" : "strings");
      QCOMPARE(tok->kind(), std::string("sentencepiece-bpe"));
      QCOMPARE(tok->vocabSize(), int64_t{277});
      QVERIFY2(tok->encode("hello world") == (Ids{271, 276}), show(tok->encode("hello world")).c_str());
      QVERIFY2(tok->encode("hi \xC3\xBC") == (Ids{267, 108, 259, 198, 191}), show(tok->encode("hi \xC3\xBC")).c_str());
      QVERIFY(tok->encode("\xF0\x9F\x98\x80") == (Ids{259, 3 + 0xF0, 3 + 0x9F, 3 + 0x98, 3 + 0x80}));
      QVERIFY(tok->encode("") == (Ids{}));
    }
  }

  void specialTokensAndTemplate() {
    const auto tok = load(llamaJson(false), "special");
    QCOMPARE(tok->bosId(), int64_t{1});
    QCOMPARE(tok->eosId(), int64_t{2});
    QCOMPARE(tok->unkId(), int64_t{0});
    QCOMPARE(tok->padId(), int64_t{-1});
    QVERIFY(tok->encode("hello world", /*addSpecialTokens=*/true) == (Ids{1, 271, 276}));
    // Added tokens split the text first; each run gets its own "▁" (HF's Prepend normalizer).
    QVERIFY2(tok->encode("<s>hello</s>") == (Ids{1, 271, 2}), show(tok->encode("<s>hello</s>")).c_str());
  }

  void decodeReversesEverything() {
    const auto tok = load(llamaJson(false), "decode");
    for (const std::string s : {"hello world", "hi \xC3\xBC", "we \xF0\x9F\x98\x80 d", "  two  spaces ", "\xE4\xB8\xAD"}) {
      QVERIFY2(tok->decode(tok->encode(s)) == s, s.c_str());
    }
    QCOMPARE(tok->decode({1, 271, 276, 2}), std::string("<s> hello world</s>"));
    QCOMPARE(tok->decode({1, 271, 276, 2}, /*skipSpecialTokens=*/true), std::string("hello world"));
    QCOMPARE(tok->decode({271, 198}), std::string("hello\xEF\xBF\xBD"));  // a lone <0xC3>: U+FFFD
    // An invalid run of byte tokens gives one U+FFFD per byte, as HF's ByteFallback decoder does.
    QCOMPARE(tok->decode({259, 198, 191, 198}), std::string("\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"));
  }

  void metaspacePreTokenizer() {
    json j = llamaJson(false);
    j["normalizer"] = nullptr;
    j["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", kSp}, {"prepend_scheme", "first"}, {"split", true}};
    j["decoder"] = {{"type", "Metaspace"}, {"replacement", kSp}, {"prepend_scheme", "first"}, {"split", true}};
    const auto tok = load(j, "metaspace");
    QVERIFY(tok->encode("hello world") == (Ids{271, 276}));
    // "first": only the run at the start of the input gets "▁".
    QVERIFY2(tok->encode("<s>hello") == (Ids{1, 260, 261, 270}), show(tok->encode("<s>hello")).c_str());
    QCOMPARE(tok->decode({271, 276}), std::string("hello world"));
  }

  // Each decoder works on the list of tokens as Hugging Face tokenizers' decode_chain does (read in
  // its source: decoders/strip.rs, decoders/byte_fallback.rs, pre_tokenizers/metaspace.rs,
  // tokenizer/mod.rs). Worked by hand from that source:
  void decoderChainsFollowHuggingFace() {
    json j = llamaJson(false);
    j["model"]["vocab"][kSp + kSp] = 277;  // Llama 2 ships "▁▁" too
    using Steps = json;
    const json replace = {{"type", "Replace"}, {"pattern", {{"String", kSp}}}, {"content", " "}};
    auto decodeWith = [&](const Steps& decoder, const Ids& ids, const char* name) {
      j["decoder"] = decoder;
      return load(j, name)->decode(ids);
    };
    // Metaspace drops every "▁" of the first token (prepend_scheme first/always), not one space:
    // ["▁▁", "▁hello"] -> ["", " hello"].
    const json metaspace = {{"type", "Metaspace"}, {"replacement", kSp}, {"prepend_scheme", "first"}};
    QCOMPARE(decodeWith(metaspace, {277, 271}, "ms_first"), std::string(" hello"));
    QCOMPARE(decodeWith(metaspace, {1, 271}, "ms_special"), std::string("<s> hello"));
    json never = metaspace;
    never["prepend_scheme"] = "never";
    QCOMPARE(decodeWith(never, {271, 276}, "ms_never"), std::string(" hello world"));
    // No decoder: the tokens joined with ' ', "▁" kept.
    QCOMPARE(decodeWith(nullptr, {271, 276}, "none"), kSp + "hello " + kSp + "world");
    // Strip works on each token: without Fuse before it, every token loses its leading space; and
    // without ByteFallback a byte token stays as written.
    const json stripEach = {
        {"type", "Sequence"},
        {"decoders", json::array({replace, json{{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}})}};
    QCOMPARE(decodeWith(stripEach, {271, 276, 108}, "strip_each"), std::string("helloworld<0x69>"));
    // stop cuts trailing copies: " hello  " -> " hello".
    const json stripEnd = {
        {"type", "Sequence"},
        {"decoders", json::array({replace, json{{"type", "Fuse"}},
                                  json{{"type", "Strip"}, {"content", " "}, {"start", 0}, {"stop", 2}}})}};
    QCOMPARE(decodeWith(stripEnd, {271, 259, 259}, "strip_end"), std::string(" hello"));
    // A token of spaces only, cut from both ends: empty (HF would index before the token here).
    QCOMPARE(decodeWith(stripEnd, {259}, "strip_all"), std::string(""));
    bool refused = false;
    try {
      decodeWith(json{{"type", "Replace"}, {"pattern", {{"Regex", "x"}}}, {"content", " "}}, {271}, "regex");
    } catch (const std::exception& e) {
      refused = std::string(e.what()).find("Regex is not supported") != std::string::npos;
    }
    QVERIFY(refused);
  }

  void unknownWithoutByteFallback() {
    json j = llamaJson(false);
    j["model"]["byte_fallback"] = false;
    const auto fused = load(j, "fused");
    QVERIFY2(fused->encode("hi!!") == (Ids{267, 0}), show(fused->encode("hi!!")).c_str());  // ▁h + one fused <unk>
    j["model"]["fuse_unk"] = false;
    const auto plain = load(j, "unfused");
    QVERIFY(plain->encode("hi!!") == (Ids{267, 0, 0, 0}));
  }
};

HH_TEST_SUITE(TestSentencePieceBpe, "engine.tokenizers.llama", &TestSentencePieceBpe::mergesAndByteFallback,
              &TestSentencePieceBpe::specialTokensAndTemplate, &TestSentencePieceBpe::decodeReversesEverything,
              &TestSentencePieceBpe::metaspacePreTokenizer, &TestSentencePieceBpe::decoderChainsFollowHuggingFace,
              &TestSentencePieceBpe::unknownWithoutByteFallback)

}  // namespace test_sentencepiece_bpe

#if HH_HAVE_QTEST
#include "test_sentencepiece_bpe.moc"
#endif
