// `hedgehog generate MODEL_DIR --prompt TEXT [options]`: generates text, streaming each token as it
// comes, then a summary: prefill time, decode tokens/s, per-token latency, the memory the cache
// holds (KV cache for softmax layers, recurrent state for linear ones) and the process's peak.
// Linear layers decode in the recurrent form (constant memory); softmax layers keep a KV cache.
// --compare DIR runs the same prompt and settings on a second model (e.g. the original) after
// the first, and prints the two summaries side by side. --timings CSV writes one row per token.
// --samples N --output FILE.jsonl writes N texts instead (seeds seed .. seed+N-1), each the prompt
// and what the model wrote after it, as {"text": ...} lines: a corpus the jobs read as they read
// any .jsonl (the stories demo distils on one, projects/stories/README.md).
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <sstream>

#include "app/cli/commands.h"
#include "engine/core/process_memory.h"
#include "engine/core/runtime.h"
#include "engine/generation/generator.h"
#include "engine/generation/text_stream.h"
#include "engine/jobs/job_support.h"
#include "engine/models/model_io.h"
#include "engine/tokenizers/tokenizer.h"

namespace hh::cli {
namespace {

struct GenerateArgs {
  std::string model, compare, prompt, timings, output, device, dtype;
  int64_t samples = 0;
  std::vector<std::string> stops;
  gen::GenerateOptions options;
  bool teacher = false, ignoreEos = false, quiet = false;
};

struct Summary {
  std::string label;
  gen::GenerateResult result;
  double meanTokenMs = 0, lastTokenMs = 0;
  int64_t peakRss = 0;
};

std::string megabytes(int64_t bytes) {
  char b[32];
  std::snprintf(b, sizeof b, "%.2f MB", double(bytes) / 1e6);
  return b;
}

// The arguments' options for this model: its end-of-text tokens (unless --ignore-eos) and --stop.
gen::GenerateOptions optionsFor(const GenerateArgs& a, const models::ModelConfig& config, const tok::Tokenizer& tokenizer) {
  auto options = a.options;
  if (!a.ignoreEos) {
    for (const int64_t id : gen::endOfTextTokens(config, tokenizer)) options.stopTokens.push_back(id);
  }
  for (const auto& text : a.stops) {
    const auto ids = tokenizer.encode(text);
    // A piece of the vocabulary as it is, e.g. "." for SentencePiece, which encodes "." as "▁" ".".
    const int64_t id = ids.size() == 1 ? ids.front() : tokenizer.tokenToId(text);
    if (id < 0)
      throw std::invalid_argument("--stop \"" + text + "\" is " + std::to_string(ids.size()) +
                                  " tokens for this tokenizer; a stop must be a single token");
    options.stopTokens.push_back(id);
  }
  return options;
}

// Rotary positions go past the length a model was trained on, GPT-2's learned ones do not (its
// decoder refuses or stops there); the user is told where the text leaves the trained positions.
void notePastTrainedPositions(const models::ModelConfig& config, int64_t promptTokens, int64_t newTokens,
                              const std::string& dir) {
  if (config.positions != models::PositionalScheme::Rotary || promptTokens + newTokens <= config.maxPositions) return;
  std::fprintf(stderr, "note: %s was trained on %lld positions; %s past them take extrapolated rotary positions\n",
               dir.c_str(), (long long)config.maxPositions,
               promptTokens > config.maxPositions ? "the prompt's tokens" : "tokens generated");
}

// The model folder loaded on the arguments' device.
models::ModelPtr loadOn(const std::string& dir, const GenerateArgs& a) {
  return models::loadModel(dir, jobs::loadOptions(a.device, a.dtype));
}

Summary runOne(const std::string& dir, const GenerateArgs& a, bool teacher, std::ostream* csv) {
  Summary s;
  auto model = loadOn(dir, a);
  const auto tokenizer = jobs::loadTokenizerFor(*model, dir);
  const auto& config = model->config();
  auto options = optionsFor(a, config, *tokenizer);
  options.teacher = teacher;
  if (options.cudaGraph && (teacher || config.plan.linearLayerCount() < config.layers)) {
    options.cudaGraph = false;  // softmax layers: their KV cache grows every token (decode_graph.h)
    std::fprintf(stderr, "--cuda-graph: %s has softmax layers and decodes step by step\n", dir.c_str());
  }
  gen::requireDecoder(config);  // before the prompt is printed
  const auto prompt = tokenizer->encode(a.prompt, /*addSpecialTokens=*/true);
  notePastTrainedPositions(config, int64_t(prompt.size()), a.options.maxNewTokens, dir);
  auto name = dir;
  while (name.size() > 1 && name.back() == '/') name.pop_back();
  s.label = name.substr(name.find_last_of('/') == std::string::npos ? 0 : name.find_last_of('/') + 1);
  if (s.label.size() > 16) s.label = s.label.substr(0, 15) + "~";
  s.label += teacher ? " (teacher)" : (config.plan.anyLinear() ? " (linear)" : " (softmax)");
  const std::string kind = config.plan.anyLinear() && !teacher
                               ? std::to_string(config.plan.linearLayerCount()) + " of " + std::to_string(config.layers) +
                                     " layers linear (recurrent state)"
                               : "softmax (KV cache)";
  std::fprintf(stderr, "%s: %s, %lld prompt tokens, %s, on %s\n", config.describe().c_str(), kind.c_str(),
               (long long)prompt.size(), options.sampling.describe().c_str(), jobs::deviceLabelOf(*model).c_str());
  if (!a.quiet) std::printf("%s", a.prompt.c_str());
  std::fflush(stdout);
  gen::TextStream stream(*tokenizer, prompt);
  double sumMs = 0;
  s.result = gen::generate(*model, prompt, options, [&](const gen::TokenEvent& e) {
    const auto piece = stream.push(e.token);
    if (!a.quiet && !piece.empty()) {
      std::printf("%s", piece.c_str());
      std::fflush(stdout);
    }
    if (e.index > 0) sumMs += e.seconds * 1e3;
    s.lastTokenMs = e.seconds * 1e3;
    if (csv)
      *csv << dir << "," << e.index << "," << e.position << "," << e.token << "," << e.seconds * 1e3 << ","
           << e.cacheBytes << "," << residentBytes() << "\n";
    return true;
  });
  if (!a.quiet) std::printf("\n");
  s.meanTokenMs = s.result.tokens.size() > 1 ? sumMs / double(s.result.tokens.size() - 1) : 0;
  s.peakRss = peakResidentBytes();
  return s;
}

// --samples N --output FILE: N texts, one JSON line each; progress and a summary on stdout.
void writeSamples(const GenerateArgs& a) {
  auto model = loadOn(a.model, a);
  const auto tokenizer = jobs::loadTokenizerFor(*model, a.model);
  auto options = optionsFor(a, model->config(), *tokenizer);
  options.teacher = a.teacher;
  const auto prompt = tokenizer->encode(a.prompt, /*addSpecialTokens=*/true);
  std::ostringstream out;  // written whole at the end: a failure leaves an earlier file as it was
  const auto start = std::chrono::steady_clock::now();
  int64_t tokens = 0, stopped = 0, full = 0;
  for (int64_t k = 0; k < a.samples; ++k) {
    options.sampling.seed = a.options.sampling.seed + uint64_t(k);
    const auto result = gen::generate(*model, prompt, options);
    std::vector<int64_t> ids = prompt;
    ids.insert(ids.end(), result.tokens.begin(), result.tokens.end());
    out << nlohmann::json{{"text", tokenizer->decode(ids, /*skipSpecialTokens=*/true)}}.dump() << "\n";
    tokens += int64_t(result.tokens.size());
    stopped += result.stopReason == "stop token" ? 1 : 0;
    full += result.stopReason == "context full" ? 1 : 0;
    if ((k + 1) % 50 == 0 || k + 1 == a.samples)
      std::printf("%lld/%lld samples, %lld tokens\n", (long long)(k + 1), (long long)a.samples, (long long)tokens);
    std::fflush(stdout);
  }
  writeOutput(a.output, out.str(), "samples");
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const std::string contextFull = full > 0 ? ", " + std::to_string(full) + " at the end of the model's positions" : "";
  std::printf(
      "wrote %lld samples to %s: %lld generated tokens (%.0f a sample; %lld ended at an end-of-text token%s, the "
      "rest at %lld tokens) in %.1f s (%.0f tokens/s)\n",
      (long long)a.samples, a.output.c_str(), (long long)tokens, double(tokens) / double(a.samples), (long long)stopped,
      contextFull.c_str(), (long long)a.options.maxNewTokens, seconds, double(tokens) / seconds);
}

void printSummaries(const std::vector<Summary>& all) {
  std::printf("\n%-26s", "");
  for (const auto& s : all) std::printf(" %22s", s.label.c_str());
  std::printf("\n");
  auto row = [&](const char* name, auto value) {
    std::printf("%-26s", name);
    for (const auto& s : all) std::printf(" %22s", value(s).c_str());
    std::printf("\n");
  };
  auto fmt = [](const char* f, double v) {
    char b[64];
    std::snprintf(b, sizeof b, f, v);
    return std::string(b);
  };
  row("prompt tokens", [](const Summary& s) { return std::to_string(s.result.promptTokens); });
  row("generated tokens", [](const Summary& s) { return std::to_string(s.result.tokens.size()); });
  row("prefill + first token", [&](const Summary& s) { return fmt("%.1f ms", s.result.prefillSeconds * 1e3); });
  row("decode", [&](const Summary& s) { return fmt("%.1f tokens/s", s.result.decodeTokensPerSecond()); });
  row("per token (mean)", [&](const Summary& s) { return fmt("%.2f ms", s.meanTokenMs); });
  row("per token (last)", [&](const Summary& s) { return fmt("%.2f ms", s.lastTokenMs); });
  row("cache at the end", [&](const Summary& s) { return megabytes(s.result.peakCacheBytes); });
  row("  of which recurrent state", [&](const Summary& s) { return megabytes(s.result.stateBytes); });
  row("cache allocated", [&](const Summary& s) { return megabytes(s.result.reservedBytes); });
  row("process peak RSS", [&](const Summary& s) { return megabytes(s.peakRss); });
  row("stopped by", [](const Summary& s) { return s.result.stopReason; });
}

// Greedy decoding (temperature 0, the default) takes the most likely token: the sampling flags
// would change nothing, and --samples would write the same text N times.
void refuseSamplingFlagsWhenGreedy(const GenerateArgs& a, const std::vector<CLI::Option*>& samplingFlags) {
  if (!a.options.sampling.greedy()) return;
  for (const auto* flag : samplingFlags)
    if (flag->count() > 0)
      throw std::invalid_argument(flag->get_name() +
                                  " shapes sampling, but temperature 0 (the default) decodes greedily: "
                                  "give --temperature, e.g. -t 0.8");
  if (a.samples > 1)
    throw std::invalid_argument("--samples " + std::to_string(a.samples) +
                                " with temperature 0 (the default) would write "
                                "the same greedy text each time: give --temperature, e.g. -t 0.8");
}

}  // namespace

void addGenerateCommand(CLI::App& app) {
  auto a = std::make_shared<GenerateArgs>();
  auto* cmd = app.add_subcommand("generate", "Generate text, streaming tokens; linear layers decode with constant memory");
  cmd->add_option("model", a->model, "Model folder (original or converted, with its tokenizer files)")
      ->required()->check(CLI::ExistingDirectory);
  cmd->add_option("--prompt,-p", a->prompt, "Prompt text")->required();
  cmd->add_option("--max-tokens,-n,--max-new-tokens", a->options.maxNewTokens, "Tokens to generate at most")->capture_default_str();
  cmd->add_option("--temperature,-t", a->options.sampling.temperature, "0 = greedy")->capture_default_str();
  auto* topK = cmd->add_option("--top-k", a->options.sampling.topK, "Keep the k most likely tokens (0 = all)")
                   ->capture_default_str();
  auto* topP =
      cmd->add_option("--top-p", a->options.sampling.topP, "Nucleus: keep the most likely tokens up to this mass")
          ->capture_default_str();
  auto* seed = cmd->add_option("--seed", a->options.sampling.seed, "Sampling seed")->capture_default_str();
  cmd->add_option("--stop", a->stops, "Stop after this token (text of one token; repeatable)");
  cmd->add_flag("--ignore-eos", a->ignoreEos, "Do not stop at the end-of-text token");
  cmd->add_flag("--teacher", a->teacher, "Run a converted model's linear layers as softmax (its original attention)");
  cmd->add_flag("--cuda-graph", a->options.cudaGraph,
                "Replay one recorded decode step per token (a GPU, every layer Hedgehog with the additive rule)");
  cmd->add_option("--compare", a->compare, "A second model folder to run with the same prompt and settings")
      ->check(CLI::ExistingDirectory);
  cmd->add_option("--timings", a->timings, "CSV file: one row per token (latency, cache bytes, RSS)");
  cmd->add_flag("--quiet,-q", a->quiet, "Print only the summary");
  cmd->add_option("--samples", a->samples, "Write this many texts (seeds --seed, --seed + 1, ...) to --output")
      ->check(CLI::Range(int64_t(1), int64_t(1000000)));
  cmd->add_option("--output,-o", a->output, "With --samples: a .jsonl file, one {\"text\": ...} line per sample");
  addDeviceOption(cmd, a->device);
  addDtypeOption(cmd, a->dtype);
  cmd->callback([a, topK, topP, seed] {
    hh::initRuntime();
    a->options.sampling.validate();
    if (a->options.maxNewTokens < 1) throw std::invalid_argument("--max-tokens must be at least 1");
    if ((a->samples > 0) != !a->output.empty()) throw std::invalid_argument("--samples and --output go together");
    for (const auto& folder : {a->model, a->compare}) {
      refuseOutputInside(a->output, "--output", folder);
      refuseOutputInside(a->timings, "--timings", folder);
    }
    refuseSamplingFlagsWhenGreedy(*a, {topK, topP, seed});
    if (a->samples > 0) {
      if (!a->compare.empty() || !a->timings.empty())
        throw std::invalid_argument("--samples writes texts; --compare and --timings are for one generation");
      return writeSamples(*a);
    }
    std::ostringstream csv;  // written whole once the generations are done
    std::ostringstream* timings = a->timings.empty() ? nullptr : &csv;
    csv << "model,index,position,token,ms,cache_bytes,rss_bytes\n";
    std::vector<Summary> all{runOne(a->model, *a, a->teacher, timings)};
    if (!a->compare.empty()) all.push_back(runOne(a->compare, *a, false, timings));
    if (timings) writeOutput(a->timings, csv.str(), "timings");
    printSummaries(all);
  });
}

}  // namespace hh::cli
