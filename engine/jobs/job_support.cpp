#include "engine/jobs/job_support.h"

#include <torch/types.h>

#include <chrono>
#include <cstdio>
#include <ctime>

#include "engine/config/compute_dtype.h"
#include "engine/core/device.h"
#include "engine/data/data_paths.h"
#include "engine/tokenizers/tokenizer.h"

namespace hh::jobs {

data::LmDataset loadLmData(const DataConfig& c, const tok::Tokenizer& tokenizer, bool needTraining) {
  const auto documents = c.corpus == "brown" ? data::readBrownCorpus(data::brownCorpusDir()) : data::readTextDocuments(c.corpus);
  data::LmDataOptions options;
  options.sequenceLength = c.sequenceLength;
  options.validationFraction = c.validationFraction;
  options.seed = c.seed;
  options.maxTrainSequences = c.maxTrainSequences;
  options.maxValidationSequences = c.maxValidationSequences;
  auto dataset = data::buildLmDataset(documents, tokenizer, options);
  const bool split = dataset.validation.size(0) > 0 && (!needTraining || dataset.train.size(0) > 0);
  if (!split && documents.size() == 1)  // the split is by document
    throw std::invalid_argument(
        "corpus \"" + c.corpus +
        "\" is a single document (a .txt file is one), which cannot be split "
        "into training and validation text: give a .jsonl file (a document a line) or a folder of .txt files");
  if (needTraining && dataset.train.size(0) == 0)
    throw std::invalid_argument("corpus \"" + c.corpus + "\" gives no training sequence of " + std::to_string(c.sequenceLength) + " tokens");
  if (dataset.validation.size(0) == 0)
    throw std::invalid_argument("corpus \"" + c.corpus + "\" gives no validation sequence; lower sequence_length or raise validation_fraction");
  return dataset;
}

BatchSampler::BatchSampler(int64_t rows, int64_t batchSize, uint64_t seed, c10::Device device)
    : rows_(rows), batch_(std::min(batchSize, rows)), rng_(seed), device_(device) {
  if (rows <= 0 || batchSize <= 0) throw std::invalid_argument("batch sampler needs rows and a positive batch size");
  reshuffle();
}

void BatchSampler::reshuffle() {
  order_.resize(static_cast<size_t>(rows_));
  for (int64_t i = 0; i < rows_; ++i) order_[static_cast<size_t>(i)] = i;
  std::shuffle(order_.begin(), order_.end(), rng_);
  cursor_ = 0;
}

torch::Tensor BatchSampler::next() {
  if (cursor_ + static_cast<size_t>(batch_) > order_.size()) reshuffle();
  std::vector<int64_t> rows(order_.begin() + static_cast<std::ptrdiff_t>(cursor_),
                            order_.begin() + static_cast<std::ptrdiff_t>(cursor_) + batch_);
  cursor_ += static_cast<size_t>(batch_);
  return torch::tensor(rows, torch::kLong).to(device_);
}

void BatchSampler::skip(int64_t batches) {
  for (int64_t i = 0; i < batches; ++i) next();
}

c10::Device jobDevice(const std::string& spec) { return c10::Device(resolveDevice(spec)); }

c10::ScalarType jobDtype(const std::string& name) {
  checkComputeDtype(name, "dtype");
  if (name == "float64") return torch::kDouble;
  return name == "bfloat16" ? torch::kBFloat16 : torch::kFloat;
}

models::LoadOptions loadOptions(const std::string& device, const std::string& dtype) {
  models::LoadOptions load;
  load.device = jobDevice(device.empty() ? "auto" : device);
  load.dtype = jobDtype(dtype.empty() ? "float32" : dtype);
  return load;
}

void checkTokenizerFits(int64_t rows, const tok::Tokenizer& tokenizer, const std::string& dir) {
  if (tokenizer.vocabSize() > rows)
    throw std::invalid_argument(dir + ": the tokenizer has " + std::to_string(tokenizer.vocabSize()) +
                                " tokens but the model's embedding has " + std::to_string(rows) +
                                " rows (vocab_size in config.json): a tokenizer from another model?");
}

std::unique_ptr<tok::Tokenizer> loadTokenizerFor(const models::TransformerModel& model, const std::string& dir) {
  auto tokenizer = tok::loadTokenizer(dir);
  checkTokenizerFits(model.config().vocabSize, *tokenizer, dir);
  return tokenizer;
}

void applyComputeDtype(models::TransformerModel& model, const std::string& dtype) {
  const auto type = jobDtype(dtype);
  if (type == torch::kFloat) return;
  if (type == torch::kDouble) {  // everything in fp64, the parameters' objects kept (optimisers hold them)
    model.to(torch::kDouble);
    return;
  }
  model.keepTrainableInFloat32();
  model.setComputeDtype(type);
}

void moveTo(data::LmDataset& dataset, c10::Device device) {
  dataset.train = dataset.train.to(device);
  dataset.validation = dataset.validation.to(device);
}

void moveTo(data::TaskDataset& dataset, c10::Device device) {
  for (auto* split : {&dataset.train, &dataset.test}) {
    split->ids = split->ids.to(device);
    split->targets = split->targets.to(device);
  }
}

void moveTo(data::ClassificationDataset& dataset, c10::Device device) {
  for (auto* split : {&dataset.train, &dataset.validation}) {
    split->ids = split->ids.to(device);
    split->mask = split->mask.to(device);
    split->labels = split->labels.to(device);
  }
}

std::string deviceLabelOf(const models::TransformerModel& model) {
  const auto params = model.parameters();
  const auto weights = params.empty() ? torch::kFloat : params.front().scalar_type();
  const auto activations = model.computeDtype().value_or(weights);
  return deviceLabel(deviceOf(model)) + (activations == torch::kBFloat16 ? ", bfloat16"
                                                                : activations == torch::kDouble ? ", float64" : "");
}

std::string deviceOf(const models::TransformerModel& model) {
  const auto params = model.parameters();
  return params.empty() ? std::string("cpu") : params.front().device().str();
}

std::map<std::string, std::vector<float>> adapterFloats(const models::TransformerModel& model) {
  std::map<std::string, std::vector<float>> out;
  for (const auto& [name, t] : model.adapterTensors()) out[name] = toFloats(t.detach());
  return out;
}

std::vector<float> toFloats(const at::Tensor& t) {
  const auto c = t.to(torch::kFloat).contiguous().cpu();
  return std::vector<float>(c.data_ptr<float>(), c.data_ptr<float>() + c.numel());
}

}  // namespace hh::jobs
