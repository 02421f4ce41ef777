// SentencePiece-style BPE with byte fallback; see sentencepiece_bpe.h.
#include "engine/tokenizers/sentencepiece_bpe.h"

#include <cstdio>

#include "engine/tokenizers/unicode_text.h"

namespace hh::tok {

namespace {
// "<0xXX>" -> XX, else -1.
int byteTokenValue(std::string_view t) {
  if (t.size() != 6 || t.substr(0, 3) != "<0x" || t[5] != '>') return -1;
  int v = 0;
  for (size_t i = 3; i < 5; ++i) {
    const char c = t[i];
    const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (d < 0) return -1;
    v = v * 16 + d;
  }
  return v;
}

// HF's ByteFallback: each run of byte tokens becomes its bytes when they are valid UTF-8, else one
// U+FFFD per byte; other tokens pass unchanged.
std::vector<std::string> fallBackToBytes(std::vector<std::string> tokens) {
  std::vector<std::string> out;
  out.reserve(tokens.size());
  std::string bytes;
  auto flushBytes = [&] {
    if (bytes.empty()) return;
    if (text::isValidUtf8(bytes)) {
      out.push_back(bytes);
    } else {
      for (size_t i = 0; i < bytes.size(); ++i) text::appendUtf8(out.emplace_back(), text::kReplacement);
    }
    bytes.clear();
  };
  for (std::string& t : tokens) {
    const int b = byteTokenValue(t);
    if (b >= 0) {
      bytes.push_back(static_cast<char>(b));
      continue;
    }
    flushBytes();
    out.push_back(std::move(t));
  }
  flushBytes();
  return out;
}

// HF's Strip: up to `start` leading and `stop` trailing copies of the character `c` cut.
void stripToken(std::string& t, const std::string& c, int64_t start, int64_t stop) {
  if (c.empty()) return;
  size_t begin = 0, end = t.size();
  for (int64_t i = 0; i < start && t.compare(begin, c.size(), c) == 0; ++i) begin += c.size();
  for (int64_t i = 0; i < stop && end >= begin + c.size() && t.compare(end - c.size(), c.size(), c) == 0; ++i) {
    end -= c.size();
  }
  t = t.substr(begin, end - begin);
}

void applyStep(const DecodeStep& step, std::vector<std::string>& tokens) {
  using K = DecodeStep::Kind;
  switch (step.kind) {
    case K::kReplace:
      for (std::string& t : tokens) text::replaceAll(t, step.from, step.to);
      break;
    case K::kByteFallback:
      tokens = fallBackToBytes(std::move(tokens));
      break;
    case K::kFuse: {
      std::string all;
      for (const std::string& t : tokens) all += t;
      tokens.assign(1, std::move(all));
      break;
    }
    case K::kStrip:
      for (std::string& t : tokens) stripToken(t, step.from, step.start, step.stop);
      break;
    case K::kMetaspace:
      for (size_t i = 0; i < tokens.size(); ++i) {
        text::replaceAll(tokens[i], step.from, i == 0 && step.dropInFirst ? "" : " ");
      }
      break;
  }
}
}  // namespace

std::vector<DecodeStep> llamaDecoder() {
  using K = DecodeStep::Kind;
  return {
      {K::kReplace, "\xE2\x96\x81", " "}, {K::kByteFallback, "", ""}, {K::kFuse, "", ""}, {K::kStrip, " ", "", 1, 0}};
}

std::string runDecoder(const std::vector<DecodeStep>& steps, std::vector<std::string> tokens) {
  for (const DecodeStep& step : steps) applyStep(step, tokens);
  std::string out;
  for (const std::string& t : tokens) out += t;
  return out;
}

SentencePieceBpeTokenizer::SentencePieceBpeTokenizer(std::unique_ptr<BpeModel> model, SentencePieceOptions options)
    : model_(std::move(model)), options_(std::move(options)) {
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    byteIds_[b] = static_cast<int32_t>(model_->id(name));
  }
}

