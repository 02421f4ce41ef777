#include "app/cli/job_end.h"

#include <cmath>
#include <cstdio>

#include "app/cli/commands.h"
#include "app/cli/progress_format.h"

namespace hh::cli {
namespace {

nlohmann::json finite(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(); }

void printTrainingEnd(const JobEnd& end) {
  std::printf("%s after %lld steps (%.1f s): %s\nrun file: %s\n", jobs::toString(end.status), (long long)end.steps,
              end.seconds, end.message.c_str(), end.runFile.c_str());
  for (const auto& [key, path] : end.outputs) std::printf("%s: %s\n", key.c_str(), path.c_str());
}

}  // namespace

nlohmann::json evaluationJson(const jobs::EvaluateResult& r) {
  nlohmann::json maps = nlohmann::json::array();
  for (const auto& row : r.featureMaps)
    maps.push_back({{"name", row.name}, {"kl", finite(row.kl)}, {"entropy", finite(row.entropy)},
                    {"monotonicity", finite(row.monotonicity)}});
  nlohmann::json out = {{"task", r.task}, {"sequences", r.sequences}, {"predictions", r.predictions},
                        {"softmax_entropy", finite(r.softmaxEntropy)}, {"feature_maps", maps}};
  if (r.task == "lm") {
    out["perplexity_original"] = finite(r.perplexityOriginal);
    out["perplexity_converted"] = finite(r.perplexityConverted);
  } else {
    out["accuracy_original"] = finite(r.accuracyOriginal);
    out["accuracy_converted"] = finite(r.accuracyConverted);
  }
  return out;
}

void reportJobEnd(const JobEnd& end) {
  const bool completed = end.status == jobs::JobStatus::Completed;
  if (!jsonlProgress()) {
    if (end.printHuman) end.printHuman();
    else printTrainingEnd(end);
    if (!end.device.empty()) std::printf("device: %s\n", end.device.c_str());
    return;
  }
  nlohmann::json event = {{"event", "end"},      {"status", jobs::toString(end.status)},
                          {"message", end.message}, {"seconds", end.seconds}, {"run_file", end.runFile}};
  if (end.steps >= 0) event["steps"] = end.steps;
  if (!end.device.empty()) event["device"] = end.device;
  nlohmann::json outputs = nlohmann::json::object();
  for (const auto& [key, path] : end.outputs)
    if (!path.empty()) outputs[key] = path;
  event["outputs"] = outputs;
  if (completed && end.evaluation) event["evaluation"] = evaluationJson(*end.evaluation);
  event.update(end.extra);
  emitEvent(event);
}

}  // namespace hh::cli
