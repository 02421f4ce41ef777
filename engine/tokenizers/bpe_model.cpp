// BPE merge core and word cache; see bpe_model.h.
#include "engine/tokenizers/bpe_model.h"

#include <algorithm>
#include <climits>
#include <queue>

#include "engine/io/safetensors.h"

namespace hh::tok {

BpeModel::BpeModel(std::unordered_map<std::string, int64_t> vocab,
                   const std::vector<std::pair<std::string, std::string>>& merges, const std::string& source) {
  int64_t maxId = -1;
  for (const auto& [token, id] : vocab) {
    if (id < 0 || id > INT32_MAX - 1) {
      throw io::FormatError(source + ": token '" + token + "' has id " + std::to_string(id) +
                            " (ids must lie in [0, 2^31 - 1))");
    }
    maxId = std::max(maxId, id);
  }
  // The id -> token table is a vector: refuse vocabularies whose ids are mostly holes (a hostile
  // {"a": 2000000000} would otherwise allocate tens of gigabytes).
  if (maxId >= 2 * static_cast<int64_t>(vocab.size()) + 65536) {
    throw io::FormatError(source + ": ids run up to " + std::to_string(maxId) + " for only " +
                          std::to_string(vocab.size()) + " tokens (the vocabulary must be dense)");
  }
  tokens_.resize(static_cast<size_t>(maxId + 1));
  present_.assign(tokens_.size(), false);
  ids_.reserve(vocab.size());
  for (auto& [token, id] : vocab) {
    tokens_[static_cast<size_t>(id)] = token;
    present_[static_cast<size_t>(id)] = true;
    ids_.emplace(token, static_cast<int32_t>(id));
  }
  merges_.reserve(merges.size());
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const auto& [a, b] = merges[rank];
    const int64_t ia = id(a), ib = id(b), ir = id(a + b);
    if (ia < 0 || ib < 0 || ir < 0) {
      const std::string& missing = ia < 0 ? a : ib < 0 ? b : a + b;
      throw io::FormatError(source + ": merge " + std::to_string(rank) + " '" + a + " " + b + "': token '" + missing +
                            "' is not in the vocabulary");
    }
    // A repeated pair takes its later rank, as both the reference encoder and HF tokenizers do.
    merges_[key(static_cast<int32_t>(ia), static_cast<int32_t>(ib))] = {static_cast<int32_t>(rank),
                                                                         static_cast<int32_t>(ir)};
  }
}

int64_t BpeModel::id(const std::string& token) const {
  const auto it = ids_.find(token);
  return it == ids_.end() ? -1 : it->second;
}

const std::string* BpeModel::token(int64_t id) const {
  if (id < 0 || id >= size() || !present_[static_cast<size_t>(id)]) return nullptr;
  return &tokens_[static_cast<size_t>(id)];
}

const BpeModel::Merge* BpeModel::findMerge(int32_t a, int32_t b) const {
  const auto it = merges_.find(key(a, b));
  return it == merges_.end() ? nullptr : &it->second;
}

void BpeModel::merge(std::vector<int32_t>& symbols) const {
  if (symbols.size() < 2) return;
  if (symbols.size() <= 48) {
    mergeSmall(symbols);
  } else {
    mergeLarge(symbols);
  }
}

// Short words: keep the rank of every adjacent pair, take the leftmost lowest, update its
// neighbours. O(n^2) in the worst case but with tiny constants.
void BpeModel::mergeSmall(std::vector<int32_t>& s) const {
  std::vector<int32_t> rank(s.size() - 1), result(s.size() - 1);
  auto look = [&](size_t i) {
    const Merge* m = findMerge(s[i], s[i + 1]);
    rank[i] = m ? m->rank : INT32_MAX;
    result[i] = m ? m->result : -1;
  };
  for (size_t i = 0; i + 1 < s.size(); ++i) look(i);
  while (!rank.empty()) {
    const auto best = std::min_element(rank.begin(), rank.end());
    if (*best == INT32_MAX) break;
    const size_t i = static_cast<size_t>(best - rank.begin());
    s[i] = result[i];
    s.erase(s.begin() + static_cast<std::ptrdiff_t>(i) + 1);
    rank.erase(rank.begin() + static_cast<std::ptrdiff_t>(i));
    result.erase(result.begin() + static_cast<std::ptrdiff_t>(i));
    if (i > 0) look(i - 1);
    if (i < rank.size()) look(i);
  }
}

// Long words: symbols in a linked list, candidate pairs in a min-heap on (rank, position);
// stale entries (a side already merged away) are skipped when popped.
void BpeModel::mergeLarge(std::vector<int32_t>& s) const {
  const int32_t n = static_cast<int32_t>(s.size());
  std::vector<int32_t> prev(n), next(n);
  for (int32_t i = 0; i < n; ++i) prev[i] = i - 1, next[i] = i + 1 < n ? i + 1 : -1;
  struct Candidate {
    int32_t rank, pos, left, right, result;
    bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> heap;
  auto push = [&](int32_t pos) {
    if (pos < 0 || next[pos] < 0) return;
    if (const Merge* m = findMerge(s[pos], s[next[pos]])) heap.push({m->rank, pos, s[pos], s[next[pos]], m->result});
  };
  for (int32_t i = 0; i + 1 < n; ++i) push(i);
  while (!heap.empty()) {
    const Candidate c = heap.top();
    heap.pop();
    const int32_t right = next[c.pos];
    if (s[c.pos] != c.left || right < 0 || s[right] != c.right) continue;
    s[c.pos] = c.result;
    s[right] = -1;
    next[c.pos] = next[right];
    if (next[right] >= 0) prev[next[right]] = c.pos;
    push(prev[c.pos]);
    push(c.pos);
  }
  size_t out = 0;
  for (int32_t i = 0; i >= 0; i = next[i]) s[out++] = s[i];
  s.resize(out);
}

bool BpeModel::lookup(std::string_view word, std::vector<int64_t>& out) const {
  if (word.size() > kMaxCachedWordBytes) return false;
  std::lock_guard<std::mutex> lock(cacheMutex_);
  const auto it = cache_.find(std::string(word));
  if (it == cache_.end()) return false;
  out.insert(out.end(), it->second.begin(), it->second.end());
  return true;
}

void BpeModel::remember(std::string_view word, const std::vector<int32_t>& ids) const {
  if (word.size() > kMaxCachedWordBytes) return;
  std::lock_guard<std::mutex> lock(cacheMutex_);
  if (cache_.size() < kMaxCacheEntries) cache_.emplace(std::string(word), ids);
}

}  // namespace hh::tok
