// The rank job (declared in rank_job.h).
#include "engine/jobs/rank_job.h"

#include <torch/types.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <limits>
#include <numeric>

#include "engine/io/durable_file.h"
#include "engine/jobs/attention_probe.h"
#include "engine/jobs/distill_job.h"
#include "engine/jobs/job_support.h"
#include "engine/models/model_io.h"
#include "engine/tokenizers/tokenizer.h"

namespace hh::jobs {

namespace fs = std::filesystem;

namespace {

DistillConfig distillConfigOf(const RankConfig& c, int64_t layers) {
  DistillConfig d;
  d.modelDir = c.modelDir;
  d.runDir = c.runDir + "/distill";
  d.plan.assign(static_cast<size_t>(layers), c.attention);
  d.steps = c.steps;
  d.batchSize = c.batchSize;
  d.lr = c.lr;
  d.evalEvery = c.steps;  // one evaluation, at the end
  d.patience = 0;
  d.snapshotEvery = c.steps;
  d.curveBins = 0;
  d.seed = c.seed;
  d.device = c.device;
  d.data = c.data;
  return d;
}

// The distilled model measured on the first probe_rows held-out rows.
void measure(const RankConfig& c, const std::string& adapters, RankResult& result) {
  const auto load = loadOptions(c.device);
  auto model = models::loadModel(c.modelDir, load);
  models::loadAdaptersFile(*model, adapters);
  const auto tokenizer = loadTokenizerFor(*model, c.modelDir);
  const auto data = loadLmData(c.data, *tokenizer, /*needTraining=*/false);
  const auto rows =
      data.validation.narrow(0, 0, std::min<int64_t>(c.probeRows, data.validation.size(0))).to(load.device);
  ProbeRequest request;
  request.outputs = true;
  const auto probe = probeAttention(*model, rows, {}, request);
  result.measuredRows = rows.size(0);
  result.kl = probe.heads.kl;
  result.outputError = probe.outputError;
  result.layerScore = layerMeans(result.outputError);
  result.layerKl = layerMeans(result.kl);
}

nlohmann::json tableJson(const HeadTable& t) {
  return {{"name", t.name}, {"layers", t.layers}, {"heads", t.heads}, {"values", t.values}};
}

// Numbers as written by nlohmann, which stores NaN as null: null reads back as NaN.
std::vector<double> numbersFromJson(const nlohmann::json& j) {
  if (!j.is_array()) throw std::invalid_argument("expected a list of numbers, got " + std::string(j.type_name()));
  std::vector<double> out;
  out.reserve(j.size());
  for (const auto& v : j) out.push_back(v.is_null() ? std::numeric_limits<double>::quiet_NaN() : v.get<double>());
  return out;
}

HeadTable tableFromJson(const nlohmann::json& j) {
  HeadTable t{j.at("name").get<std::string>(), j.at("layers").get<int>(), j.at("heads").get<int>(),
              numbersFromJson(j.at("values"))};
  if (t.layers < 0 || t.heads < 0 || t.values.size() != static_cast<size_t>(t.layers) * static_cast<size_t>(t.heads))
    throw std::invalid_argument("table \"" + t.name + "\" has " + std::to_string(t.values.size()) + " values for " +
                                std::to_string(t.layers) + " x " + std::to_string(t.heads));
  return t;
}

// hardest_first as rank.json holds it: every layer 0..L-1 once. A damaged order indexed the plan
// out of bounds (the workbench crashed on [0, 900000, 1, 3, 4]).
std::vector<int64_t> orderFromJson(const nlohmann::json& j, int64_t layers) {
  const auto refuse = [&](const std::string& why) {
    return std::invalid_argument("hardest_first is not the layers 0.." + std::to_string(layers - 1) +
                                 " each once: " + why);
  };
  if (!j.is_array()) throw refuse("not a list");
  if (static_cast<int64_t>(j.size()) != layers) throw refuse(std::to_string(j.size()) + " entries");
  std::vector<int64_t> order;
  std::vector<bool> seen(static_cast<size_t>(layers), false);
  for (const auto& v : j) {
    if (!v.is_number_integer()) throw refuse(v.dump() + " is not a layer index");
    const auto l = v.get<int64_t>();
    if (v.is_number_unsigned() ? v.get<uint64_t>() >= uint64_t(layers) : l < 0 || l >= layers)
      throw refuse(v.dump() + " is out of range");
    if (seen[static_cast<size_t>(l)]) throw refuse(std::to_string(l) + " comes twice");
    seen[static_cast<size_t>(l)] = true;
    order.push_back(l);
  }
  return order;
}

}  // namespace

std::vector<double> layerMeans(const HeadTable& table) {
  std::vector<double> out;
  for (int l = 0; l < table.layers; ++l) {
    double sum = 0;  // a head that is not finite makes the sum so (+Inf stays +Inf, NaN NaN)
    for (int h = 0; h < table.heads; ++h) sum += table.values[static_cast<size_t>(l * table.heads + h)];
    out.push_back(table.heads > 0 ? sum / table.heads : std::nan(""));
  }
  return out;
}

std::vector<int64_t> hardestFirst(const std::vector<double>& scores) {
  std::vector<int64_t> order(scores.size());
  std::iota(order.begin(), order.end(), 0);
  // Not finite: a layer whose linear attention overflowed (+Inf) or diverged (NaN), the hardest.
  const auto key = [&](int64_t l) { return std::isfinite(scores[l]) ? scores[l] : INFINITY; };
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return key(a) > key(b); });
  return order;
}

