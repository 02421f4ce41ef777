// The end of a job on stdout, in the format of --progress: the human summary lines, or one "end"
// event in jsonl mode (progress_format.h). Every job command (distill, finetune, train, evaluate,
// convert) ends through reportJobEnd, so the two formats cannot drift apart.
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "engine/jobs/evaluate_job.h"

namespace hh::cli {

struct JobEnd {
  using Outputs = std::vector<std::pair<std::string, std::string>>;
  JobEnd(jobs::JobStatus status, std::string message, double seconds, int64_t steps, std::string runFile,
         Outputs outputs = {}, const jobs::EvaluateResult* evaluation = nullptr)
      : status(status), message(std::move(message)), seconds(seconds), steps(steps), runFile(std::move(runFile)),
        outputs(std::move(outputs)), evaluation(evaluation) {}

  jobs::JobStatus status;
  std::string message;
  double seconds;
  int64_t steps;  // optimizer steps; -1 for a job without (evaluate, convert)
  std::string runFile;
  // What the job wrote, as (key, path): "adapters", "model", "export"; empty paths are left out.
  Outputs outputs;
  const jobs::EvaluateResult* evaluation;  // shown when the job completed
  nlohmann::json extra = nlohmann::json::object();   // more keys of the end event ("stages")
  std::string device;  // where the job computed ("cpu", "cuda:0 (NAME)"); shown when set
  // The human lines; default: "STATUS after N steps (S s): MESSAGE", "run file: P", "KEY: P"...
  std::function<void()> printHuman;
};

void reportJobEnd(const JobEnd& end);

// The evaluation as JSON: task, sequences, predictions, the perplexities or accuracies, and per
// feature map its mean KL, entropy and monotonicity (NaN as null).
nlohmann::json evaluationJson(const jobs::EvaluateResult& result);

}  // namespace hh::cli
