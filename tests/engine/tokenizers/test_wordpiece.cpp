// engine.tokenizers.wordpiece: BERT WordPiece on tests/data/bert-tiniest (uncased BERT vocab,
// 30522 tokens). Expected ids worked out by hand from vocab.txt (id = 0-based line number):
// hello 7592, "," 1010, world 2088, "!" 999, cafe 7668, naive 15743, ang 17076, ##strom 15687,
// don 2123, "'" 1005, t 1056, stop 2644, "—" 1517, now 2085, "." 1012, 中 1746, 文 1861,
// abc 5925, d 1040, resume 13746, una 14477, ##ffa 20961, ##ble 3468, token 19204,
// ##ization 3989, x 1060, ##y 2100, ##zzy 28753, aaa 13360, ##aa 11057, ##a 2050, hi 7632,
// mask 7308, "[" 1031, "]" 1033; [PAD] 0, [UNK] 100, [CLS] 101, [SEP] 102, [MASK] 103.
// Plus options on a hand-made vocabulary (cased, accents kept or stripped, no CJK split).
#include <string>
#include <vector>

#include "engine/tokenizers/tokenizer.h"
#include "engine/tokenizers/wordpiece.h"
#include "tests/support/hh_test.h"

namespace test_wordpiece {

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

std::vector<Case> bertCases() {
  Ids longWord{13360};
  for (int i = 0; i < 48; ++i) longWord.push_back(11057);
  longWord.push_back(2050);
  return {
      {"Hello, World!", {7592, 1010, 2088, 999}},
      // lower-case + NFD + drop Mn: "café naïve ångström résumé"
      {"Caf\xC3\xA9 Na\xC3\xAFve \xC3\x85ngstr\xC3\xB6m R\xC3\xA9sum\xC3\xA9", {7668, 15743, 17076, 15687, 13746}},
      // punctuation split, including the em dash (category Pd)
      {"Don't stop\xE2\x80\x94now.", {2123, 1005, 1056, 2644, 1517, 2085, 1012}},
      // CJK ideographs become words of their own
      {"\xE4\xB8\xAD\xE6\x96\x87" "abc", {1746, 1861, 5925}},
      // snowman (So, not punctuation) and an emoji are not in the vocab
      {"\xE2\x98\x83 \xF0\x9F\x98\x80", {100, 100}},
      // clean text: NUL and U+200B (Cf) dropped, tab -> space
      {std::string("a") + '\0' + "b\xE2\x80\x8B" "c\td", {5925, 1040}},
      {"unaffable tokenization xyzzy", {14477, 20961, 3468, 19204, 3989, 1060, 2100, 28753}},
      {std::string(100, 'a'), longWord},   // 100 characters: still split
      {std::string(101, 'a'), {100}},      // over max_input_chars_per_word: [UNK]
      {"[CLS] hi [SEP][MASK] [mask]", {101, 7632, 102, 103, 1031, 7308, 1033}},
      {"   \n\t ", {}},
  };
}

}  // namespace

