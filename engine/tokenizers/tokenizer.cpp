// Tokenizer base: added-token matching around the model's runs, post-processor ids, decode
// dispatch and the id <-> token tables shared by every model; see tokenizer.h.
#include "engine/tokenizers/tokenizer.h"

#include <algorithm>

#include "engine/tokenizers/unicode_text.h"

namespace hh::tok {

namespace {
bool isWordChar(char32_t cp) {
  const auto c = text::gpt2Class(cp);
  return cp == '_' || c == text::Gpt2Class::kLetter || c == text::Gpt2Class::kNumber;
}

// Start of the code point that ends just before byte `i` (i > 0).
size_t previousStart(std::string_view s, size_t i) {
  size_t j = i - 1;
  while (j > 0 && i - j < 4 && (static_cast<unsigned char>(s[j]) & 0xC0) == 0x80) --j;
  return j;
}
}  // namespace

void Tokenizer::setAddedTokens(std::vector<AddedToken> tokens) {
  added_.clear();
  addedByContent_.clear();
  addedIndexById_.clear();
  for (auto& list : addedByFirstByte_) list.clear();
  for (auto& t : tokens) {
    if (t.content.empty() || t.id < 0) continue;
    const size_t index = added_.size();
    addedByContent_[t.content] = index;
    addedIndexById_[t.id] = index;
    addedByFirstByte_[static_cast<unsigned char>(t.content[0])].push_back(index);
    added_.push_back(std::move(t));
  }
  for (auto& list : addedByFirstByte_) {
    std::stable_sort(list.begin(), list.end(),
                     [&](size_t a, size_t b) { return added_[a].content.size() > added_[b].content.size(); });
  }
}

void Tokenizer::setPostProcessor(std::vector<int64_t> prefix, std::vector<int64_t> suffix) {
  prefix_ = std::move(prefix);
  suffix_ = std::move(suffix);
}

const AddedToken* Tokenizer::addedById(int64_t id) const {
  const auto it = addedIndexById_.find(id);
  return it == addedIndexById_.end() ? nullptr : &added_[it->second];
}

bool Tokenizer::findAdded(std::string_view s, size_t from, size_t& begin, size_t& end,
                          const AddedToken*& token) const {
  if (added_.empty()) return false;
  for (size_t i = from; i < s.size(); ++i) {
    const auto& candidates = addedByFirstByte_[static_cast<unsigned char>(s[i])];
    for (const size_t index : candidates) {
      const AddedToken& t = added_[index];
      if (s.compare(i, t.content.size(), t.content) != 0) continue;
      size_t b = i, e = i + t.content.size();
      if (t.singleWord) {
        char32_t before = ' ', after = ' ';
        if (b > 0) text::decodeUtf8(s, previousStart(s, b), before);
        if (e < s.size()) text::decodeUtf8(s, e, after);
        if (isWordChar(before) || isWordChar(after)) continue;
      }
      if (t.lstrip) {
        while (b > from) {
          const size_t p = previousStart(s, b);
          char32_t cp;
          text::decodeUtf8(s, p, cp);
          if (!text::isWhiteSpace(cp)) break;
          b = p;
        }
      }
      if (t.rstrip) {
        while (e < s.size()) {
          char32_t cp;
          const size_t len = text::decodeUtf8(s, e, cp);
          if (!text::isWhiteSpace(cp)) break;
          e += len;
        }
      }
      begin = b, end = e, token = &t;
      return true;
    }
  }
  return false;
}

void Tokenizer::truncateFramed(std::vector<int64_t>& ids, size_t length) const {
  if (ids.size() <= length) return;
  ids.resize(length);
  const auto keep = static_cast<std::ptrdiff_t>(std::min(suffix_.size(), ids.size()));  // the suffix's tail
  std::copy(suffix_.end() - keep, suffix_.end(), ids.end() - keep);
}

std::vector<int64_t> Tokenizer::encode(const std::string& utf8, bool addSpecialTokens) const {
  std::vector<int64_t> out;
  out.reserve(utf8.size() / 3 + 4);
  if (addSpecialTokens) out.insert(out.end(), prefix_.begin(), prefix_.end());
  const std::string_view s(utf8);
  size_t pos = 0;
  while (pos < s.size()) {
    size_t begin = s.size(), end = s.size();
    const AddedToken* token = nullptr;
    const bool found = findAdded(s, pos, begin, end, token);
    if (begin > pos) encodeRun(s.substr(pos, begin - pos), pos == 0, out);
    if (!found) break;
    out.push_back(token->id);
    pos = end;
  }
  if (addSpecialTokens) out.insert(out.end(), suffix_.begin(), suffix_.end());
  return out;
}

std::string Tokenizer::decode(const std::vector<int64_t>& ids, bool skipSpecialTokens) const {
  std::vector<Piece> pieces;
  pieces.reserve(ids.size());
  for (const int64_t id : ids) {
    if (const AddedToken* t = addedById(id)) {
      if (!(skipSpecialTokens && t->special)) pieces.push_back({t->content, true});
    } else if (const std::string* token = modelIdToToken(id)) {
      pieces.push_back({*token, false});
    }
  }
  return decodePieces(pieces);
}

int64_t Tokenizer::vocabSize() const {
  int64_t n = modelVocabSize();
  for (const auto& t : added_) n = std::max(n, t.id + 1);
  return n;
}

int64_t Tokenizer::tokenToId(const std::string& token) const {
  const auto it = addedByContent_.find(token);
  if (it != addedByContent_.end()) return added_[it->second].id;
  return modelTokenToId(token);
}

std::string Tokenizer::idToToken(int64_t id) const {
  if (const AddedToken* t = addedById(id)) return t->content;
  const std::string* token = modelIdToToken(id);
  return token ? *token : std::string();
}

}  // namespace hh::tok
