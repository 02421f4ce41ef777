// Creating, loading and saving whole models.
//   loadModel(dir): config.json -> the family's model -> weights from safetensors (shapes checked,
//   adapters loaded when config.json carries a "hedgehog_attention" plan).
//   saveModel(model, dir): a Hugging Face-style folder: config.json (with the attention plan and
//   feature maps), model.safetensors (HF names + "hedgehog.layers.<i>.*" adapter tensors), and
//   the tokenizer files copied from `tokenizerFrom` when given. Written to a temporary folder and
//   renamed into place, so a crash never leaves half a folder under the final name.
//   saveAdapters(model, path): only the trained feature maps / gates, as their own safetensors
//   file with the plan in its metadata ("hedgehog_attention" as JSON).
#pragma once
#include <string>

#include "engine/models/transformer_model.h"

namespace hh::models {

// A model with fresh (initialised) weights, for training from scratch.
ModelPtr createModel(const ModelConfig& config);

struct LoadOptions {
  torch::ScalarType dtype = torch::kFloat;  // weights are converted to this
  torch::Device device = torch::kCPU;
};
ModelPtr loadModel(const std::string& dir, const LoadOptions& options = {});

// `config` switched to a sequence-classification head of `labels` classes (HF architecture name
// <Family>ForSequenceClassification, num_labels written into the JSON it saves to).
ModelConfig withClassificationHead(ModelConfig config, int64_t labels);
// loadModel with a sequence-classification head of `labels` classes: a folder that already has
// one must have `labels` classes (else ConfigError); otherwise the body's weights (and the
// attention plan's adapters) are loaded and the new head (GPT-2/Llama "score", BERT pooler +
// classifier) keeps its fresh initialisation.
ModelPtr loadModelForClassification(const std::string& dir, int64_t labels, const LoadOptions& options = {});

// The tokenizer files a folder may hold (copied on save when present).
const std::vector<std::string>& tokenizerFileNames();

struct SaveOptions {
  torch::ScalarType dtype = torch::kFloat;  // floating weights are stored as this (adapters stay float32)
  std::string tokenizerFrom;                // folder whose tokenizer files are copied ("" = none)
};
// Throws std::invalid_argument naming `dir` unless saveModel may put a model there: absent, or a
// folder holding only a saved model's files (anything else in it would be deleted). saveModel
// checks it; jobs that save at the end check it before they start.
void checkModelFolderReplaceable(const std::string& dir);
void saveModel(const TransformerModel& model, const std::string& dir, const SaveOptions& options);
void saveModel(const TransformerModel& model, const std::string& dir, const std::string& tokenizerFrom = "");
void saveAdapters(const TransformerModel& model, const std::string& path);
// Loads adapters saved by saveAdapters into `model`, after applying the plan stored in the file.
void loadAdaptersFile(TransformerModel& model, const std::string& path);

}  // namespace hh::models
