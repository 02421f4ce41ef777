// `hedgehog rank MODEL`: how hard each layer and head is to convert (engine/jobs/rank_job.h), the
// layer x head table of output errors on stdout, and the proposed plan, ready for --plan.
#include <cmath>
#include <cstdio>

#include <optional>
#include "app/cli/cli_observer.h"

#include "app/cli/commands.h"
#include "app/cli/job_end.h"
#include "engine/jobs/rank_job.h"

namespace hh::cli {

namespace {

void printTable(const jobs::HeadTable& table, const char* title) {
  std::printf("%s (layer x head)\n      ", title);
  for (int h = 0; h < table.heads; ++h) std::printf("  head %-3d", h);
  std::printf("\n");
  for (int l = 0; l < table.layers; ++l) {
    std::printf("  L%-3d", l);
    for (int h = 0; h < table.heads; ++h) std::printf("  %8.4f", table.values[static_cast<size_t>(l * table.heads + h)]);
    std::printf("\n");
  }
}

void printRanking(const jobs::RankResult& r) {
  printTable(r.outputError, "relative output error");
  printTable(r.kl, "KL(softmax || linear), nats");
  std::printf("layers, hardest first:\n");
  for (int64_t l : r.hardestFirst)
    std::printf("  layer %-3lld output error %.4f  KL %.4f\n", static_cast<long long>(l), r.layerScore[l], r.layerKl[l]);
  std::string plan;
  for (const auto& spec : r.plan) plan += (plan.empty() ? "" : ",") + spec;
  std::printf("proposed plan: --plan %s\n", plan.c_str());
}

}  // namespace

void addRankCommand(CLI::App& app) {
  struct Args {
    std::string model, configFile, runDir, attention, keepAs, corpus, device;
    std::optional<int64_t> steps, keep, probeRows, seqLen, maxTrain;
    bool printConfig = false;
  };
  auto a = std::make_shared<Args>();
  auto* cmd = app.add_subcommand("rank", "Rank layers and heads by how hard they are to convert; propose a plan");
  cmd->add_option("model", a->model, "Teacher model folder");
  cmd->add_option("--config", a->configFile, "JSON config (see --print-config); flags override it")->check(CLI::ExistingFile);
  cmd->add_option("--run-dir", a->runDir, "Folder for the short distillation and rank.json (default runs/rank)");
  cmd->add_option("--attention", a->attention, "What every layer is tried with (default hedgehog; e.g. hedgehog_window(16))");
  cmd->add_option("--steps", a->steps, "Distillation steps before measuring (default 100)");
  cmd->add_option("--keep", a->keep, "Budget: layers the plan keeps as --keep-as (default 1)");
  cmd->add_option("--keep-as", a->keepAs, "softmax (default) or a window hybrid such as hedgehog_window(64)");
  cmd->add_option("--probe-rows", a->probeRows, "Held-out rows measured (default 8)");
  cmd->add_option("--seq-len", a->seqLen, "Tokens per sequence");
  cmd->add_option("--max-train", a->maxTrain, "Use at most this many training sequences");
  cmd->add_option("--corpus", a->corpus, "brown, or a .txt/.jsonl file or folder of .txt");
  cmd->add_flag("--print-config", a->printConfig, "Print the full config as JSON and exit");
  addDeviceOption(cmd, a->device);
  cmd->callback([a] {
    jobs::RankConfig c;
    if (!a->configFile.empty()) c = jobs::parseConfigFile(a->configFile, "rank", jobs::rankConfigFromJson);
    if (!a->model.empty()) c.modelDir = a->model;
    if (!a->device.empty()) c.device = a->device;
    if (!a->runDir.empty()) c.runDir = a->runDir;
    if (!a->attention.empty()) c.attention = a->attention;
    if (!a->keepAs.empty()) c.keepAs = a->keepAs;
    if (!a->corpus.empty()) c.data.corpus = a->corpus;
    if (a->steps) c.steps = *a->steps;
    if (a->keep) c.keep = *a->keep;
    if (a->probeRows) c.probeRows = *a->probeRows;
    if (a->seqLen) c.data.sequenceLength = *a->seqLen;
    if (a->maxTrain) c.data.maxTrainSequences = *a->maxTrain;
    if (c.runDir.empty()) c.runDir = "runs/rank";
    c = jobs::rankConfigFromJson(jobs::toJson(c));  // the same checks as a config file
    if (a->printConfig) {
      std::printf("%s\n", jobs::toJson(c).dump(2).c_str());
      return;
    }
    if (c.modelDir.empty()) throw std::runtime_error("rank: no model folder (give MODEL_DIR or \"model\" in --config)");
    CliObserver observer;
    const auto r = jobs::runRank(c, observer);
    const bool completed = r.status == jobs::JobStatus::Completed;
    JobEnd end{r.status, r.message, r.seconds, -1, r.distillRunFile, {{"rank", completed ? r.rankFile : ""}}};
    end.device = r.device;
    if (completed) end.extra = {{"measured_rows", r.measuredRows}, {"hardest_first", r.hardestFirst}, {"plan", r.plan}};
    end.printHuman = [&r, completed] {
      if (!completed) return;  // the error line says why
      printRanking(r);
      std::printf("%s; written to %s\n", r.message.c_str(), r.rankFile.c_str());
    };
    reportJobEnd(end);
    if (!completed) throw JobFailed(r.status, r.message);
  });
}

}  // namespace hh::cli
