// The rank job (`hedgehog rank`, the workbench's Rank view): how hard each layer and head is to
// convert. Every layer is given the same linear attention (RankConfig::attention), distilled for a
// few steps (stage 1, the distill job), and measured on held-out rows: per layer x head the
// KL(softmax || linear) of the attention weights and the relative error of the attention output,
// sum ||y_linear - y_softmax||^2 / sum ||y_softmax||^2. Layers are ranked by their heads' mean
// output error (what the next layer sees), and the job proposes a plan for a budget of k layers:
// the k hardest keep `keep_as` (softmax, or a window hybrid), the others get `attention`.
// Writes <run_dir>/distill/ (the distillation's run file and adapters) and <run_dir>/rank.json.
#pragma once
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "engine/config/rank_config.h"
#include "engine/jobs/head_tables.h"
#include "engine/jobs/job_observer.h"

namespace hh::jobs {

struct RankResult {
  JobStatus status = JobStatus::Completed;
  std::string message;
  HeadTable kl, outputError;          // [L, H]
  std::vector<double> layerScore;     // [L]: mean output error over the layer's heads (layerMeans)
  std::vector<double> layerKl;        // [L]: mean KL over the layer's heads
  std::vector<int64_t> hardestFirst;  // the layers by score, hardest first
  std::vector<std::string> plan;      // the proposed plan, one spec per layer
  std::string distillRunFile, rankFile;
  std::string device;        // where it computed (engine/core/device.h)
  int64_t measuredRows = 0;  // held-out rows measured: probe_rows, or fewer when the data has fewer
  double seconds = 0;
};

// Runs on the calling thread. Throws for bad configuration before anything starts; a cancelled
// or failed distillation is reported in the result.
RankResult runRank(const RankConfig& config, JobObserver& observer);

// The mean of each layer's row of `table`; a head that is not finite makes the mean so.
std::vector<double> layerMeans(const HeadTable& table);
// Layer indices by score, largest first (ties: the lower layer first). A score that is not finite
// (a layer whose attention overflowed or diverged) ranks first: the hardest, kept by the plan.
std::vector<int64_t> hardestFirst(const std::vector<double>& scores);
// The first `keep` layers of `order` run `keepAs`, the others `attention`: one spec per layer.
// Throws std::invalid_argument for an entry of `order` outside 0..order.size()-1.
std::vector<std::string> proposePlan(const std::vector<int64_t>& order, int64_t keep, const std::string& keepAs,
                                     const std::string& attention);

// rank.json: the config, both tables, the layer scores, the order and the plan; and back (the
// workbench opens a saved ranking). Parse errors throw std::invalid_argument, and so does a
// damaged file: hardest_first not every layer once, tables or lists of other shapes.
nlohmann::json toJson(const RankResult& result, const RankConfig& config);
RankResult rankResultFromJson(const nlohmann::json& json);

}  // namespace hh::jobs
