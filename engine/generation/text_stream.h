// Generated token ids -> text pieces as they come, for streaming. Decoding the whole output again
// for every token would cost O(n) per token; this decodes a short window instead: the text of
// tokens [prefix, end) minus that of [prefix, read), where `read` is where the emitted text ends
// and `prefix` the token before it (so tokenizers that treat a leading space specially see the
// same context; the first prefix is the prompt's last token). A piece is held back while it ends
// inside a UTF-8 character (a byte-level token can carry half of one); the concatenated pieces
// equal decode(all tokens).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "engine/tokenizers/tokenizer.h"

namespace hh::gen {

class TextStream {
 public:
  // The tokenizer must outlive the stream. Special tokens are skipped, as decode(ids, true) does.
  // `context`: the prompt the tokens follow. Its last token is the first window's prefix, so a
  // SentencePiece token "▁upon" after "Once" streams as " upon" (decoded alone, at the start of a
  // text, it lost its space: "Onceupon"); the prompt's own text is not emitted.
  explicit TextStream(const tok::Tokenizer& tokenizer, const std::vector<int64_t>& context = {});
  // Adds a token; returns the text it completes ("" while a character is still incomplete).
  std::string push(int64_t token);
  const std::string& text() const { return text_; }

 private:
  std::string decodeRange(size_t begin, size_t end) const;

  const tok::Tokenizer& tokenizer_;
  std::vector<int64_t> tokens_;
  size_t prefix_ = 0, read_ = 0;
  std::string text_;
};

// Whether `s` ends inside a UTF-8 multi-byte sequence (its last lead byte announces more bytes
// than follow it).
bool endsMidCharacter(const std::string& s);

}  // namespace hh::gen