void SentencePieceBpeTokenizer::encodeWord(std::string_view word, std::vector<int64_t>& out) const {
  if (word.empty() || model_->lookup(word, out)) return;
  if (options_.ignoreMerges) {
    const int64_t whole = model_->id(std::string(word));
    if (whole >= 0) {
      out.push_back(whole);
      return;
    }
  }
  std::vector<int32_t> symbols;
  symbols.reserve(word.size());
  std::string ch;
  bool lastUnk = false;
  for (size_t i = 0; i < word.size();) {
    char32_t cp;
    const size_t len = text::decodeUtf8(word, i, cp);
    ch.assign(word.substr(i, len));
    i += len;
    const int64_t id = model_->id(ch);
    if (id >= 0) {
      symbols.push_back(static_cast<int32_t>(id));
      lastUnk = false;
      continue;
    }
    if (options_.byteFallback) {
      bool all = true;
      for (const char c : ch) all = all && byteIds_[static_cast<unsigned char>(c)] >= 0;
      if (all) {
        for (const char c : ch) symbols.push_back(byteIds_[static_cast<unsigned char>(c)]);
        lastUnk = false;
        continue;
      }
    }
    if (options_.unkId >= 0 && !(options_.fuseUnk && lastUnk)) symbols.push_back(static_cast<int32_t>(options_.unkId));
    lastUnk = true;
  }
  model_->merge(symbols);
  out.insert(out.end(), symbols.begin(), symbols.end());
  model_->remember(word, symbols);
}

void SentencePieceBpeTokenizer::encodeRun(std::string_view text, bool atStart, std::vector<int64_t>& out) const {
  std::string s(text);
  for (const NormalizerStep& step : options_.normalizer) {
    using K = NormalizerStep::Kind;
    switch (step.kind) {
      case K::kPrepend: if (!s.empty()) s.insert(0, step.to); break;
      case K::kReplace: text::replaceAll(s, step.from, step.to); break;
      case K::kNfc: s = text::normalizeForm(s, text::NormalForm::kNfc); break;
      case K::kNfd: s = text::normalizeForm(s, text::NormalForm::kNfd); break;
      case K::kNfkc: s = text::normalizeForm(s, text::NormalForm::kNfkc); break;
      case K::kNfkd: s = text::normalizeForm(s, text::NormalForm::kNfkd); break;
      case K::kLowercase: s = text::toLower(s); break;
    }
  }
  if (!options_.metaspace) {
    encodeWord(s, out);
    return;
  }
  const std::string& r = options_.replacement;
  text::replaceAll(s, " ", r);
  using P = SentencePieceOptions::Prepend;
  const bool prepend = options_.prepend == P::kAlways || (options_.prepend == P::kFirst && atStart);
  if (prepend && s.compare(0, r.size(), r) != 0) s.insert(0, r);
  if (!options_.split || r.empty()) {
    encodeWord(s, out);
    return;
  }
  // Each replacement character starts a new word (it stays at the front of that word).
  size_t begin = 0;
  for (size_t pos = s.find(r, 1); pos != std::string::npos; pos = s.find(r, pos + r.size())) {
    encodeWord(std::string_view(s).substr(begin, pos - begin), out);
    begin = pos;
  }
  encodeWord(std::string_view(s).substr(begin), out);
}

std::string SentencePieceBpeTokenizer::decodePieces(const std::vector<Piece>& pieces) const {
  std::vector<std::string> tokens;
  tokens.reserve(pieces.size());
  for (const Piece& p : pieces) tokens.emplace_back(p.token);
  if (!options_.hasDecoder) {
    std::string out;
    for (size_t i = 0; i < tokens.size(); ++i) out += (i ? " " : "") + tokens[i];
    return out;
  }
  return runDecoder(options_.decoder, std::move(tokens));
}

}  // namespace hh::tok
