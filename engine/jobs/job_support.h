// Pieces the jobs that hold a model need: the LM data of a DataConfig, a seeded batch sampler,
// the device of a model, tensors (the adapters among them) as plain floats for the run file (the
// run-file pieces without Torch are in run_support.h).
#pragma once
#include <ATen/core/Tensor.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "engine/data/classification_data.h"
#include "engine/data/synthetic_tasks.h"
#include "engine/data/text_corpus.h"
#include "engine/jobs/distill_job.h"
#include "engine/models/model_io.h"
#include "engine/models/transformer_model.h"
#include "engine/jobs/run_support.h"
#include "engine/runs/run_writer.h"

namespace hh::jobs {

// A value not measured (a result, a table cell): NaN, as the run file stores it.
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// The corpus of `config` as training and validation rows; each split must give at least one row,
// unless `needTraining` is false (evaluation, which reads only the validation split).
data::LmDataset loadLmData(const DataConfig& config, const tok::Tokenizer& tokenizer, bool needTraining = true);

// Rows of [N, T] in a fresh seeded permutation per epoch.
class BatchSampler {
 public:
  // Row indices come out on `device`, the device of the rows they index.
  BatchSampler(int64_t rows, int64_t batchSize, uint64_t seed, c10::Device device = c10::kCPU);
  at::Tensor next();  // [batch] int64 row indices
  void skip(int64_t batches);  // resume: advance as if `batches` had been drawn
 private:
  void reshuffle();
  int64_t rows_, batch_;
  std::mt19937_64 rng_;
  std::vector<int64_t> order_;
  size_t cursor_ = 0;
  c10::Device device_;
};

// The device a job runs on, from its config's "device" (engine/core/device.h: auto, cpu, cuda,
// cuda:N). Throws std::invalid_argument when it cannot be had: a configuration error.
c10::Device jobDevice(const std::string& spec);
// The torch dtype of a config's "dtype" (engine/config/compute_dtype.h): kFloat or kBFloat16.
c10::ScalarType jobDtype(const std::string& name);
// Where and in what a model is loaded: jobDevice(device) and jobDtype(dtype), an empty name
// meaning the default ("auto", "float32"). The CLI verbs' and the workbench's --device/--dtype.
models::LoadOptions loadOptions(const std::string& device, const std::string& dtype = "");
// The tokenizer in `dir` (tok::loadTokenizer) for `model`: refused with an error naming the folder
// when it has ids the model's embedding has no row for (a tokenizer from another model, whose
// text would index past the table and stop the job inside Torch).
std::unique_ptr<tok::Tokenizer> loadTokenizerFor(const models::TransformerModel& model, const std::string& dir);
// The same check for a tokenizer loaded apart from its model, whose embedding has `rows` rows.
void checkTokenizerFits(int64_t rows, const tok::Tokenizer& tokenizer, const std::string& dir);
// Mixed precision for a job's model once what trains requires grad: that converted to fp32
// (master weights), the activations in `dtype` (TransformerModel::setComputeDtype). Nothing
// changes for float32.
void applyComputeDtype(models::TransformerModel& model, const std::string& dtype);
// A job's data, moved where its model computes (token ids are small next to a model).
void moveTo(data::LmDataset& dataset, c10::Device device);
void moveTo(data::TaskDataset& dataset, c10::Device device);
void moveTo(data::ClassificationDataset& dataset, c10::Device device);
// The run file's and the summary's name for the device: "cpu", "cuda:0 (NVIDIA H100 80GB HBM3)",
// with ", bfloat16" when the model computes in bf16.

std::string deviceLabelOf(const models::TransformerModel& model);
// The device a model computes on ("cpu", "cuda:0"): its parameters'.
std::string deviceOf(const models::TransformerModel& model);
std::map<std::string, std::vector<float>> adapterFloats(const models::TransformerModel& model);
// t's values as float32, row-major, copied to the CPU.
std::vector<float> toFloats(const at::Tensor& t);

}  // namespace hh::jobs
