// Named model shapes for benchmarks (random weights; the shape is what costs time and memory):
//   demo        the demo teacher's: GPT-2, 4 layers, 4 heads of 32, 128 wide, vocab 50257
//   gpt2-small  GPT-2 124M: 12 layers, 12 heads of 64, 768 wide, MLP 3072, vocab 50257
//   llama-1b    Llama-3.2-1B: 16 layers, 32 query heads over 8 kv heads of 64, 2048 wide,
//               MLP 8192 (SiLU gated), vocab 128256, rope theta 500000 (no llama3 rope scaling:
//               it changes values, not cost), tied embeddings
// as Hugging Face config.json objects for models::parseModelConfig.
#pragma once
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace hh::models {

const std::vector<std::string>& benchmarkShapeNames();
// `positions`: the model's maximum positions (at least what the benchmark reads).
// Throws std::invalid_argument naming the shapes for an unknown name.
nlohmann::json benchmarkShapeConfig(const std::string& shape, int64_t positions);

}  // namespace hh::models