std::vector<std::string> proposePlan(const std::vector<int64_t>& order, int64_t keep, const std::string& keepAs,
                                     const std::string& attention) {
  std::vector<std::string> plan(order.size(), attention);
  for (size_t i = 0; i < order.size() && static_cast<int64_t>(i) < keep; ++i) {
    if (order[i] < 0 || order[i] >= static_cast<int64_t>(order.size()))
      throw std::invalid_argument("proposePlan: layer " + std::to_string(order[i]) + " of an order of " +
                                  std::to_string(order.size()) + " layers");
    plan[static_cast<size_t>(order[i])] = keepAs;
  }
  return plan;
}

RankResult runRank(const RankConfig& config, JobObserver& observer) {
  const auto start = std::chrono::steady_clock::now();
  if (config.modelDir.empty() || config.runDir.empty())
    throw std::invalid_argument("rank: model and run_dir are required");
  const int64_t layers = models::loadModelConfig(config.modelDir).layers;
  if (config.keep >= layers)  // the plan would convert no layer: nothing to rank for
    throw std::invalid_argument("rank: keep " + std::to_string(config.keep) + " of " + std::to_string(layers) +
                                " layers leaves none to convert (keep at most " + std::to_string(layers - 1) + ")");
  const auto distillConfig = distillConfigOf(config, layers);
  observer.log("rank " + config.modelDir + ": every layer " + config.attention + ", " + std::to_string(config.steps) +
               " distillation steps, then up to " + std::to_string(config.probeRows) + " held-out rows measured");
  const auto distilled = runDistill(distillConfig, observer);
  RankResult result;
  result.distillRunFile = distilled.runFile;
  result.device = distilled.device;
  if (distilled.status != JobStatus::Completed) {
    result.status = distilled.status;
    result.message = "the distillation " + std::string(toString(distilled.status)) + ": " + distilled.message;
    return result;
  }
  observer.progress(config.steps, config.steps, "measuring");
  measure(config, distilled.adaptersFile, result);
  if (result.measuredRows < config.probeRows)
    observer.log("measured on " + std::to_string(result.measuredRows) +
                 " held-out rows: the data holds no more (probe_rows " + std::to_string(config.probeRows) + ")");
  result.hardestFirst = hardestFirst(result.layerScore);
  result.plan = proposePlan(result.hardestFirst, config.keep, config.keepAs, config.attention);
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  result.rankFile = (fs::path(config.runDir) / "rank.json").string();
  io::writeFileAtomically(result.rankFile, toJson(result, config).dump(2) + "\n");
  result.message = "ranked " + std::to_string(layers) + " layers in " + std::to_string(int(result.seconds)) + " s";
  return result;
}

nlohmann::json toJson(const RankResult& r, const RankConfig& config) {
  return {{"config", toJson(config)},
          {"kl", tableJson(r.kl)},
          {"output_error", tableJson(r.outputError)},
          {"layer_score", r.layerScore},
          {"layer_kl", r.layerKl},
          {"hardest_first", r.hardestFirst},
          {"plan", r.plan},
          {"distill_run", r.distillRunFile},
          {"seconds", r.seconds},
          {"measured_rows", r.measuredRows}};
}

RankResult rankResultFromJson(const nlohmann::json& j) {
  try {
    RankResult r;
    r.kl = tableFromJson(j.at("kl"));
    r.outputError = tableFromJson(j.at("output_error"));
    r.layerScore = numbersFromJson(j.at("layer_score"));
    r.layerKl = numbersFromJson(j.at("layer_kl"));
    r.plan = j.at("plan").get<std::vector<std::string>>();
    r.distillRunFile = j.value("distill_run", std::string());
    r.seconds = j.value("seconds", 0.0);
    r.measuredRows = j.value("measured_rows", int64_t(0));  // 0: a ranking from before it was recorded
    const int64_t layers = r.outputError.layers;
    if (static_cast<int64_t>(r.layerScore.size()) != layers || static_cast<int64_t>(r.layerKl.size()) != layers ||
        static_cast<int64_t>(r.plan.size()) != layers)
      throw std::invalid_argument("layer_score, layer_kl, plan and the output_error table disagree on the layer count");
    if (r.kl.layers != r.outputError.layers || r.kl.heads != r.outputError.heads)
      throw std::invalid_argument("table \"kl\" is " + std::to_string(r.kl.layers) + " x " +
                                  std::to_string(r.kl.heads) + ", \"output_error\" " + std::to_string(layers) + " x " +
                                  std::to_string(r.outputError.heads));
    r.hardestFirst = orderFromJson(j.at("hardest_first"), layers);
    return r;
  } catch (const nlohmann::json::exception& e) {
    throw std::invalid_argument(std::string("not a ranking written by hedgehog rank: ") + e.what());
  }
}

}  // namespace hh::jobs
