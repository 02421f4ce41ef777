// `hedgehog evaluate MODEL_DIR [--converted DIR|ADAPTERS] [--config FILE] [options]`: perplexity
// (or accuracy) of the original against the converted model on held-out data, and the table of
// each feature map's attention against softmax (mean KL, entropy, monotonicity per map: the
// Hedgehog paper's Table 4 for this model), all kept in --run-dir/run.h5.
// `--print-config` writes the full config (every default) as JSON, to start a project file.
#include <cmath>
#include <cstdio>

#include <optional>
#include "app/cli/cli_observer.h"

#include "app/cli/commands.h"
#include "app/cli/job_end.h"
#include "engine/jobs/evaluate_job.h"

namespace hh::cli {

namespace {

std::string number(double v, const char* format = "%.4f") {
  if (std::isnan(v)) return "n/a";
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, format, v);
  return buffer;
}

}  // namespace

void printEvaluation(const jobs::EvaluateResult& r) {
  std::printf("\n");
  if (r.task == "lm") {
    std::printf("perplexity on %lld held-out sequences (%lld predictions)\n", (long long)r.sequences, (long long)r.predictions);
    std::printf("  original   %12s\n  converted  %12s\n  ratio      %12s  (converted / original)\n",
                number(r.perplexityOriginal, "%.3f").c_str(), number(r.perplexityConverted, "%.3f").c_str(),
                number(r.perplexityConverted / r.perplexityOriginal, "%.3f").c_str());
  } else {
    std::printf("accuracy on %lld held-out examples\n  original   %8s\n  converted  %8s\n", (long long)r.sequences,
                number(r.accuracyOriginal).c_str(), number(r.accuracyConverted).c_str());
  }
  if (r.featureMaps.empty()) return;
  std::printf("\nattention against softmax (mean over the converted layers' heads)\n");
  std::printf("  %-18s %10s %10s %13s\n", "feature map", "KL", "entropy", "monotonicity");
  std::printf("  %-18s %10s %10s %13s\n", "softmax", "0", number(r.softmaxEntropy).c_str(), "1");
  bool undefined = false, trainedUndefined = false;
  for (const auto& row : r.featureMaps) {
    std::printf("  %-18s %10s %10s %13s\n", row.name.c_str(), number(row.kl, "%.4g").c_str(), number(row.entropy).c_str(),
                number(row.monotonicity).c_str());
    (row.name == "trained" ? trainedUndefined : undefined) |= std::isnan(row.kl);
  }
  if (undefined)
    std::printf("  n/a: that map gives negative attention weights (its features can be negative), so KL and entropy are undefined\n");
  if (trainedUndefined)
    std::printf(
        "  trained n/a: no layer of the table is linear in the converted model, or its map gives negative weights\n");
}

namespace {

struct EvaluateFlags {
  std::string model, converted, featureMap, configFile, runDir, task, corpus, device, dtype;
  std::vector<std::string> featureMaps;
  std::vector<int64_t> layers;
  std::optional<int64_t> maxSequences, tableSequences, batch, seqLen;
  bool printConfig = false;
};

// The config file (if any) with the flags over it, checked like a file's values; a classification
// task without a corpus reads SpamAssassin.
jobs::EvaluateConfig evaluateConfigFromFlags(const EvaluateFlags& a) {
  jobs::EvaluateConfig c;
  if (!a.configFile.empty()) c = jobs::parseConfigFile(a.configFile, "evaluate", jobs::evaluateConfigFromJson);
  if (!a.model.empty()) c.modelDir = a.model;
  if (!a.device.empty()) c.device = a.device;
  if (!a.dtype.empty()) c.dtype = a.dtype;
  if (!a.converted.empty()) c.converted = a.converted;
  if (!a.featureMap.empty()) c.featureMap = a.featureMap;
  if (!a.runDir.empty()) c.runDir = a.runDir;
  if (!a.task.empty()) c.task = a.task;
  if (!a.featureMaps.empty()) c.featureMaps = a.featureMaps;
  if (!a.layers.empty()) c.layers = a.layers;
  if (a.maxSequences) c.maxSequences = *a.maxSequences;
  if (a.tableSequences) c.tableSequences = *a.tableSequences;
  if (a.batch) c.batchSize = *a.batch;
  if (a.seqLen) c.data.sequenceLength = *a.seqLen;
  if (!a.corpus.empty())
    c.data.corpus = a.corpus;
  else if (c.task == "classification" && c.data.corpus == "brown")
    c.data.corpus = "spamassassin";
  if (c.runDir.empty()) c.runDir = "runs/evaluate";
  return jobs::evaluateConfigFromJson(jobs::toJson(c));
}

void runEvaluateCommand(const EvaluateFlags& a) {
  const auto c = evaluateConfigFromFlags(a);
  if (a.printConfig) {
    std::printf("%s\n", jobs::toJson(c).dump(2).c_str());
    return;
  }
  if (c.modelDir.empty())
    throw std::runtime_error("evaluate: no model folder (give MODEL_DIR or \"model\" in --config)");
  CliObserver observer;
  const auto r = jobs::runEvaluate(c, observer);
  JobEnd end{r.status, r.message, r.seconds, -1, r.runFile, {}, &r};
  end.printHuman = [&r] {
    if (r.status == jobs::JobStatus::Completed) printEvaluation(r);
    std::printf("\n%s (%.1f s): %s\nrun file: %s\n", jobs::toString(r.status), r.seconds, r.message.c_str(),
                r.runFile.c_str());
  };
  end.device = r.device;
  reportJobEnd(end);
  if (r.status != jobs::JobStatus::Completed) throw JobFailed(r.status, r.message);
}

}  // namespace

void addEvaluateCommand(CLI::App& app) {
  auto a = std::make_shared<EvaluateFlags>();
  auto* cmd = app.add_subcommand("evaluate", "Perplexity/accuracy of original vs converted, and each feature map's KL to softmax");
  cmd->add_option("model", a->model, "Teacher (original softmax) model folder");
  cmd->add_option("--converted", a->converted, "Converted folder, or adapters .safetensors applied to the teacher");
  cmd->add_option("--feature-map", a->featureMap, "Without --converted: the converted model is the teacher with this map untrained");
  cmd->add_option("--config", a->configFile, "JSON config (see --print-config); flags override it")->check(CLI::ExistingFile);
  cmd->add_option("--run-dir", a->runDir, "Folder for run.h5 (default runs/evaluate)");
  cmd->add_option("--task", a->task, "lm | classification (default lm)");
  cmd->add_option("--feature-maps", a->featureMaps, "Table rows (default: every kind, plus \"trained\" with --converted)")->delimiter(',');
  cmd->add_option("--layers", a->layers, "Layers the table's maps go into (default: the converted model's linear layers)")->delimiter(',');
  cmd->add_option("--max-sequences", a->maxSequences, "Held-out sequences for perplexity/accuracy (0 = all)");
  cmd->add_option("--table-sequences", a->tableSequences, "Of those, how many the attention table uses (0 = all)");
  cmd->add_option("--batch-size", a->batch, "Sequences per forward pass");
  cmd->add_option("--seq-len", a->seqLen, "Tokens per sequence");
  cmd->add_option("--corpus", a->corpus, "lm: brown or a .txt/.jsonl file or folder; classification: spamassassin or .tsv/.jsonl");
  cmd->add_flag("--print-config", a->printConfig, "Print the full config as JSON and exit");
  addDeviceOption(cmd, a->device);
  addDtypeOption(cmd, a->dtype);
  cmd->callback([a] { runEvaluateCommand(*a); });
}

}  // namespace hh::cli
