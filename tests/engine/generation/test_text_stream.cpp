// engine.generation.text_stream: GPT-2 token ids pushed one at a time give pieces whose
// concatenation is the decoded text, byte for byte, on text with multi-byte characters that
// byte-level tokens split; no piece ends inside a character; endsMidCharacter on hand-made bytes.
#include <algorithm>

#include "engine/generation/text_stream.h"
#include "tests/support/hh_test.h"

namespace test_text_stream {

class TestTextStream : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void piecesJoinToTheDecodedText() {
    const auto tok = hh::tok::loadTokenizer(std::string(HH_FIXTURES_DIR) + "/gpt2-tokenizer");
    const std::string text = "A naïve café in 東京 🦔, then plain words<|endoftext|> and more.";
    const auto ids = tok->encode(text);
    hh::gen::TextStream stream(*tok);
    std::string joined;
    int heldBack = 0;
    for (const auto id : ids) {
      const auto piece = stream.push(id);
      if (piece.empty()) ++heldBack;
      QVERIFY(!hh::gen::endsMidCharacter(piece));
      joined += piece;
    }
    QCOMPARE(joined, tok->decode(ids, /*skipSpecialTokens=*/true));
    QCOMPARE(stream.text(), joined);
    QVERIFY(heldBack > 0);  // the hedgehog emoji and the CJK characters span several byte-level tokens
  }

  // SentencePiece marks a word's leading space on the token ("▁upon"); decoded alone at the start
  // of a text the space goes, so the stream printed "Onceupon a time". With the prompt as context
  // the pieces are what the prompt's text is followed by.
  void promptGivesTheFirstTokenItsSpace() {
    const auto tok = hh::tok::loadTokenizer(std::string(HH_FIXTURES_DIR) + "/stories260K");
    const auto prompt = tok->encode("Once", /*addSpecialTokens=*/true);
    auto all = tok->encode("Once upon a time, there was", /*addSpecialTokens=*/true);
    QVERIFY(std::equal(prompt.begin(), prompt.end(), all.begin()));
    hh::gen::TextStream stream(*tok, prompt);
    std::string joined;
    for (size_t i = prompt.size(); i < all.size(); ++i) joined += stream.push(all[i]);
    QCOMPARE(joined, std::string(" upon a time, there was"));
    QCOMPARE(tok->decode(prompt, true) + joined, tok->decode(all, true));
  }

  void midCharacterBytes() {
    QVERIFY(!hh::gen::endsMidCharacter(""));
    QVERIFY(!hh::gen::endsMidCharacter("abc"));
    QVERIFY(!hh::gen::endsMidCharacter("caf\xC3\xA9"));         // é complete
    QVERIFY(hh::gen::endsMidCharacter("caf\xC3"));              // é's lead byte alone
    QVERIFY(hh::gen::endsMidCharacter("\xF0\x9F\xA6"));         // 3 of the 4 bytes of 🦔
    QVERIFY(!hh::gen::endsMidCharacter("\xF0\x9F\xA6\x94"));    // 🦔 complete
  }
};

HH_TEST_SUITE(TestTextStream, "engine.generation.text_stream", &TestTextStream::piecesJoinToTheDecodedText,
              &TestTextStream::promptGivesTheFirstTokenItsSpace, &TestTextStream::midCharacterBytes)

}  // namespace test_text_stream

#if HH_HAVE_QTEST
#include "test_text_stream.moc"
#endif
