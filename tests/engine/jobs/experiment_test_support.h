// The tiny experiment the experiment-job and experiment-view suites run: two distillation
// variants (hedgehog, t2r) of 4 steps on the tiny GPT-2 fixture; and an observer that cancels
// once a job has reported a given step.
#pragma once
#include <nlohmann/json.hpp>

#include <algorithm>
#include <stdexcept>
#include <string>

#include "engine/config/experiment_config.h"
#include "engine/jobs/job_observer.h"
#include "tests/engine/jobs/jobs_test_support.h"
#include "tests/support/temp_dir.h"

namespace hh::test {

inline nlohmann::json tinyExperiment(const TempDir& dir) {
  using nlohmann::json;
  return {{"name", "tiny"},
          {"job", "distill"},
          {"run_dir", dir.file("exp")},
          {"base",
           {{"model", std::string(HH_FIXTURES_DIR) + "/tiny-random-gpt2"},
            {"steps", 4},
            {"batch_size", 4},
            {"eval_every", 2},
            {"eval_batches", 1},
            {"snapshot_every", 4},
            {"patience", 0},
            {"data", {{"corpus", writeWordCorpus(dir)}, {"sequence_length", 32}, {"validation_fraction", 0.25}}}}},
          {"variants", json::array({{{"name", "hedgehog"}, {"set", json::object()}},
                                    {{"name", "t2r"}, {"set", {{"feature_map", "t2r"}}}}})}};
}

// "" when experimentConfigFromJson refuses `config` with a message containing `needle`; else what
// happened instead (accepted, or refused with another message).
inline std::string refusalMismatch(const nlohmann::json& config, const std::string& needle) {
  try {
    jobs::experimentConfigFromJson(config);
  } catch (const std::invalid_argument& e) {
    const std::string what = e.what();
    return what.find(needle) != std::string::npos ? "" : "message '" + what + "' lacks '" + needle + "'";
  }
  return "accepted, expected an error with '" + needle + "'";
}

// Cancels once the job has reported step `at` (its progress calls come after each step).
struct CancelAtStep : jobs::JobObserver {
  int64_t at = 0, reached = 0;
  void progress(int64_t step, int64_t, const std::string&) override { reached = std::max(reached, step); }
  bool cancelled() override { return reached >= at; }
};

}  // namespace hh::test
