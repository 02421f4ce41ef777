// `hedgehog bench MODEL`: wall time of the steps a conversion repeats, on this machine, for one
// model folder and batch shape:
//   distill   stage 1 step: teacher forward with captures up to the last converted layer, the
//             attention-weight loss (soft CE, all layers), backward into the feature maps, AdamW
//   finetune  stage 2 step: converted model forward, next-token loss, backward into every
//             weight, AdamW
//   forward   inference forward (logits) of the teacher (softmax) and of the converted model
// Each is run `--warmup` times, then `--repeats` times; the median and the best are reported with
// tokens per second (and on a GPU the allocator's peak; every step ends synchronised). `--shape`
// times a named shape with random weights and ids instead of a folder; `--dtype bfloat16` the
// mixed-precision steps of the jobs (engine/config/compute_dtype.h). `--save-batch FILE` writes the batch's input_ids (safetensors, I64 [B, T]) so
// that scripts/bench_distill_pytorch.py times the same step on the same tokens.
#include <torch/nn/functional/loss.h>
#include <torch/optim/adamw.h>
#include <torch/types.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>

#include "app/cli/commands.h"
#include "engine/config/attention_types.h"
#include "engine/config/model_config.h"
#include "engine/core/device.h"
#include "engine/core/runtime.h"
#include "engine/io/safetensors.h"
#include "engine/jobs/distillation_loss.h"
#include "engine/jobs/job_support.h"
#include "engine/jobs/linear_cross_entropy.h"
#include "engine/models/model_io.h"
#include "engine/models/model_shapes.h"
#include "engine/models/tensor_file.h"
#include "engine/tokenizers/tokenizer.h"

