// SentencePiece models (`tokenizer.model`: Llama 1/2, Mistral v0.1, TinyLlama, stories260K and
// many others ship only this file) through the SentencePiece library itself (Debian's
// libsentencepiece-dev): its normaliser, its BPE or unigram model, its byte fallback and its
// decoder, so the ids are the library's own.
//   encode: each run of text between added tokens is encoded by the library (which puts its dummy
//     "▁" prefix before every run, as Hugging Face's LlamaTokenizer with legacy=true does); with
//     addSpecialTokens, tokenizer_config.json's add_bos_token (default true) puts bos before and
//     add_eos_token (default false) eos after.
//   decode: consecutive model pieces are decoded by the library ("▁" -> ' ', the leading space of
//     a run dropped, "<0xNN>" byte pieces joined back into UTF-8); added tokens (bos, eos, unk and
//     the config's added_tokens_decoder) are written verbatim, or skipped with skipSpecialTokens.
// The special-token roles come from tokenizer_config.json / special_tokens_map.json, else from
// the model's own unk/bos/eos/pad ids. A file that is not a SentencePiece model (or larger than
// kMaxModelBytes) is an hh::io::FormatError naming it.
#pragma once
#include <memory>
#include <string>

#include "engine/tokenizers/tokenizer.h"

namespace hh::tok {

constexpr int64_t kMaxModelBytes = int64_t(256) << 20;  // the largest known models are ~5 MB

// `path`: a tokenizer.model file; its folder's tokenizer_config.json is read when present.
std::unique_ptr<Tokenizer> loadSentencePieceModel(const std::string& path);

}  // namespace hh::tok
