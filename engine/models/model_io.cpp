#include "engine/models/model_io.h"

#include <torch/types.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>

#include "engine/core/runtime.h"
#include "engine/io/durable_file.h"
#include "engine/io/safetensors.h"
#include "engine/models/bert.h"
#include "engine/models/gpt2.h"
#include "engine/models/llama.h"
#include "engine/models/tensor_file.h"

namespace hh::models {
namespace fs = std::filesystem;

ModelPtr createModel(const ModelConfig& config) {
  switch (config.architecture) {
    case Architecture::Gpt2: return std::make_shared<Gpt2Model>(config);
    case Architecture::Bert: return std::make_shared<BertModel>(config);
    case Architecture::Llama: return std::make_shared<LlamaModel>(config);
  }
  throw std::logic_error("unknown architecture");
}

namespace {

// When `dir` is missing but `dir.old` is there (a saveModel killed between moving the previous
// folder aside and moving the new one in), renames `dir.old` back to `dir` and returns true.
bool recoverInterruptedSave(const std::string& dir) {
  std::error_code ec;
  const fs::path target(dir), old = target.string() + ".old";
  if (target.empty() || fs::exists(target, ec) || !fs::is_directory(old, ec)) return false;
  // saveModel renames the previous folder to `.old` only once the new one is complete in
  // `.partial`, and removes `.old` only after the new one is in place: with the target missing,
  // `.old` is the last complete model. Put it back under its name.
  fs::rename(old, target, ec);
  if (ec) throw std::runtime_error(dir + ": missing, and its previous version " + old.string() + " cannot be restored: " + ec.message());
  io::syncDirectory(target.parent_path().string());
  return true;
}

}  // namespace

ModelPtr loadModel(const std::string& dir, const LoadOptions& options) {
  recoverInterruptedSave(dir);
  // Weights first: a folder that holds only a pickle is refused as such (with the command that
  // converts it), not sent looking for a config.json that would not help.
  auto source = WeightSource::open(dir);
  const auto config = loadModelConfig(dir);
  auto model = createModel(config);
  model->loadWeights(source);
  model->to(options.device, options.dtype);
  model->eval();
  return model;
}

ModelConfig withClassificationHead(ModelConfig config, int64_t labels) {
  if (labels < 2) throw std::invalid_argument("a classification head needs at least 2 labels, got " + std::to_string(labels));
  static const char* family[] = {"GPT2", "Bert", "Llama"};
  config.head = HeadKind::SequenceClassification;
  config.numLabels = labels;
  config.architectures = {std::string(family[static_cast<int>(config.architecture)]) + "ForSequenceClassification"};
  if (!config.raw.is_object()) config.raw = nlohmann::json::object();
  config.raw["num_labels"] = labels;
  config.raw.erase("id2label");
  config.raw.erase("label2id");
  return config;
}

ModelPtr loadModelForClassification(const std::string& dir, int64_t labels, const LoadOptions& options) {
  const auto config = loadModelConfig(dir);
  if (config.head == HeadKind::SequenceClassification) {
    if (config.numLabels != labels)
      throw ConfigError(dir + "/config.json: the classification head has " + std::to_string(config.numLabels) +
                        " labels, the data " + std::to_string(labels));
    return loadModel(dir, options);
  }
  const auto body = loadModel(dir);
  auto model = createModel(withClassificationHead(body->config(), labels));
  at::NoGradGuard noGrad;
  const auto from = body->named_parameters(true);
  for (auto& item : model->named_parameters(true))
    if (const auto* t = from.find(item.key()); t && t->sizes() == item.value().sizes()) item.value().copy_(*t);
  const auto fromBuffers = body->named_buffers(true);
  for (auto& item : model->named_buffers(true))
    if (const auto* t = fromBuffers.find(item.key()); t && t->sizes() == item.value().sizes()) item.value().copy_(*t);
  model->to(options.device, options.dtype);
  model->eval();
  return model;
}

const std::vector<std::string>& tokenizerFileNames() {
  static const std::vector<std::string> names{"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
                                              "vocab.json", "merges.txt", "vocab.txt", "tokenizer.model",
                                              "added_tokens.json", "generation_config.json"};
  return names;
}

namespace {

std::vector<std::pair<std::string, torch::Tensor>> toCpu(std::vector<std::pair<std::string, torch::Tensor>> w) {
  for (auto& [name, t] : w) t = t.to(torch::kCPU);
  return w;
}

// The weights to store: on the CPU, every floating weight but the adapters in `dtype` (what
// config.json's torch_dtype says), whatever dtype the model holds them in.
std::vector<std::pair<std::string, torch::Tensor>> weightsToStore(const TransformerModel& model,
                                                                  torch::ScalarType dtype) {
  auto weights = toCpu(model.exportWeights());
  for (auto& [name, t] : weights)
    if (t.is_floating_point() && name.rfind("hedgehog.", 0) != 0) t = t.to(dtype);
  return weights;
}

const char* dtypeName(torch::ScalarType dtype) {
  return dtype == torch::kHalf ? "float16" : dtype == torch::kBFloat16 ? "bfloat16" : "float32";
}

void writeText(const fs::path& path, const std::string& text) {
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << text;
    out.close();
    if (!out) throw std::runtime_error(path.string() + ": cannot write");
  }
  io::syncFile(path.string());
}

}  // namespace

void saveModel(const TransformerModel& model, const std::string& dir, const std::string& tokenizerFrom) {
  SaveOptions options;
  options.tokenizerFrom = tokenizerFrom;
  saveModel(model, dir, options);
}

