// GPT-2 byte-level BPE (OpenAI encoder.py; Hugging Face "ByteLevel" pre-tokenizer + "BPE").
//   1. pre-tokenize with GPT-2's pattern, hand-coded (std::regex has no \p{..} nor this
//      lookahead), with the classes of unicode_text.h's gpt2Class:
//        's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//      (alternatives tried in order at each position; "\s+(?!\S)" leaves the last whitespace
//      character of a run for the next word's optional leading space);
//   2. map every byte of a piece to one printable character (bytesToUnicode: the bytes
//      '!'..'~', 0xA1..0xAC, 0xAE..0xFF map to themselves, the other 68 to U+0100.. in order),
//      i.e. to the vocab id of that one-character token;
//   3. apply the merges (BpeModel), caching each piece's ids.
// Decoding maps characters back to bytes, so the original bytes come back exactly; characters
// outside the table (only in hand-made vocabs) are emitted as their own UTF-8.
#pragma once
#include <array>
#include <memory>
#include <utility>
#include <vector>

#include "engine/tokenizers/bpe_model.h"
#include "engine/tokenizers/tokenizer.h"

namespace hh::tok {

// byte -> code point of its printable stand-in.
const std::array<char32_t, 256>& bytesToUnicode();

// Splits `text` into GPT-2 pre-tokens; appends [begin, end) byte ranges to `pieces`.
void splitGpt2(std::string_view text, std::vector<std::pair<size_t, size_t>>& pieces);

struct ByteLevelOptions {
  bool addPrefixSpace = false;  // prepend ' ' to a run that does not start with one
  bool useRegex = true;         // false: the whole run is one piece
  int64_t unkId = -1;           // for a byte whose token is missing (hand-made vocabs); -1: drop it
};

class ByteLevelBpeTokenizer : public Tokenizer {
 public:
  // A byte whose one-character token is not in the vocab (small test vocabs) becomes
  // options.unkId, or is dropped when that is -1, as Hugging Face's BPE does.
  ByteLevelBpeTokenizer(std::unique_ptr<BpeModel> model, ByteLevelOptions options);
  std::string kind() const override { return "bytelevel-bpe"; }
  const BpeModel& model() const { return *model_; }

 protected:
  void encodeRun(std::string_view text, bool atStart, std::vector<int64_t>& out) const override;
  std::string decodePieces(const std::vector<Piece>& pieces) const override;
  int64_t modelTokenToId(const std::string& token) const override { return model_->id(token); }
  const std::string* modelIdToToken(int64_t id) const override { return model_->token(id); }
  int64_t modelVocabSize() const override { return model_->size(); }

 private:
  void encodePiece(std::string_view piece, std::vector<int64_t>& out) const;

  std::unique_ptr<BpeModel> model_;
  ByteLevelOptions options_;
  std::array<int32_t, 256> byteIds_{};
};

}  // namespace hh::tok
