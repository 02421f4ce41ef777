// Fuzz target: a BERT vocab.txt (+ an optional tokenizer_config.json after the separator: casing,
// accents, Chinese characters, role tokens, added_tokens_decoder) loaded by loadTokenizer from
// their folder. The loaded tokenizer encodes and decodes.
#include "fuzz/tokenizer_exercise.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return hh::fuzz::fuzzTokenizerFolder("tokenizer_wordpiece", {"vocab.txt"}, data, size);
}
