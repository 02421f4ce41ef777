// Fuzz target: a language-model corpus file as readTextDocuments reads it, the same bytes once as a
// .jsonl file ({"text": ...} per line) and once as a .txt file, and as Brown-corpus `word/tag`
// text for detagBrown.
#include <exception>

#include "engine/data/text_corpus.h"
#include "fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string dir = hh::fuzz::scratchDir("text_corpus");
  const auto text = hh::fuzz::asText(data, size);
  for (const char* name : {"/corpus.jsonl", "/corpus.txt"}) {
    hh::fuzz::writeFile(dir + name, text);
    try {
      (void)hh::data::readTextDocuments(dir + name);
    } catch (const std::exception& e) {
      hh::fuzz::requireNamesFile(e, dir, {name + 1});
    }
  }
  try {
    (void)hh::data::detagBrown(std::string(text));
  } catch (const std::exception&) {
  }
  return 0;
}
