// Fuzz target: a Hugging Face config.json (loadModelConfig: GPT-2, BERT, Llama keys, the
// attention plan under "hedgehog_attention"), then the config written back and parsed again.
#include <exception>

#include "engine/config/model_config.h"
#include "fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = hh::fuzz::scratchDir("model_config") + "/config.json";
  hh::fuzz::writeFile(path, hh::fuzz::asText(data, size));
  hh::models::ModelConfig config;
  try {
    config = hh::models::loadModelConfig(path);
  } catch (const std::exception& e) {
    hh::fuzz::requireNamesFile(e, path, {"config.json"});
    return 0;
  }
  try {
    (void)config.describe();
    const auto json = hh::models::modelConfigToJson(config);
    (void)hh::models::parseModelConfig(json, "round trip").describe();
  } catch (const std::exception&) {
  }
  return 0;
}