namespace {

// Writes config.json, model.safetensors and the tokenizer files into `staging`, each synced.
void writeModelFiles(const TransformerModel& model, const fs::path& staging, const SaveOptions& options) {
  std::error_code ec;
  if (options.dtype != torch::kFloat && options.dtype != torch::kHalf && options.dtype != torch::kBFloat16)
    throw std::invalid_argument(std::string("a model is saved as float32, float16 or bfloat16, not ") +
                                c10::toString(options.dtype));
  auto config = modelConfigToJson(model.config());
  config["torch_dtype"] = dtypeName(options.dtype);
  if (config.contains("dtype")) config["dtype"] = dtypeName(options.dtype);  // the newer spelling, kept in step
  config["hedgehog_version"] = engineVersion();
  writeText(staging / "config.json", config.dump(2) + "\n");
  std::map<std::string, std::string> metadata{{"format", "pt"}, {"producer", std::string("hedgehog ") + engineVersion()}};
  writeTensorFile((staging / "model.safetensors").string(), weightsToStore(model, options.dtype), metadata);
  if (!options.tokenizerFrom.empty()) {
    for (const auto& name : tokenizerFileNames()) {
      const auto from = fs::path(options.tokenizerFrom) / name;
      if (fs::is_regular_file(from, ec)) {
        fs::copy_file(from, staging / name, fs::copy_options::overwrite_existing);
        io::syncFile((staging / name).string());
      }
    }
  }
  io::syncDirectory(staging.string());
}

}  // namespace

// A folder saveModel may replace: absent, or holding only files a saved model holds. Anything
// else there is the user's (a folder of notes, the home folder given by mistake): replacing it
// would delete it.
void checkModelFolderReplaceable(const std::string& dir) {
  const fs::path target(dir);
  std::error_code ec;
  // A model is a folder: a file under that name is the user's, not an earlier model (the CLI's
  // export and the workbench's both get this refusal).
  if (fs::exists(target, ec) && !fs::is_directory(target, ec))
    throw std::invalid_argument(dir + ": exists and is not a folder (a model is saved as a folder there; "
                                "choose another output path)");
  if (!fs::is_directory(target, ec)) return;
  std::set<std::string> modelFiles(tokenizerFileNames().begin(), tokenizerFileNames().end());
  modelFiles.insert(
      {"config.json", "model.safetensors", "adapters.safetensors", "task.json"});  // task.json: train's recall tasks
  std::vector<std::string> others;
  for (const auto& entry : fs::directory_iterator(target, ec)) {
    const auto name = entry.path().filename().string();
    if (!entry.is_regular_file(ec) || !modelFiles.count(name)) others.push_back(name);
  }
  if (ec) throw std::runtime_error(dir + ": cannot list the folder to replace: " + ec.message());
  if (others.empty()) return;
  std::sort(others.begin(), others.end());
  std::string listed;
  for (size_t i = 0; i < others.size() && i < 3; ++i) listed += (i ? ", " : "") + others[i];
  if (others.size() > 3) listed += " and " + std::to_string(others.size() - 3) + " more";
  throw std::invalid_argument(dir + ": exists and holds what a saved model does not (" + listed +
                              "); saving there would delete it: choose another output path");
}

void saveModel(const TransformerModel& model, const std::string& dir, const SaveOptions& options) {
  const fs::path target(dir);
  if (dir.empty()) throw std::invalid_argument("no output folder given for the model");
  const fs::path staging = target.string() + ".partial";
  std::error_code ec;
  checkModelFolderReplaceable(dir);
  recoverInterruptedSave(dir);  // a save killed between its two renames: the previous model first
  fs::remove_all(staging, ec);
  fs::create_directories(staging);
  try {
    writeModelFiles(model, staging, options);
  } catch (...) {
    fs::remove_all(staging, ec);  // a failed write (disk full, no permission) leaves no half folder
    throw;
  }
  // Every file of the new folder is on disk before any rename. Then replace the target folder,
  // keeping the previous one as `.old` until the new one is in place: a kill at any instant
  // leaves a complete model under the name, or none there and a complete `.old`, which
  // recoverInterruptedSave (called by loadModel and saveModel) puts back.
  const auto parent = target.has_parent_path() ? target.parent_path().string() : std::string(".");
  const fs::path old = target.string() + ".old";
  fs::remove_all(old, ec);
  if (fs::exists(target, ec)) fs::rename(target, old);
  fs::rename(staging, target);
  io::syncDirectory(parent);
  fs::remove_all(old, ec);
}

void saveAdapters(const TransformerModel& model, const std::string& path) {
  auto tensors = toCpu(model.adapterTensors());
  if (tensors.empty()) throw std::invalid_argument("the model has no linear-attention layers: no adapters to save");
  std::map<std::string, std::string> metadata{
      {"format", "pt"},
      {"producer", std::string("hedgehog ") + engineVersion()},
      {"model_type", model.config().modelType},
      {"hedgehog_attention", attentionPlanToJson(model.config().plan).dump()}};
  writeTensorFile(path, tensors, metadata);
}

void loadAdaptersFile(TransformerModel& model, const std::string& path) {
  auto source = WeightSource::open(path);
  const auto file = io::ShardedSafetensors::open(path);
  const auto& metadata = file.metadata();
  const auto it = metadata.find("hedgehog_attention");
  if (it == metadata.end())
    throw io::FormatError(path + ": no \"hedgehog_attention\" metadata: not an adapter file written by hedgehog");
  nlohmann::json plan;
  try {
    plan = nlohmann::json::parse(it->second);
  } catch (const nlohmann::json::exception& e) {
    throw io::FormatError(path + ": \"hedgehog_attention\" metadata is not JSON (" + e.what() + ")");
  }
  model.setAttentionPlan(parseAttentionPlan(plan, model.layerCount(), path));
  model.loadAdapters(source);
}

}  // namespace hh::models
