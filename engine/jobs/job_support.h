// Pieces every job needs: the LM data of a DataConfig, a seeded batch sampler, the run folder,
// the adapter tensors as plain floats for the run file, and JSON field readers that reject
// unknown keys and wrong types with the key's name.
#pragma once
#include <torch/torch.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdint>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "engine/data/text_corpus.h"
#include "engine/jobs/distill_job.h"
#include "engine/models/transformer_model.h"
#include "engine/runs/run_writer.h"

namespace hh::jobs {

data::LmDataset loadLmData(const DataConfig& config, const tok::Tokenizer& tokenizer);

// Rows of [N, T] in a fresh seeded permutation per epoch.
class BatchSampler {
 public:
  BatchSampler(int64_t rows, int64_t batchSize, uint64_t seed);
  torch::Tensor next();  // [batch] int64 row indices
  void skip(int64_t batches);  // resume: advance as if `batches` had been drawn
 private:
  void reshuffle();
  int64_t rows_, batch_;
  std::mt19937_64 rng_;
  std::vector<int64_t> order_;
  size_t cursor_ = 0;
};

std::string makeRunId(const std::string& kind);
runs::RunStatus runStatusOf(JobStatus status);
double secondsSince(std::chrono::steady_clock::time_point start);
// The end of every job: logs "<status>: <message>" (run file at `step`, and observer), writes the
// terminal status row and closes the file.
void finishRun(runs::RunWriter& writer, JobObserver& observer, JobStatus status, const std::string& message, int64_t step);
std::string deviceName();
std::map<std::string, std::vector<float>> adapterFloats(const models::TransformerModel& model);

// JSON readers: `seen` collects the keys read so that checkUnknownKeys can name the others.
struct JsonReader {
  const nlohmann::json& json;
  std::string where;
  std::set<std::string> seen;
  template <typename T>
  void read(const char* key, T& out);
  void checkUnknownKeys() const;
};

}  // namespace hh::jobs
