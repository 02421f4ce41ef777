// Fuzz target: the legacy GPT-2 files vocab.json + merges.txt (+ an optional
// tokenizer_config.json), one input split at the separator, loaded by loadTokenizer from their
// folder. The loaded tokenizer encodes and decodes.
#include "fuzz/tokenizer_exercise.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return hh::fuzz::fuzzTokenizerFolder("tokenizer_bpe", {"vocab.json", "merges.txt"}, data, size);
}
