// BERT WordPiece (Hugging Face "BertNormalizer" + "BertPreTokenizer" + "WordPiece").
//   normalizer (each step optional, in this order):
//     clean text      drop U+0000, U+FFFD and control characters (category C* except \t\n\r),
//                     map every whitespace character to ' '
//     CJK             put spaces around CJK ideographs (unicode_text.h isCjk)
//     strip accents   NFD, then drop nonspacing marks (Mn); on when strip_accents is true, or
//                     null and lowercase is on (the text stays decomposed, as in HF)
//     lowercase       full Unicode lower-case mapping
//   pre-tokenizer: split on whitespace (dropped) and around each punctuation character
//     ("BertPreTokenizer"; ASCII punctuation or category P*), or on whitespace only
//     ("WhitespaceSplit").
//   model: per word of at most maxInputCharsPerWord code points, greedy longest match from
//     the left, pieces after the first looked up with the "##" prefix; a word with a piece that
//     matches nothing, or a longer word, becomes the single unknown token.
//   decoder: tokens joined with ' ', "##" pieces glued to the previous one; with cleanup,
//     " ." " ?" " !" " ," " ' " " n't" " 'm" " do not" " 's" " 've" " 're" are tightened as HF does.
#pragma once
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/tokenizers/tokenizer.h"

namespace hh::tok {

struct WordPieceOptions {
  bool normalize = true;  // false: no normalizer at all (tokenizer.json "normalizer": null)
  bool cleanText = true;
  bool handleChineseChars = true;
  std::optional<bool> stripAccents;  // unset: follow lowercase
  bool lowercase = true;
  bool splitPunctuation = true;  // BertPreTokenizer; false: WhitespaceSplit
  std::string unkToken = "[UNK]";
  std::string prefix = "##";
  size_t maxInputCharsPerWord = 100;
  bool cleanupDecode = true;
};

class WordPieceTokenizer : public Tokenizer {
 public:
  // `source` names the file for errors (hh::io::FormatError when unkToken is not in the vocab).
  WordPieceTokenizer(std::unordered_map<std::string, int64_t> vocab, WordPieceOptions options,
                     const std::string& source);
  std::string kind() const override { return "wordpiece"; }

  std::string normalize(std::string_view text) const;
  std::vector<std::string> preTokenize(const std::string& normalized) const;

 protected:
  void encodeRun(std::string_view text, bool atStart, std::vector<int64_t>& out) const override;
  std::string decodePieces(const std::vector<Piece>& pieces) const override;
  int64_t modelTokenToId(const std::string& token) const override;
  const std::string* modelIdToToken(int64_t id) const override;
  int64_t modelVocabSize() const override { return static_cast<int64_t>(tokens_.size()); }

 private:
  void encodeWord(const std::string& word, std::vector<int64_t>& out) const;

  std::unordered_map<std::string, int64_t> ids_;
  std::vector<std::string> tokens_;
  std::vector<bool> present_;
  WordPieceOptions options_;
  int64_t unkId_ = -1;
};

}  // namespace hh::tok
