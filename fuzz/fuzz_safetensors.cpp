// Fuzz target: a safetensors file (SafetensorsFile::open validates the header against the file
// size), then every tensor's bytes copied out of the mapping (AddressSanitizer checks each range).
#include <exception>

#include "engine/io/safetensors.h"
#include "fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = hh::fuzz::scratchDir("safetensors") + "/model.safetensors";
  hh::fuzz::writeFile(path, hh::fuzz::asText(data, size));
  try {
    const auto file = hh::io::SafetensorsFile::open(path);
    for (const auto& name : file.names()) hh::fuzz::copyBytes(file, name);
  } catch (const std::exception& e) {
    hh::fuzz::requireNamesFile(e, path, {"model.safetensors"});
  }
  return 0;
}
