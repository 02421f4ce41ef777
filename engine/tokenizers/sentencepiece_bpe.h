// SentencePiece-style BPE with byte fallback (Llama 1/2, Mistral tokenizer.json).
// Spaces are the character "▁" (U+2581), added in one of two ways:
//   normalizer  Sequence[Prepend("▁"), Replace(" " -> "▁")]: every run gets a leading "▁"
//               (the whole run is then one BPE word);
//   pre-tokenizer Metaspace{replacement, prepend_scheme always|first|never, split}: ' ' -> "▁",
//               "▁" prepended (always; or, for "first", only to the run at the start of the
//               input) unless already there; with split, each "▁" starts a new word.
// Other normalizer steps understood: Replace with a plain string pattern, NFC/NFD/NFKC/NFKD,
// Lowercase. Model: each character of a word is its vocab token if there is one, else (byte
// fallback) one "<0xXX>" token per UTF-8 byte, else the unknown token (consecutive ones fused
// with fuse_unk); then the merges (BpeModel).
// Decoder: tokenizer.json's chain of decoders, each applied to the list of token strings in turn
// as Hugging Face tokenizers applies them: Replace (a plain string), ByteFallback ("<0xXX>" runs
// back into bytes; an invalid UTF-8 run gives one U+FFFD per byte), Fuse, Strip, Metaspace. With
// no decoder the tokens are joined with ' ', as Hugging Face does.
#pragma once
#include <array>
#include <memory>
#include <string>
#include <vector>

#include "engine/tokenizers/bpe_model.h"
#include "engine/tokenizers/tokenizer.h"

namespace hh::tok {

struct NormalizerStep {
  enum class Kind { kPrepend, kReplace, kNfc, kNfd, kNfkc, kNfkd, kLowercase };
  Kind kind;
  std::string from, to;  // kPrepend: `to` is prepended; kReplace: every `from` becomes `to`
};

// One decoder of a tokenizer.json, applied to the list of token strings.
struct DecodeStep {
  enum class Kind {
    kReplace,       // every `from` in each token becomes `to`
    kByteFallback,  // runs of "<0xXX>" tokens become the bytes they name
    kFuse,          // all tokens become one
    kStrip,         // up to `start` leading and `stop` trailing `from` cut from each token
    kMetaspace,     // `from` becomes ' '; in the first token it is dropped when `dropInFirst`
  };
  Kind kind;
  std::string from, to;
  int64_t start = 0, stop = 0;
  bool dropInFirst = false;
};

// Llama's decoder: Replace("▁" -> ' '), ByteFallback, Fuse, Strip(' ', 1, 0).
std::vector<DecodeStep> llamaDecoder();

// The decoder chain applied to `tokens` (HF's decode_chain of each step, then join).
std::string runDecoder(const std::vector<DecodeStep>& steps, std::vector<std::string> tokens);

struct SentencePieceOptions {
  std::vector<NormalizerStep> normalizer;
  bool metaspace = false;  // a Metaspace pre-tokenizer is present
  std::string replacement = "\xE2\x96\x81";  // U+2581
  enum class Prepend { kAlways, kFirst, kNever } prepend = Prepend::kAlways;  // Metaspace only
  bool split = true;                                                          // Metaspace only
  bool byteFallback = true;
  bool fuseUnk = true;
  int64_t unkId = -1;
  bool ignoreMerges = false;       // a word that is itself in the vocab is taken whole
  bool hasDecoder = true;          // false: tokens joined with ' ' (tokenizer.json without one)
  std::vector<DecodeStep> decoder = llamaDecoder();
};

class SentencePieceBpeTokenizer : public Tokenizer {
 public:
  SentencePieceBpeTokenizer(std::unique_ptr<BpeModel> model, SentencePieceOptions options);
  std::string kind() const override { return "sentencepiece-bpe"; }
  const BpeModel& model() const { return *model_; }

 protected:
  void encodeRun(std::string_view text, bool atStart, std::vector<int64_t>& out) const override;
  std::string decodePieces(const std::vector<Piece>& pieces) const override;
  int64_t modelTokenToId(const std::string& token) const override { return model_->id(token); }
  const std::string* modelIdToToken(int64_t id) const override { return model_->token(id); }
  int64_t modelVocabSize() const override { return model_->size(); }

 private:
  void encodeWord(std::string_view word, std::vector<int64_t>& out) const;

  std::unique_ptr<BpeModel> model_;
  SentencePieceOptions options_;
  std::array<int32_t, 256> byteIds_{};  // id of "<0xXX>", -1 when absent
};

}  // namespace hh::tok
