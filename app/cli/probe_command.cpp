// `hedgehog probe MODEL`: passkey retrieval or multi-query associative recall at growing context
// (engine/jobs/recall_probe.h), for the teacher and the converted model in one folder, with the
// heads that look at the needle when the answer is due.
#include <algorithm>
#include <cstdio>

#include "app/cli/commands.h"
#include "engine/core/runtime.h"
#include "engine/jobs/job_support.h"
#include "engine/jobs/recall_probe.h"
#include "engine/models/model_io.h"
#include "engine/tokenizers/tokenizer.h"

namespace hh::cli {

namespace {

// The `count` heads with the most mass, "L2H5 0.41, ...".
std::string topHeads(const jobs::HeadTable& t, int count) {
  std::vector<int> order(t.values.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
  const auto key = [&](int i) { return std::isfinite(t.values[i]) ? t.values[i] : -1.0; };
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return key(a) > key(b); });
  std::string out;
  char buffer[48];
  for (int i = 0; i < std::min<int>(count, static_cast<int>(order.size())); ++i) {
    if (!std::isfinite(t.values[order[i]])) break;
    std::snprintf(buffer, sizeof buffer, "%sL%dH%d %.2f", out.empty() ? "" : ", ", order[i] / t.heads, order[i] % t.heads,
                  t.values[order[i]]);
    out += buffer;
  }
  return out;
}

nlohmann::json pointJson(const jobs::RecallProbePoint& p) {
  return {{"length", p.length},
          {"teacher_accuracy", p.teacherAccuracy},
          {"converted_accuracy", p.convertedAccuracy},
          {"teacher_mass", p.teacherMass.values},
          {"converted_mass", p.convertedMass.values},
          {"layers", p.teacherMass.layers},
          {"heads", p.teacherMass.heads}};
}

}  // namespace

void addProbeCommand(CLI::App& app) {
  struct Args {
    std::string model, corpus = "brown", json, device;
    jobs::RecallProbeOptions options;
  };
  auto a = std::make_shared<Args>();
  auto* cmd = app.add_subcommand("probe", "Passkey retrieval or multi-query recall at growing context: teacher vs converted");
  cmd->add_option("model", a->model, "Model folder (a converted folder compares its linear layers with softmax)")->required();
  cmd->add_option("--task", a->options.task, "passkey (default) or mqar");
  cmd->add_option("--lengths", a->options.lengths, "Context lengths (default 64,128,256)")
      ->delimiter(',')
      ->check(CLI::Range(int64_t(2), int64_t(1) << 20));
  cmd->add_option("--trials", a->options.trials, "Prompts per length (default 16)")
      ->check(CLI::Range(int64_t(1), int64_t(4096)));
  auto* needle = cmd->add_option("--needle", a->options.needle, "passkey: needle tokens (default 6)")
                     ->check(CLI::Range(int64_t(2), int64_t(1024)));
  auto* cue =
      cmd->add_option("--cue", a->options.cue, "passkey: needle tokens given again before the answer (default 2)")
          ->check(CLI::Range(int64_t(1), int64_t(1023)));
  auto* pairs = cmd->add_option("--pairs", a->options.pairs, "mqar: key-value pairs (default 4)")
                    ->check(CLI::Range(int64_t(1), int64_t(4096)));
  cmd->add_option("--corpus", a->corpus, "Text the needle is hidden in: brown, or a .txt/.jsonl file or folder");
  cmd->add_option("--seed", a->options.seed, "Seed of the needles and their places");
  cmd->add_option("--json", a->json, "Also write every number (and the per-head tables) to this file");
  addDeviceOption(cmd, a->device);
  cmd->callback([a, needle, cue, pairs] {
    // A flag of the other task would be ignored: refused instead.
    if (a->options.task == "mqar" && (needle->count() > 0 || cue->count() > 0))
      throw std::invalid_argument("probe: --needle and --cue are passkey's; mqar takes --pairs");
    if (a->options.task == "passkey" && pairs->count() > 0)
      throw std::invalid_argument("probe: --pairs is mqar's; passkey takes --needle and --cue");
    refuseOutputInside(a->json, "--json", a->model);
    hh::initRuntime();  // HH_NUM_THREADS, as every verb that runs a model
    const auto load = jobs::loadOptions(a->device);
    auto model = models::loadModel(a->model, load);
    const auto tokenizer = jobs::loadTokenizerFor(*model, a->model);
    jobs::DataConfig data;
    data.corpus = a->corpus;
    data.sequenceLength = *std::max_element(a->options.lengths.begin(), a->options.lengths.end());
    data.validationFraction = 1.0;
    data.maxValidationSequences = a->options.trials;
    const auto filler = jobs::loadLmData(data, *tokenizer, /*needTraining=*/false).validation.to(load.device);
    const auto points = jobs::runRecallProbe(*model, filler, a->options);
    std::printf("%s, %s: %lld prompts per length (%s) on %s\n", a->options.task.c_str(), a->model.c_str(),
                static_cast<long long>(a->options.trials), model->config().plan.summary().c_str(),
                jobs::deviceLabelOf(*model).c_str());
    std::printf("%8s  %8s  %9s  heads on the needle (teacher | converted)\n", "length", "teacher", "converted");
    nlohmann::json out = nlohmann::json::array();
    for (const auto& p : points) {
      std::printf("%8lld  %8.3f  %9.3f  %s | %s\n", static_cast<long long>(p.length), p.teacherAccuracy,
                  p.convertedAccuracy, topHeads(p.teacherMass, 3).c_str(), topHeads(p.convertedMass, 3).c_str());
      out.push_back(pointJson(p));
    }
    if (!a->json.empty()) {
      writeOutput(a->json,
                  nlohmann::json{{"task", a->options.task}, {"model", a->model}, {"points", out}}.dump(2) + "\n",
                  "probe's numbers");
    }
  });
}

}  // namespace hh::cli
