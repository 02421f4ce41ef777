// GPT-2 byte-level BPE: pre-tokenizer scanner, byte table, encode and decode; see byte_level_bpe.h.
#include "engine/tokenizers/byte_level_bpe.h"

#include "engine/tokenizers/unicode_text.h"

namespace hh::tok {

using text::Gpt2Class;

const std::array<char32_t, 256>& bytesToUnicode() {
  static const auto table = [] {
    std::array<char32_t, 256> t{};
    char32_t extra = 0;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      t[b] = printable ? static_cast<char32_t>(b) : 0x100 + extra++;
    }
    return t;
  }();
  return table;
}

namespace {
constexpr char32_t kTableEnd = 0x100 + 68;  // one past the largest stand-in

// code point -> byte for the stand-ins, -1 elsewhere.
const std::array<int16_t, kTableEnd>& unicodeToBytes() {
  static const auto table = [] {
    std::array<int16_t, kTableEnd> t;
    t.fill(-1);
    const auto& forward = bytesToUnicode();
    for (int b = 0; b < 256; ++b) t[forward[b]] = static_cast<int16_t>(b);
    return t;
  }();
  return table;
}

inline Gpt2Class classAt(std::string_view s, size_t i, size_t& len) {
  const auto b = static_cast<unsigned char>(s[i]);
  if (b < 0x80) {
    len = 1;
    return text::gpt2Class(b);
  }
  char32_t cp;
  len = text::decodeUtf8(s, i, cp);
  return text::gpt2Class(cp);
}

// 's 't 'm 'd (2 bytes) or 're 've 'll (3 bytes) at s[i] == '\'', else 0.
inline size_t contractionLength(std::string_view s, size_t i) {
  if (i + 1 >= s.size()) return 0;
  const char c1 = s[i + 1];
  if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') return 2;
  if (i + 2 >= s.size()) return 0;
  const char c2 = s[i + 2];
  if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l')) return 3;
  return 0;
}
}  // namespace

void splitGpt2(std::string_view s, std::vector<std::pair<size_t, size_t>>& pieces) {
  const size_t n = s.size();
  size_t i = 0, len = 0;
  while (i < n) {
    // 's|'t|'re|'ve|'m|'ll|'d
    if (s[i] == '\'') {
      if (const size_t c = contractionLength(s, i)) {
        pieces.emplace_back(i, i + c);
        i += c;
        continue;
      }
    }
    // ' ?\p{L}+', ' ?\p{N}+', ' ?[^\s\p{L}\p{N}]+': an optional space, then a run of one class.
    size_t start = i;
    Gpt2Class k = classAt(s, i, len);
    if (s[i] == ' ' && i + 1 < n) {
      size_t len1;
      const Gpt2Class k1 = classAt(s, i + 1, len1);
      if (k1 != Gpt2Class::kSpace) start = i + 1, k = k1;
    }
    if (k != Gpt2Class::kSpace) {
      size_t j = start;
      while (j < n && classAt(s, j, len) == k) j += len;
      pieces.emplace_back(i, j);
      i = j;
      continue;
    }
    // '\s+(?!\S)' then '\s+': a whitespace run, less its last character when a non-space follows
    // and the run is longer than one character.
    size_t j = i, last = i;
    while (j < n && classAt(s, j, len) == Gpt2Class::kSpace) last = j, j += len;
    if (j < n && last > i) j = last;
    pieces.emplace_back(i, j);
    i = j;
  }
}

ByteLevelBpeTokenizer::ByteLevelBpeTokenizer(std::unique_ptr<BpeModel> model, ByteLevelOptions options)
    : model_(std::move(model)), options_(options) {
  const auto& table = bytesToUnicode();
  for (int b = 0; b < 256; ++b) {
    std::string token;
    text::appendUtf8(token, table[b]);
    const int64_t id = model_->id(token);
    byteIds_[b] = static_cast<int32_t>(id >= 0 ? id : options_.unkId);
  }
}

void ByteLevelBpeTokenizer::encodePiece(std::string_view piece, std::vector<int64_t>& out) const {
  if (model_->lookup(piece, out)) return;
  std::vector<int32_t> symbols;
  symbols.reserve(piece.size());
  for (const char c : piece) {
    const int32_t id = byteIds_[static_cast<unsigned char>(c)];
    if (id >= 0) symbols.push_back(id);
  }
  model_->merge(symbols);
  out.insert(out.end(), symbols.begin(), symbols.end());
  model_->remember(piece, symbols);
}

void ByteLevelBpeTokenizer::encodeRun(std::string_view text, bool /*atStart*/, std::vector<int64_t>& out) const {
  std::string prefixed;
  if (options_.addPrefixSpace && (text.empty() || text[0] != ' ')) {
    prefixed.reserve(text.size() + 1);
    prefixed.push_back(' ');
    prefixed.append(text);
    text = prefixed;
  }
  if (!options_.useRegex) {
    encodePiece(text, out);
    return;
  }
  thread_local std::vector<std::pair<size_t, size_t>> pieces;
  pieces.clear();
  splitGpt2(text, pieces);
  for (const auto& [b, e] : pieces) encodePiece(text.substr(b, e - b), out);
}

std::string ByteLevelBpeTokenizer::decodePieces(const std::vector<Piece>& pieces) const {
  const auto& back = unicodeToBytes();
  std::string out;
  for (const Piece& p : pieces) {
    if (p.added) {
      out.append(p.token);
      continue;
    }
    for (size_t i = 0; i < p.token.size();) {
      char32_t cp;
      const size_t len = text::decodeUtf8(p.token, i, cp);
      if (cp < kTableEnd && back[cp] >= 0) {
        out.push_back(static_cast<char>(back[cp]));
      } else {
        out.append(p.token.substr(i, len));
      }
      i += len;
    }
  }
  return out;
}

}  // namespace hh::tok
