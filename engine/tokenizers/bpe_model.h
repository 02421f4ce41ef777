// BPE core shared by byte-level (GPT-2) and SentencePiece-style (Llama) tokenizers.
//   vocab   token string -> id (ids need not be contiguous; size() = 1 + largest id)
//   merges  ordered pairs (a, b); rank = position in the list, lower merges first. Merging a
//           pair makes the token a+b, which must be in the vocab.
// merge() takes a word as initial symbol ids and applies merges lowest rank first, leftmost
// first among equal ranks, until none applies: the result of OpenAI's encoder.py loop (merge
// every occurrence of the best pair, left to right, then look again), in O(n log n) with a heap,
// so that a pathological 100k-character "word" (a run of spaces or dashes) stays fast.
// A per-word cache (word bytes -> ids, words up to kMaxCachedWordBytes, at most kMaxCacheEntries
// entries) makes repeated words cost one hash lookup; it is guarded by a mutex.
#pragma once
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace hh::tok {

class BpeModel {
 public:
  static constexpr size_t kMaxCachedWordBytes = 256;
  static constexpr size_t kMaxCacheEntries = 1 << 20;

  // `source` names the file for error messages (hh::io::FormatError on a merge whose parts or
  // result are not in the vocab, or an id that does not fit in 32 bits).
  BpeModel(std::unordered_map<std::string, int64_t> vocab,
           const std::vector<std::pair<std::string, std::string>>& merges, const std::string& source);
  BpeModel(const BpeModel&) = delete;
  BpeModel& operator=(const BpeModel&) = delete;

  int64_t id(const std::string& token) const;    // -1 when not in the vocab
  const std::string* token(int64_t id) const;    // nullptr when no token has this id
  int64_t size() const { return static_cast<int64_t>(tokens_.size()); }
  size_t mergeCount() const { return merges_.size(); }

  // Applies the merges to `symbols` (token ids) in place.
  void merge(std::vector<int32_t>& symbols) const;

  // Cache of finished words: lookup appends the ids to `out` and returns true when present.
  bool lookup(std::string_view word, std::vector<int64_t>& out) const;
  void remember(std::string_view word, const std::vector<int32_t>& ids) const;

 private:
  struct Merge {
    int32_t rank;
    int32_t result;
  };
  static uint64_t key(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }
  const Merge* findMerge(int32_t a, int32_t b) const;
  void mergeSmall(std::vector<int32_t>& symbols) const;
  void mergeLarge(std::vector<int32_t>& symbols) const;

  std::unordered_map<std::string, int32_t> ids_;
  std::vector<std::string> tokens_;
  std::vector<bool> present_;
  std::unordered_map<uint64_t, Merge> merges_;
  mutable std::mutex cacheMutex_;
  mutable std::unordered_map<std::string, std::vector<int32_t>> cache_;
};

}  // namespace hh::tok
