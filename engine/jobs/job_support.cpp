#include "engine/jobs/job_support.h"

#include <chrono>
#include <cstdio>
#include <ctime>

#include "engine/data/data_paths.h"

namespace hh::jobs {

const char* toString(JobStatus status) {
  switch (status) {
    case JobStatus::Completed: return "completed";
    case JobStatus::Failed: return "failed";
    case JobStatus::Cancelled: return "cancelled";
  }
  return "?";
}

data::LmDataset loadLmData(const DataConfig& c, const tok::Tokenizer& tokenizer) {
  const auto documents = c.corpus == "brown" ? data::readBrownCorpus(data::brownCorpusDir()) : data::readTextDocuments(c.corpus);
  data::LmDataOptions options;
  options.sequenceLength = c.sequenceLength;
  options.validationFraction = c.validationFraction;
  options.seed = c.seed;
  options.maxTrainSequences = c.maxTrainSequences;
  options.maxValidationSequences = c.maxValidationSequences;
  auto dataset = data::buildLmDataset(documents, tokenizer, options);
  if (dataset.train.size(0) == 0)
    throw std::invalid_argument("corpus \"" + c.corpus + "\" gives no training sequence of " + std::to_string(c.sequenceLength) + " tokens");
  if (dataset.validation.size(0) == 0)
    throw std::invalid_argument("corpus \"" + c.corpus + "\" gives no validation sequence; lower sequence_length or raise validation_fraction");
  return dataset;
}

BatchSampler::BatchSampler(int64_t rows, int64_t batchSize, uint64_t seed)
    : rows_(rows), batch_(std::min(batchSize, rows)), rng_(seed) {
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
  return torch::tensor(rows, torch::kLong);
}

void BatchSampler::skip(int64_t batches) {
  for (int64_t i = 0; i < batches; ++i) next();
}

std::string makeRunId(const std::string& kind) {
  const auto now = std::chrono::system_clock::now();
  const std::time_t t = std::chrono::system_clock::to_time_t(now);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buffer[64];
  std::strftime(buffer, sizeof buffer, "%Y%m%d-%H%M%S", &tm);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  char id[96];
  std::snprintf(id, sizeof id, "%s-%s-%03lld", kind.c_str(), buffer, static_cast<long long>(ms));
  return id;
}

std::string deviceName() { return "cpu"; }

std::map<std::string, std::vector<float>> adapterFloats(const models::TransformerModel& model) {
  std::map<std::string, std::vector<float>> out;
  for (const auto& [name, t] : model.adapterTensors()) {
    const auto c = t.detach().to(torch::kFloat).contiguous().cpu();
    out[name] = std::vector<float>(c.data_ptr<float>(), c.data_ptr<float>() + c.numel());
  }
  return out;
}

runs::RunStatus runStatusOf(JobStatus s) {
  switch (s) {
    case JobStatus::Completed: return runs::RunStatus::Completed;
    case JobStatus::Cancelled: return runs::RunStatus::Cancelled;
    default: return runs::RunStatus::Failed;
  }
}

double secondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

void finishRun(runs::RunWriter& writer, JobObserver& observer, JobStatus status, const std::string& message, int64_t step) {
  const std::string line = std::string(toString(status)) + ": " + message;
  writer.log(line, step);
  observer.log(line);
  writer.setStatus(runStatusOf(status), message);
  writer.close();
}

}  // namespace hh::jobs
