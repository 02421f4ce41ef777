#include "engine/generation/text_stream.h"

namespace hh::gen {

bool endsMidCharacter(const std::string& s) {
  // Walk back over continuation bytes (10xxxxxx) to the lead byte, then compare lengths.
  size_t continuation = 0;
  for (size_t i = s.size(); i > 0 && continuation < 4; --i) {
    const auto byte = static_cast<unsigned char>(s[i - 1]);
    if ((byte & 0xC0) == 0x80) {
      ++continuation;
      continue;
    }
    const size_t length = byte >= 0xF0 ? 4 : byte >= 0xE0 ? 3 : byte >= 0xC0 ? 2 : 1;
    return length > continuation + 1;
  }
  return false;
}

TextStream::TextStream(const tok::Tokenizer& tokenizer, const std::vector<int64_t>& context) : tokenizer_(tokenizer) {
  if (context.empty()) return;
  tokens_.push_back(context.back());
  read_ = 1;
}

std::string TextStream::decodeRange(size_t begin, size_t end) const {
  return tokenizer_.decode(std::vector<int64_t>(tokens_.begin() + long(begin), tokens_.begin() + long(end)),
                           /*skipSpecialTokens=*/true);
}

std::string TextStream::push(int64_t token) {
  tokens_.push_back(token);
  const std::string before = decodeRange(prefix_, read_);
  const std::string now = decodeRange(prefix_, tokens_.size());
  if (now.size() <= before.size() || now.compare(0, before.size(), before) != 0 || endsMidCharacter(now)) return {};
  std::string piece = now.substr(before.size());
  prefix_ = read_;
  read_ = tokens_.size();
  text_ += piece;
  return piece;
}

}  // namespace hh::gen