namespace hh::cli {
namespace {

struct Timing {
  std::string name;
  double medianMs = 0, bestMs = 0, tokensPerSecond = 0, loss = 0;
  int64_t peakBytes = -1;  // the device allocator's peak over the step (-1 on the CPU)
};

template <typename Step>
Timing timeSteps(const std::string& name, int warmup, int repeats, int64_t tokens, Step step) {
  Timing t;
  t.name = name;
  bool first = true;
  auto run = [&] {  // the loss reported is the first step's (before any update)
    const double loss = step();
    if (first) t.loss = loss;
    first = false;
  };
  for (int i = 0; i < warmup; ++i) run();
  std::vector<double> ms;
  for (int i = 0; i < repeats; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    run();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  t.medianMs = ms[ms.size() / 2];
  t.bestMs = ms.front();
  t.tokensPerSecond = static_cast<double>(tokens) / (t.medianMs / 1000.0);
  return t;
}

// The teacher: a model folder, or a named shape with random weights (engine/models/model_shapes.h).
struct ModelSource {
  std::string folder, shape;
  int64_t positions = 0;
  models::LoadOptions load;
  models::ModelPtr make() const {
    if (!folder.empty()) return models::loadModel(folder, load);
    torch::manual_seed(0);
    auto model = models::createModel(models::parseModelConfig(models::benchmarkShapeConfig(shape, positions), shape));
    model->to(load.device, load.dtype);
    return model;
  }
  std::string name() const { return folder.empty() ? shape + " (random weights)" : folder; }
};

models::ModelPtr convertedModel(const ModelSource& source, const std::string& featureMap) {
  auto model = source.make();
  attn::LinearAttentionConfig linear;
  linear.featureMap.kind = attn::parseFeatureMapKind(featureMap);
  model->setAttentionPlan(models::AttentionPlan::uniform(model->layerCount(), linear));
  return model;
}

// The batch [B, T] on the CPU: held-out rows of the folder's tokenizer's corpus (a tokenizer with
// ids past the model's `vocab` rows is refused), or random ids (seeded) for a shape.
torch::Tensor benchBatch(const std::string& folder, int64_t vocab, int64_t batch, int64_t seqLen) {
  if (folder.empty()) {
    torch::manual_seed(1);
    return torch::randint(vocab, {batch, seqLen}, torch::kLong);
  }
  const auto tokenizer = tok::loadTokenizer(folder);
  jobs::checkTokenizerFits(vocab, *tokenizer, folder);
  jobs::DataConfig data;
  data.sequenceLength = seqLen;
  data.maxValidationSequences = batch;
  data.maxTrainSequences = 1;
  const auto dataset = jobs::loadLmData(data, *tokenizer);
  if (dataset.validation.size(0) < batch)
    throw std::runtime_error("bench: the corpus gives fewer than --batch-size validation sequences");
  return dataset.validation.narrow(0, 0, batch).contiguous();
}

// One bench run: the teacher, the batch on its device, and the timings so far.
struct Bench {
  ModelSource source;
  torch::Tensor ids;  // [B, T] on source.load.device
  std::string featureMap, dtype;
  std::string distillLoss;  // how the distill step's loss was computed, when it ran
  int warmup = 2, repeats = 10;
  std::vector<Timing> timings;

  // Times `step` (warm-up, repeats, each ending synchronised) with the device's peak memory.
  void timed(const std::string& name, const std::function<double()>& step) {
    const std::string device = source.load.device.str();
    resetDevicePeakMemory(device);
    timings.push_back(timeSteps(name, warmup, repeats, ids.numel(), [&] {
      const double loss = step();
      synchronizeDevice(device);
      return loss;
    }));
    timings.back().peakBytes = devicePeakMemoryBytes(device);
  }
};

// As the distill job steps: the feature maps train (fp32) under the frozen teacher.
void timeDistillStep(Bench& bench) {
  auto model = convertedModel(bench.source, bench.featureMap);
  model->freezeAllBut(true);
  jobs::applyComputeDtype(*model, bench.dtype);  // the feature maps train in fp32
  std::vector<torch::Tensor> params;
  for (auto& [name, t] : model->adapterTensors())
    if (t.requires_grad()) params.push_back(t);
  torch::optim::AdamW optimizer(params, torch::optim::AdamWOptions(1e-2));
  models::CaptureRequest capture;
  capture.softmaxWeights = capture.linearWeights = capture.keepGraph = true;
  const int64_t pairs = bench.ids.size(0) * model->config().heads * bench.ids.size(1) * bench.ids.size(1);
  capture.additiveFeatures = jobs::fusedDistillLossRequested(bench.source.load.device, pairs);  // as the distill job asks
  bench.distillLoss = capture.additiveFeatures ? "fused (from features, no T x T weights kept)" : "materialised weights";
  for (int64_t l = 0; l < model->layerCount(); ++l) capture.layers.push_back(l);
  models::ForwardOptions options;
  options.teacher = true;
  options.computeLogits = false;
  options.stopAfterLayer = model->layerCount() - 1;
  bench.timed("distill step", [&] {
    optimizer.zero_grad();
    const double loss = jobs::distillLayerByLayer(*model, bench.ids, capture, options, "soft_ce", 0.0, jobs::LayerPass::Backward);
    optimizer.step();
    return loss;
  });
}

// As the finetune job steps: every weight trains, the LM head fused with the loss.
void timeFinetuneStep(Bench& bench) {
  auto model = convertedModel(bench.source, bench.featureMap);
  jobs::applyComputeDtype(*model, bench.dtype);  // every weight trains: fp32 master weights
  torch::optim::AdamW optimizer(model->parameters(), torch::optim::AdamWOptions(1e-4));
  bench.timed("finetune step", [&] {
    optimizer.zero_grad();
    auto loss = jobs::modelNextTokenLoss(*model, bench.ids);
    loss.backward();
    optimizer.step();
    return loss.item<double>();
  });
}

// Inference forwards (logits) of the teacher, then of the converted model.
void timeForwards(Bench& bench) {
  at::NoGradGuard noGrad;
  auto teacher = bench.source.make();
  bench.timed("forward softmax", [&] { return teacher->forward(bench.ids).logits.sum().item<double>(); });
  teacher.reset();
  auto converted = convertedModel(bench.source, bench.featureMap);
  bench.timed("forward " + bench.featureMap, [&] { return converted->forward(bench.ids).logits.sum().item<double>(); });
}

// The table on stdout and, with `jsonPath`, the same as JSON.
void reportTimings(const Bench& bench, const std::string& jsonPath) {
  const auto info = runtimeInfo();
  const std::string device = deviceLabel(bench.source.load.device.str());
  std::printf("%s | batch %lld x %lld tokens | %s, %s | %d threads | torch %s\n", bench.source.name().c_str(),
              (long long)bench.ids.size(0), (long long)bench.ids.size(1), device.c_str(), bench.dtype.c_str(),
              info.intraOpThreads, info.torchVersion.c_str());
  std::printf("%-20s %12s %12s %14s %12s %12s\n", "step", "median ms", "best ms", "tokens/s", "peak MiB", "value");
  nlohmann::json out = nlohmann::json::array();
  for (const auto& t : bench.timings) {
    const std::string peak = t.peakBytes < 0 ? "-" : std::to_string(t.peakBytes >> 20);
    std::printf("%-20s %12.1f %12.1f %14.0f %12s %12.6g\n", t.name.c_str(), t.medianMs, t.bestMs, t.tokensPerSecond,
                peak.c_str(), t.loss);
    out.push_back({{"step", t.name}, {"median_ms", t.medianMs}, {"best_ms", t.bestMs},
                   {"tokens_per_second", t.tokensPerSecond}, {"peak_bytes", t.peakBytes}, {"loss", t.loss}});
  }
  std::printf("value: a step's loss; a forward's is the sum of its logits, to check that two runs computed the same\n");
  if (!bench.distillLoss.empty())
    std::printf("distill loss: %s (HH_FUSED_DISTILL_LOSS=on|off overrides the choice)\n", bench.distillLoss.c_str());
  if (jsonPath.empty()) return;
  writeOutput(jsonPath,
              nlohmann::json{{"model", bench.source.name()},
                             {"batch", bench.ids.size(0)},
                             {"seq_len", bench.ids.size(1)},
                             {"dtype", bench.dtype},
                             {"threads", info.intraOpThreads},
                             {"device", device},
                             {"torch", info.torchVersion},
                             {"distill_loss", bench.distillLoss},
                             {"timings", out}}
                      .dump(2) +
                  "\n",
              "timings");
}

}  // namespace

void addBenchCommand(CLI::App& app) {
  struct Args {
    std::string model, shape, featureMap = "hedgehog", saveBatch, json, only, device, dtype;
    int64_t batch = 8, seqLen = 128;
    int warmup = 2, repeats = 10, threads = 0;
  };
  auto a = std::make_shared<Args>();
  auto* cmd = app.add_subcommand("bench", "Time a distillation step, a finetuning step and inference on a model folder");
  auto* model = cmd->add_option("model", a->model, "Teacher model folder");
  auto* shape = cmd->add_option("--shape", a->shape, "Instead of a folder: demo | gpt2-small | llama-1b, random weights and ids")
                    ->check(CLI::IsMember(models::benchmarkShapeNames()));
  model->excludes(shape);
  cmd->add_option("--feature-map", a->featureMap, "Feature map put into every layer (default hedgehog)");
  cmd->add_option("--batch-size", a->batch, "Sequences per step (default 8)")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 20));
  cmd->add_option("--seq-len", a->seqLen, "Tokens per sequence (default 128)")
      ->check(CLI::Range(int64_t(2), int64_t(1) << 20));
  cmd->add_option("--warmup", a->warmup, "Untimed steps first (default 2)")->check(CLI::Range(0, 100000));
  cmd->add_option("--repeats", a->repeats, "Timed steps (default 10)")->check(CLI::PositiveNumber);
  cmd->add_option("--threads", a->threads,
                   "Torch and OpenBLAS threads (default 0: HH_NUM_THREADS, else every core; 1 on 2 cores or "
                   "fewer unless OMP_WAIT_POLICY=passive)")
      ->check(CLI::Range(0, 4096));
  cmd->add_option("--only", a->only, "distill | finetune | forward (default: all three)");
  cmd->add_option("--save-batch", a->saveBatch, "Write the batch's input_ids here (safetensors)");
  cmd->add_option("--json", a->json, "Also write the timings here as JSON");
  addDeviceOption(cmd, a->device);
  addDtypeOption(cmd, a->dtype);
  cmd->callback([a] {
    initRuntime();
    if (a->model.empty() && a->shape.empty()) throw std::invalid_argument("bench: give a model folder or --shape");
    if (!a->only.empty() && a->only != "distill" && a->only != "finetune" && a->only != "forward")
      throw std::invalid_argument("bench: --only must be distill, finetune or forward");
    attn::parseFeatureMapKind(a->featureMap);  // refused before anything is written
    for (const auto& [path, flag] : {std::pair{a->saveBatch, "--save-batch"}, std::pair{a->json, "--json"}})
      refuseOutputInside(path, flag, a->model);
    if (a->threads > 0) applyThreadCount(a->threads);  // OpenBLAS's pool too, as every job's count
    Bench bench;
    bench.source = ModelSource{a->model, a->shape, a->seqLen, jobs::loadOptions(a->device, a->dtype)};
    bench.featureMap = a->featureMap;
    bench.dtype = a->dtype.empty() ? "float32" : a->dtype;
    bench.warmup = a->warmup;
    bench.repeats = a->repeats;
    const int64_t vocab = a->shape.empty()
                              ? models::loadModelConfig(a->model).vocabSize
                              : models::benchmarkShapeConfig(a->shape, a->seqLen).at("vocab_size").get<int64_t>();
    const auto cpuIds = benchBatch(a->model, vocab, a->batch, a->seqLen);  // [B, T]
    if (!a->saveBatch.empty()) models::writeTensorFile(a->saveBatch, {{"input_ids", cpuIds}}, {{"format", "pt"}});
    bench.ids = cpuIds.to(bench.source.load.device);
    if (a->only.empty() || a->only == "distill") timeDistillStep(bench);
    if (a->only.empty() || a->only == "finetune") timeFinetuneStep(bench);
    if (a->only.empty() || a->only == "forward") timeForwards(bench);
    reportTimings(bench, a->json);
  });
}

}  // namespace hh::cli
