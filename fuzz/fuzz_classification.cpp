// Fuzz target: a classification file as readClassificationFile reads it, the same bytes once as
// .tsv ("label<TAB>text" lines) and once as .jsonl ({"text", "label"} lines), and as a mail for
// mailBody.
#include <exception>

#include "engine/data/classification_data.h"
#include "fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string dir = hh::fuzz::scratchDir("classification");
  const auto text = hh::fuzz::asText(data, size);
  for (const char* name : {"/labels.tsv", "/labels.jsonl"}) {
    hh::fuzz::writeFile(dir + name, text);
    try {
      (void)hh::data::readClassificationFile(dir + name);
    } catch (const std::exception& e) {
      hh::fuzz::requireNamesFile(e, dir, {name + 1});
    }
  }
  try {
    (void)hh::data::mailBody(std::string(text));
  } catch (const std::exception&) {
  }
  return 0;
}
