// Fuzz target: a SentencePiece tokenizer.model (+ an optional tokenizer_config.json after the
// separator: add_bos_token, add_eos_token, role tokens, added_tokens_decoder) loaded by
// loadTokenizer from their folder through the SentencePiece library. The loaded tokenizer encodes
// and decodes.
#include "fuzz/tokenizer_exercise.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return hh::fuzz::fuzzTokenizerFolder("tokenizer_sentencepiece", {"tokenizer.model"}, data, size);
}
