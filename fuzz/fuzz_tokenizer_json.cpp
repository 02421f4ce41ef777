// Fuzz target: a tokenizer.json (BPE or WordPiece model, normalizer, pre-tokenizer, post-processor,
// decoder, added tokens) loaded by loadTokenizer from its folder; an optional second file after
// the separator is the tokenizer_config.json beside it. The loaded tokenizer encodes and decodes.
#include "fuzz/tokenizer_exercise.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return hh::fuzz::fuzzTokenizerFolder("tokenizer_json", {"tokenizer.json"}, data, size);
}
