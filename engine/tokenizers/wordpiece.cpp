// BERT WordPiece: normalizer, pre-tokenizer, greedy longest match, decoder; see wordpiece.h.
#include "engine/tokenizers/wordpiece.h"

#include "engine/io/safetensors.h"
#include "engine/tokenizers/unicode_text.h"

namespace hh::tok {

namespace {
// HF tokenizers' decoder cleanup, applied to each token with its leading space.
void cleanup(std::string& s) {
  text::replaceAll(s, " .", ".");
  text::replaceAll(s, " ?", "?");
  text::replaceAll(s, " !", "!");
  text::replaceAll(s, " ,", ",");
  text::replaceAll(s, " ' ", "'");
  text::replaceAll(s, " n't", "n't");
  text::replaceAll(s, " 'm", "'m");
  text::replaceAll(s, " do not", " don't");
  text::replaceAll(s, " 's", "'s");
  text::replaceAll(s, " 've", "'ve");
  text::replaceAll(s, " 're", "'re");
}
}  // namespace

WordPieceTokenizer::WordPieceTokenizer(std::unordered_map<std::string, int64_t> vocab, WordPieceOptions options,
                                       const std::string& source)
    : ids_(std::move(vocab)), options_(std::move(options)) {
  int64_t maxId = -1;
  for (const auto& [token, id] : ids_) {
    if (id < 0) throw io::FormatError(source + ": token '" + token + "' has the negative id " + std::to_string(id));
    maxId = std::max(maxId, id);
  }
  if (maxId >= 2 * static_cast<int64_t>(ids_.size()) + 65536) {  // ids index a vector: no huge holes
    throw io::FormatError(source + ": ids run up to " + std::to_string(maxId) + " for only " +
                          std::to_string(ids_.size()) + " tokens (the vocabulary must be dense)");
  }
  tokens_.resize(static_cast<size_t>(maxId + 1));
  present_.assign(tokens_.size(), false);
  for (const auto& [token, id] : ids_) {
    tokens_[static_cast<size_t>(id)] = token;
    present_[static_cast<size_t>(id)] = true;
  }
  unkId_ = modelTokenToId(options_.unkToken);
  if (unkId_ < 0) {
    throw io::FormatError(source + ": WordPiece unknown token '" + options_.unkToken + "' is not in the vocabulary");
  }
}

int64_t WordPieceTokenizer::modelTokenToId(const std::string& token) const {
  const auto it = ids_.find(token);
  return it == ids_.end() ? -1 : it->second;
}

const std::string* WordPieceTokenizer::modelIdToToken(int64_t id) const {
  if (id < 0 || id >= modelVocabSize() || !present_[static_cast<size_t>(id)]) return nullptr;
  return &tokens_[static_cast<size_t>(id)];
}

std::string WordPieceTokenizer::normalize(std::string_view in) const {
  if (!options_.normalize) return std::string(in);
  std::string s;
  s.reserve(in.size() + 8);
  for (size_t i = 0; i < in.size();) {
    char32_t cp;
    i += text::decodeUtf8(in, i, cp);
    if (options_.cleanText) {
      if (cp == 0 || cp == text::kReplacement || text::isControl(cp)) continue;
      if (text::isWhiteSpace(cp)) cp = ' ';
    }
    if (options_.handleChineseChars && text::isCjk(cp)) {
      s.push_back(' ');
      text::appendUtf8(s, cp);
      s.push_back(' ');
    } else {
      text::appendUtf8(s, cp);
    }
  }
  if (options_.stripAccents.value_or(options_.lowercase)) {
    const std::string decomposed = text::nfd(s);
    s.clear();
    for (size_t i = 0; i < decomposed.size();) {
      char32_t cp;
      const size_t len = text::decodeUtf8(decomposed, i, cp);
      if (!text::isNonspacingMark(cp)) s.append(decomposed, i, len);
      i += len;
    }
  }
  if (options_.lowercase) s = text::toLower(s);
  return s;
}

std::vector<std::string> WordPieceTokenizer::preTokenize(const std::string& s) const {
  std::vector<std::string> words;
  std::string word;
  for (size_t i = 0; i < s.size();) {
    char32_t cp;
    const size_t len = text::decodeUtf8(s, i, cp);
    if (text::isWhiteSpace(cp)) {
      if (!word.empty()) words.push_back(std::move(word)), word.clear();
    } else if (options_.splitPunctuation && text::isBertPunctuation(cp)) {
      if (!word.empty()) words.push_back(std::move(word)), word.clear();
      words.emplace_back(s, i, len);
    } else {
      word.append(s, i, len);
    }
    i += len;
  }
  if (!word.empty()) words.push_back(std::move(word));
  return words;
}

void WordPieceTokenizer::encodeWord(const std::string& word, std::vector<int64_t>& out) const {
  std::vector<size_t> starts;  // byte offset of each code point, then the end
  char32_t cp;
  for (size_t i = 0; i < word.size(); i += text::decodeUtf8(word, i, cp)) starts.push_back(i);
  const size_t n = starts.size();
  starts.push_back(word.size());
  if (n > options_.maxInputCharsPerWord) {
    out.push_back(unkId_);
    return;
  }
  std::vector<int64_t> pieces;
  std::string candidate;
  for (size_t begin = 0; begin < n;) {
    int64_t found = -1;
    size_t end = n;
    for (; end > begin; --end) {
      candidate.assign(begin > 0 ? options_.prefix : std::string());
      candidate.append(word, starts[begin], starts[end] - starts[begin]);
      found = modelTokenToId(candidate);
      if (found >= 0) break;
    }
    if (found < 0) {
      out.push_back(unkId_);
      return;
    }
    pieces.push_back(found);
    begin = end;
  }
  out.insert(out.end(), pieces.begin(), pieces.end());
}

void WordPieceTokenizer::encodeRun(std::string_view text, bool /*atStart*/, std::vector<int64_t>& out) const {
  for (const std::string& word : preTokenize(normalize(text))) encodeWord(word, out);
}

std::string WordPieceTokenizer::decodePieces(const std::vector<Piece>& pieces) const {
  std::string out, token;
  for (size_t i = 0; i < pieces.size(); ++i) {
    const std::string_view t = pieces[i].token;
    if (i == 0) {
      token.assign(t);
    } else if (t.substr(0, options_.prefix.size()) == options_.prefix && !options_.prefix.empty()) {
      token.assign(t.substr(options_.prefix.size()));
    } else {
      token.assign(" ");
      token.append(t);
    }
    if (options_.cleanupDecode) cleanup(token);
    out += token;
  }
  return out;
}

}  // namespace hh::tok
