// Fuzz target: a model.safetensors.index.json (ShardedSafetensors::open), with two small valid
// shards beside it, then every tensor of the opened model.
#include <exception>
#include <string>

#include "engine/io/safetensors.h"
#include "fuzz/fuzz_support.h"

namespace {

// A safetensors file holding `header` (JSON) and `data`.
std::string shardBytes(const std::string& header, const std::string& data) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
  return out + header + data;
}

const std::string& setUp() {
  static const std::string dir = [] {
    const std::string d = hh::fuzz::scratchDir("safetensors_index");
    hh::fuzz::writeFile(d + "/model-00001-of-00002.safetensors",
                        shardBytes(R"({"__metadata__":{"format":"pt"},"wte":{"dtype":"F32","shape":[2,2],)"
                                   R"("data_offsets":[0,16]},"ids":{"dtype":"I64","shape":[1],"data_offsets":[16,24]}})",
                                   std::string(24, '\x01')));
    hh::fuzz::writeFile(d + "/model-00002-of-00002.safetensors",
                        shardBytes(R"({"lm_head":{"dtype":"BF16","shape":[3],"data_offsets":[0,6]}})",
                                   std::string(6, '\x3f')));
    return d;
  }();
  return dir;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = setUp() + "/model.safetensors.index.json";
  hh::fuzz::writeFile(path, hh::fuzz::asText(data, size));
  try {
    const auto model = hh::io::ShardedSafetensors::open(path);
    for (const auto& name : model.names()) hh::fuzz::copyBytes(model, name);
    (void)model.metadata();
  } catch (const std::exception& e) {
    hh::fuzz::requireNamesFile(e, path, {"model.safetensors.index.json", "model-0000"});
  }
  return 0;
}
