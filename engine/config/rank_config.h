// The rank job's configuration (engine/jobs/rank_job.h): which attention every layer is tried
// with, the short distillation that fits it, the held-out rows it is measured on, and the budget
// of the plan it proposes; no Torch.
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>

#include "engine/config/distill_config.h"

namespace hh::jobs {

struct RankConfig {
  std::string modelDir;                // the teacher
  std::string runDir;                  // <run_dir>/distill (the short distillation) and rank.json
  std::string attention = "hedgehog";  // what every layer is tried with (a layer spec: "hedgehog_window(64)", ...)
  int64_t steps = 100;                 // the short distillation's optimizer steps
  int64_t batchSize = 8;
  double lr = 1e-2;
  int64_t probeRows = 8;               // held-out rows the tables are measured on
  int64_t keep = 1;                    // the budget: layers the proposed plan does not convert to `attention`
  std::string keepAs = "softmax";      // what those layers run ("softmax", or "hedgehog_window(64)", ...)
  uint64_t seed = 0;
  std::string device = "auto";  // auto | cpu | cuda | cuda:N (engine/core/device.h)
  DataConfig data;
};

nlohmann::json toJson(const RankConfig& config);
// Every key optional; unknown keys, wrong types and bad values throw std::invalid_argument.
RankConfig rankConfigFromJson(const nlohmann::json& json);

}  // namespace hh::jobs
