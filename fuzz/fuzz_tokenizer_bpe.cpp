// Fuzz target: the legacy GPT-2 files vocab.json + merges.txt (+ an optional
// tokenizer_config.json), one input split at the separator, loaded by loadTokenizer from their
// folder. The loaded tokenizer encodes and decodes.
#include <exception>

#include "engine/tokenizers/tokenizer.h"
#include "fuzz/fuzz_support.h"
#include "fuzz/tokenizer_exercise.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string dir = hh::fuzz::scratchDir("tokenizer_bpe");
  const auto parts = hh::fuzz::splitFiles(data, size, 3);
  hh::fuzz::writeFile(dir + "/vocab.json", parts[0]);
  hh::fuzz::writeFile(dir + "/merges.txt", parts.size() > 1 ? parts[1] : std::string_view());
  if (parts.size() > 2) hh::fuzz::writeFile(dir + "/tokenizer_config.json", parts[2]);
  else hh::fuzz::removeFile(dir + "/tokenizer_config.json");
  try {
    const auto tok = hh::tok::loadTokenizer(dir);
    hh::fuzz::exerciseTokenizer(*tok, hh::fuzz::asText(data, size));
  } catch (const std::exception&) {
  }
  return 0;
}
