// Fuzz target: a tokenizer.json (BPE or WordPiece model, normalizer, pre-tokenizer, post-processor,
// decoder, added tokens) loaded by loadTokenizer from its folder; an optional second file after
// the separator is the tokenizer_config.json beside it. The loaded tokenizer encodes and decodes.
#include <exception>

#include "engine/tokenizers/tokenizer.h"
#include "fuzz/fuzz_support.h"
#include "fuzz/tokenizer_exercise.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string dir = hh::fuzz::scratchDir("tokenizer_json");
  const auto parts = hh::fuzz::splitFiles(data, size, 2);
  hh::fuzz::writeFile(dir + "/tokenizer.json", parts[0]);
  if (parts.size() > 1) hh::fuzz::writeFile(dir + "/tokenizer_config.json", parts[1]);
  else hh::fuzz::removeFile(dir + "/tokenizer_config.json");
  try {
    const auto tok = hh::tok::loadTokenizer(dir);
    hh::fuzz::exerciseTokenizer(*tok, hh::fuzz::asText(data, size));
  } catch (const std::exception&) {
  }
  return 0;
}
