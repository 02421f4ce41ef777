// Helpers shared by the model suites: relative-error comparison, writing a config + weights
// folder from tensors (temporary folders: tests/support/temp_dir.h), the demo teacher's loss on
// real text with every layer swapped for a linear attention at its initialisation.
#pragma once

#include <torch/nn/functional/loss.h>
#include <torch/types.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "engine/io/safetensors.h"
#include "engine/models/model_io.h"
#include "engine/models/tensor_file.h"
#include "engine/tokenizers/tokenizer.h"
#include "tests/support/temp_dir.h"
#include "tests/support/test_device.h"

namespace hh::test {

// max |a - b| / max |b| (0 when both are zero), on the CPU whatever device either is on.
inline double relativeError(const torch::Tensor& a, const torch::Tensor& b) {
  const auto ad = a.to(torch::kCPU, torch::kDouble), bd = b.to(torch::kCPU, torch::kDouble);
  const double scale = bd.abs().max().item<double>();
  const double err = (ad - bd).abs().max().item<double>();
  return scale > 0 ? err / scale : err;
}

// The model suites' device (HH_TEST_DEVICE, tests/support/test_device.h): a folder loaded there,
// a tensor moved there. Results come back through relativeError or .cpu().
inline c10::Device testTorchDevice() { return c10::Device(hh::resolveDevice(testDevice())); }
inline hh::models::ModelPtr loadOnTestDevice(const std::string& dir) {
  hh::models::LoadOptions options;
  options.device = testTorchDevice();
  return hh::models::loadModel(dir, options);
}
inline torch::Tensor onTestDevice(const torch::Tensor& t) { return t.to(testTorchDevice()); }

// A small Llama on the test device, weights drawn with a larger spread than the 0.02 init so that
// attention is not uniform. Default: 3 layers, width 32, 4 query heads over 2 KV heads (head
// dim 8); heads of dim 64 with hidden = 64 * heads.
inline hh::models::ModelPtr tinyLlama(int64_t layers = 3, int64_t hidden = 32, int64_t heads = 4, int64_t kvHeads = 2) {
  const nlohmann::json j = {{"model_type", "llama"},        {"architectures", {"LlamaForCausalLM"}},
                            {"vocab_size", 61},             {"hidden_size", hidden},
                            {"intermediate_size", 48},      {"num_hidden_layers", layers},
                            {"num_attention_heads", heads}, {"num_key_value_heads", kvHeads},
                            {"max_position_embeddings", 512}, {"rms_norm_eps", 1e-6},
                            {"hidden_act", "silu"},         {"tie_word_embeddings", false}};
  auto model = hh::models::createModel(hh::models::parseModelConfig(j, "tiny llama"));
  at::NoGradGuard noGrad;
  torch::manual_seed(7);
  for (auto& p : model->parameters())
    if (p.dim() >= 2) p.normal_(0.0, 0.25);
  model->to(testTorchDevice());
  return model;
}

// Next-token loss of `model` on ids [B, T], without gradients.
inline double lmLoss(hh::models::TransformerModel& model, const torch::Tensor& ids) {
  torch::NoGradGuard noGrad;
  const auto logits = model.forward(ids).logits.to(torch::kFloat);  // [B, T, V]
  return torch::nn::functional::cross_entropy(logits.narrow(1, 0, ids.size(1) - 1).reshape({-1, logits.size(-1)}),
                                              ids.narrow(1, 1, ids.size(1) - 1).reshape({-1}))
      .item<double>();
}

// The demo teacher (projects/demo/teacher) and the first 2 x 128 tokens of the TinyStories sample.
struct DemoTeacherText {
  hh::models::ModelPtr model;
  torch::Tensor ids;  // [2, 128]
};
inline DemoTeacherText demoTeacherOnTinyStories() {
  const std::string folder = std::string(HH_SOURCE_DIR) + "/projects/demo/teacher";
  DemoTeacherText out{hh::models::loadModel(folder), {}};
  std::ifstream in(std::string(HH_FIXTURES_DIR) + "/tinystories/valid-sample.txt");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto all = hh::tok::loadTokenizer(folder)->encode(text);
  if (all.size() < 256) throw std::runtime_error("the TinyStories sample gives fewer than 256 tokens");
  out.ids = torch::tensor(std::vector<int64_t>(all.begin(), all.begin() + 256)).view({2, 128});
  return out;
}

// lmLoss with every layer of `model` running `kind` under `rule` at its initialisation (seed 0).
inline double lossWithLinearLayers(hh::models::TransformerModel& model, const torch::Tensor& ids,
                                   hh::attn::FeatureMapKind kind, hh::attn::UpdateRule rule) {
  hh::attn::LinearAttentionConfig c;
  c.featureMap.kind = kind;
  c.rule.rule = rule;
  torch::manual_seed(0);
  model.setAttentionPlan(hh::models::AttentionPlan::uniform(model.layerCount(), c));
  return lmLoss(model, ids);
}

inline void writeFolder(const std::string& dir, const nlohmann::json& config,
                        const std::vector<std::pair<std::string, torch::Tensor>>& tensors) {
  std::filesystem::create_directories(dir);
  writeJson(dir + "/config.json", config);
  hh::models::writeTensorFile(dir + "/model.safetensors", tensors);
}

}  // namespace hh::test
