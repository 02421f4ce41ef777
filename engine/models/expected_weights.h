// The tensors a config implies, by Hugging Face name (as exported, with the family's usual body
// prefix) and shape, computed without building the model — so pre-flight can check a 7B
// checkpoint's headers in milliseconds, and count parameters, before anything is allocated.
// A test keeps this list equal to what each model's exportWeights() writes.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "engine/config/model_config.h"

namespace hh::models {

struct WeightSpec {
  std::string name;             // e.g. "transformer.h.0.attn.c_attn.weight"
  std::vector<int64_t> shape;   // as stored in the file (GPT-2 Conv1D: [in, out])
  std::string what;             // the config keys behind the shape
  bool bodyPrefixOptional = false;  // the leading "transformer." / "bert." / "model." may be absent
  std::string alternative;          // another name the loader takes in its place ("" = none)
};

// The body prefix a family's checkpoints may carry ("transformer.", "bert.", "model.").
std::string bodyPrefix(Architecture arch);
// Every tensor the config needs (the LM head only when untied and not replaced by a classifier;
// no adapters).
std::vector<WeightSpec> expectedWeights(const ModelConfig& config);
// The adapter tensors ("hedgehog.layers.<i>.*") the config's attention plan needs, as the loader
// reads them. Builds each linear layer's attention module to list them (its initialisation
// draws from Torch's global random generator). Throws std::invalid_argument for a plan the
// model refuses.
std::vector<WeightSpec> expectedAdapterWeights(const ModelConfig& config);
// Number of parameters of the model the config describes (tied head counted once).
int64_t expectedParameterCount(const ModelConfig& config);

}  // namespace hh::models
