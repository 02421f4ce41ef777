#include "engine/models/lora.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/types.h>

#include <cmath>
#include <regex>

namespace hh::models {

std::vector<std::string> loraTargetNames(const TransformerModel& model) {
  std::regex pattern;
  switch (model.config().architecture) {
    case Architecture::Gpt2: pattern = std::regex(R"(h_\d+_(c_attn|attn_c_proj))"); break;
    case Architecture::Bert: pattern = std::regex(R"(layer_\d+_(query|key|value|attention_output))"); break;
    case Architecture::Llama: pattern = std::regex(R"(layers_\d+_(q_proj|k_proj|v_proj|o_proj))"); break;
  }
  std::vector<std::string> names;
  for (const auto& item : model.named_children())
    if (std::regex_match(item.key(), pattern) && std::dynamic_pointer_cast<torch::nn::LinearImpl>(item.value()))
      names.push_back(item.key());
  return names;
}

namespace {
bool isHalf(torch::ScalarType type) { return type == torch::kBFloat16 || type == torch::kHalf; }
}  // namespace

LoraAdapters::LoraAdapters(TransformerModel& model, const LoraOptions& options) {
  if (options.rank < 1) throw std::invalid_argument("LoRA rank must be at least 1");
  scale_ = options.alpha / double(options.rank);
  const auto names = loraTargetNames(model);
  if (names.empty()) throw std::invalid_argument("LoRA: no q/k/v/o projection found in " + model.config().describe());
  auto generator = at::detail::createCPUGenerator(options.seed);
  for (const auto& item : model.named_children()) {
    if (std::find(names.begin(), names.end(), item.key()) == names.end()) continue;
    Target t;
    t.name = item.key();
    t.linear = std::dynamic_pointer_cast<torch::nn::LinearImpl>(item.value());
    t.base = t.linear->named_parameters(false)["weight"];  // the registered W0
    const int64_t out = t.base.size(0), in = t.base.size(1);
    // B A has rank at most min(out, in): a larger rank only costs memory and time.
    if (options.rank > std::min(out, in))
      throw std::invalid_argument("LoRA rank " + std::to_string(options.rank) + " is more than " + t.name + "'s " +
                                  std::to_string(out) + " x " + std::to_string(in) + " weight can use (at most " +
                                  std::to_string(std::min(out, in)) + "; mode \"full\" trains the whole weight)");
    // A and B train: fp32 (master weights) under a half-precision base, else the base's dtype.
    const auto type = isHalf(t.base.scalar_type()) ? torch::kFloat : t.base.scalar_type();
    const auto options32 = torch::TensorOptions().dtype(torch::kFloat);
    t.a = (torch::randn({options.rank, in}, generator, options32) / std::sqrt(double(options.rank)))
              .to(t.base.device(), type)
              .set_requires_grad(true);
    t.b = torch::zeros({out, options.rank}, t.base.options().dtype(type)).set_requires_grad(true);
    t.base.set_requires_grad(false);
    targets_.push_back(std::move(t));
  }
}

void LoraAdapters::apply() {
  if (merged_) return;
  // [out,in] in the base's dtype (the cast is differentiable: A and B get fp32 gradients)
  for (auto& t : targets_) t.linear->weight = t.base + (scale_ * torch::matmul(t.b, t.a)).to(t.base.scalar_type());
}

void LoraAdapters::merge() {
  if (merged_) return;
  at::NoGradGuard noGrad;
  for (auto& t : targets_) {
    t.base.add_((scale_ * torch::matmul(t.b, t.a)).to(t.base.scalar_type()));
    t.linear->weight = t.base;
    t.b.zero_();
  }
  merged_ = true;
}

std::vector<torch::Tensor> LoraAdapters::parameters() const {
  std::vector<torch::Tensor> out;
  for (const auto& t : targets_) {
    out.push_back(t.a);
    out.push_back(t.b);
  }
  return out;
}

std::vector<std::pair<std::string, torch::Tensor>> LoraAdapters::namedParameters() const {
  std::vector<std::pair<std::string, torch::Tensor>> out;
  for (const auto& t : targets_) {
    out.emplace_back(t.name + ".lora_A", t.a);
    out.emplace_back(t.name + ".lora_B", t.b);
  }
  return out;
}

}  // namespace hh::models