class TestWordPiece : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void tokenizerJsonByHand() {
    const auto tok = hh::tok::loadTokenizer(fixture("bert-tiniest"));
    QCOMPARE(tok->kind(), std::string("wordpiece"));
    QCOMPARE(tok->vocabSize(), int64_t{30522});
    for (const auto& c : bertCases()) {
      const Ids got = tok->encode(c.text);
      QVERIFY2(got == c.ids, (c.text.substr(0, 40) + ": got " + show(got) + ", want " + show(c.ids)).c_str());
    }
  }

  void vocabTxtMatchesTokenizerJson() {
    const auto json = hh::tok::loadTokenizerJson(fixture("bert-tiniest/tokenizer.json"));
    const auto legacy = hh::tok::loadWordPieceVocab(fixture("bert-tiniest/vocab.txt"));
    QCOMPARE(legacy->kind(), std::string("wordpiece"));
    QCOMPARE(legacy->vocabSize(), json->vocabSize());
    for (const auto& c : bertCases()) {
      QVERIFY2(legacy->encode(c.text) == c.ids, c.text.substr(0, 40).c_str());
      QVERIFY(legacy->encode(c.text, true) == json->encode(c.text, true));
    }
    QVERIFY(legacy->specialTokens().cls == json->specialTokens().cls);
    QVERIFY(legacy->prefixIds() == json->prefixIds() && legacy->suffixIds() == json->suffixIds());
  }

  void specialTokensAndPostProcessor() {
    const auto tok = hh::tok::loadTokenizer(fixture("bert-tiniest"));
    QCOMPARE(tok->clsId(), int64_t{101});
    QCOMPARE(tok->sepId(), int64_t{102});
    QCOMPARE(tok->padId(), int64_t{0});
    QCOMPARE(tok->unkId(), int64_t{100});
    QCOMPARE(tok->maskId(), int64_t{103});
    QCOMPARE(tok->bosId(), int64_t{-1});
    QCOMPARE(tok->eosId(), int64_t{-1});
    QVERIFY(tok->encode("hello", /*addSpecialTokens=*/true) == (Ids{101, 7592, 102}));
    QVERIFY(tok->encode("", /*addSpecialTokens=*/true) == (Ids{101, 102}));
  }

  void decodeJoinsPieces() {
    const auto tok = hh::tok::loadTokenizer(fixture("bert-tiniest"));
    QCOMPARE(tok->decode({101, 7592, 1010, 2088, 999, 102}), std::string("[CLS] hello, world! [SEP]"));
    QCOMPARE(tok->decode({101, 7592, 1010, 2088, 999, 102}, /*skipSpecialTokens=*/true), std::string("hello, world!"));
    QCOMPARE(tok->decode({14477, 20961, 3468, 19204, 3989}), std::string("unaffable tokenization"));
    // HF's cleanup works token by token: " '" alone is not tightened.
    QCOMPARE(tok->decode({2123, 1005, 1056}), std::string("don ' t"));
    QCOMPARE(tok->idToToken(15687), std::string("##strom"));
    QCOMPARE(tok->tokenToId("##strom"), int64_t{15687});
  }

  void optionsOnHandMadeVocab() {
    const std::vector<std::string> words = {"[UNK]",
                                            "[CLS]",
                                            "[SEP]",
                                            "Caf",
                                            "##\xC3\xA9",
                                            "##e",
                                            "caf",
                                            "Hi",
                                            "hi",
                                            "\xE4\xB8\xAD\xE6\x96\x87",
                                            "##x",
                                            "!",
                                            "\xCE\xBF\xCF\x82",
                                            "\xCE\xBF\xCF\x83"};
    std::unordered_map<std::string, int64_t> vocab;
    for (size_t i = 0; i < words.size(); ++i) vocab[words[i]] = static_cast<int64_t>(i);
    hh::tok::WordPieceOptions cased;
    cased.lowercase = false;  // strip_accents unset: follows lowercase, so accents stay
    hh::tok::WordPieceTokenizer keep(vocab, cased, "hand-made");
    QVERIFY(keep.encode("Caf\xC3\xA9 Hi!") == (Ids{3, 4, 7, 11}));
    QVERIFY(keep.encode("caf\xC3\xA9") == (Ids{6, 4}));
    cased.stripAccents = true;  // explicit: NFD + drop Mn, still cased
    hh::tok::WordPieceTokenizer strip(vocab, cased, "hand-made");
    QVERIFY(strip.encode("Caf\xC3\xA9 Hi!") == (Ids{3, 5, 7, 11}));
    hh::tok::WordPieceOptions noCjk;
    noCjk.handleChineseChars = false;
    hh::tok::WordPieceTokenizer joined(vocab, noCjk, "hand-made");
    QVERIFY(joined.encode("\xE4\xB8\xAD\xE6\x96\x87x") == (Ids{9, 10}));  // 中文x stays one word
    hh::tok::WordPieceOptions lower;
    hh::tok::WordPieceTokenizer lowerTok(vocab, lower, "hand-made");
    QVERIFY(lowerTok.encode("HI") == (Ids{8}));
    // ΟΣ -> οσ: lowercased a character at a time, as HF tokenizers does (no final sigma ς).
    QVERIFY(lowerTok.encode("\xCE\x9F\xCE\xA3") == (Ids{13}));
    // An unassigned character (Cn, U+0378) is not a control character to drop: "a\u0378b" is one
    // word outside the vocabulary, [UNK] (HF tokenizers' is_other is Cc, Cf and Co only).
    QVERIFY(lowerTok.encode("hi\xCD\xB8hi") == (Ids{0}));
    QVERIFY(lowerTok.encode("h\x01i") == (Ids{8}));  // a control character (Cc) is dropped
    bool threw = false;
    try {
      hh::tok::WordPieceOptions o;
      o.unkToken = "<nope>";
      hh::tok::WordPieceTokenizer bad(vocab, o, "hand-made");
    } catch (const std::runtime_error& e) {
      threw = std::string(e.what()).find("hand-made") != std::string::npos;
    }
    QVERIFY(threw);
  }
};

HH_TEST_SUITE(TestWordPiece, "engine.tokenizers.wordpiece", &TestWordPiece::tokenizerJsonByHand, &TestWordPiece::vocabTxtMatchesTokenizerJson, &TestWordPiece::specialTokensAndPostProcessor, &TestWordPiece::decodeJoinsPieces, &TestWordPiece::optionsOnHandMadeVocab)

}  // namespace test_wordpiece

#if HH_HAVE_QTEST
#include "test_wordpiece.moc"
#endif
