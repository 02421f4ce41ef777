// hh_bench_decode: per-token decode latency and memory at a given context position, softmax with a
// KV cache against Hedgehog in the recurrent form and the hedgehog_window(64) hybrid (recurrent
// state plus a ring buffer of the last 64 keys), for whole models and for one attention layer.
//   hh_bench_decode [--positions 512,2048,8192,32768] [--steps 16] [--shapes demo,gpt2-small]
//                   [--batch B] [--device auto|cpu|cuda[:N]] [--dtype float32|bfloat16]
// Shapes (random weights: latency does not depend on their values): demo, gpt2-small, llama-1b
// (engine/models/model_shapes.h; llama-1b is 5 GB of fp32 weights).
// The GPT-2 shapes get learned positions up to the largest position asked for (the demo teacher
// itself has 256). On a GPU every step is timed after synchronising the device.
// At position p the cache is set up as if p tokens had been read: the KV cache holds p random keys
// and values per layer (reserved up front, as generate() does), the recurrent state is a random
// positive S and z at position p. Filling it by a real prefill of 32K tokens through softmax
// would take hours on 2 cores and gives the same per-token cost. Then `steps` single-token
// forward passes are timed (after 2 warm-ups): median and fastest.
// One layer alone: softmax over the cache, the engine's step (the fused step kernel on a GPU built
// with them), the LibTorch step (HH_FUSED_CUDA policy Never) and the floor of the state it reads
// and writes.
// Floor: the bytes one step must read (every weight of the model as planned once, except the
// learned position table, of which it reads one row; plus the KV cache for softmax, the state for
// Hedgehog) over the machine's measured read rate (a matrix-vector product over a 512 MiB matrix,
// best of 5).
#include <torch/types.h>

#include <malloc.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "app/bench/bench_options.h"
#include "engine/attention/linear_attention.h"
#include "engine/attention/softmax_attention.h"
#include "engine/core/device.h"
#include "engine/core/process_memory.h"
#include "engine/core/runtime.h"
#include "engine/generation/decode_graph.h"
#include "engine/generation/generator.h"
#include "engine/models/model_io.h"
#include "engine/models/model_shapes.h"

namespace {
using Clock = std::chrono::steady_clock;
namespace m = hh::models;

struct Timing {
  double medianMs = 0, bestMs = 0;
};

std::string gDevice = "cpu";  // the canonical device the run uses (main sets it)

Timing time(const std::function<void()>& fn, int steps, int warmups = 2) {
  for (int i = 0; i < warmups; ++i) fn();
  hh::synchronizeDevice(gDevice);
  std::vector<double> ms;
  for (int i = 0; i < steps; ++i) {
    const auto t0 = Clock::now();
    fn();
    hh::synchronizeDevice(gDevice);
    ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  return {ms[ms.size() / 2], ms.front()};
}

double readBandwidthGBs(const torch::TensorOptions& options) {
  // A matrix-vector product streams the matrix once: the access pattern of a decoding step.
  const auto big = torch::rand({32768, 4096}, options.dtype(torch::kFloat));  // 512 MiB
  const auto x = torch::rand({4096}, options.dtype(torch::kFloat));
  double best = 1e9;
  for (int i = 0; i < 5; ++i) {
    hh::synchronizeDevice(gDevice);
    const auto t0 = Clock::now();
    const auto y = torch::mv(big, x);
    hh::synchronizeDevice(gDevice);
    best = std::min(best, std::chrono::duration<double>(Clock::now() - t0).count());
  }
  return double(big.numel() * 4) / best / 1e9;
}

// A cache as if `position` tokens had been read (see the header).
m::DecodeCache cacheAt(m::TransformerModel& model, int64_t batch, int64_t position, int64_t extra) {
  const auto& c = model.config();
  const auto like = model.parameters().front();
  auto cache = model.newCache(batch, position + extra);
  for (auto& layer : cache.layers) {
    if (layer.linear) {
      layer.state.S.uniform_(0.0, 1.0);
      if (layer.state.z.defined()) layer.state.z.uniform_(1.0, 2.0);
      for (auto* ring : {&layer.state.ringKeys, &layer.state.ringValues, &layer.state.ringFeatures})
        if (ring->defined()) ring->uniform_(0.0, 1.0);  // a full window (position >= W)
      layer.state.position = position;
      continue;
    }
    for (int64_t t0 = 0; t0 < position; t0 += 4096) {
      const int64_t len = std::min<int64_t>(4096, position - t0);
      layer.kv.append(torch::randn({batch, c.kvHeads, len, c.headDim}, like.options()),
                      torch::randn({batch, c.kvHeads, len, c.headDim}, like.options()));
    }
  }
  cache.position = position;
  return cache;
}

// Every parameter's bytes; with `oneStep`, the bytes one decoding step reads: GPT-2's learned
// position table (wpe) counts one row. The table is sized to the largest position asked for (32K
// rows, 101 MB for GPT-2 small), and counting it whole put the floor that much too high.
int64_t weightBytes(const m::TransformerModel& model, bool oneStep = false) {
  int64_t n = 0;
  for (const auto& item : model.named_parameters(true)) {
    const auto& p = item.value();
    const int64_t bytes = p.numel() * int64_t(p.element_size());
    n += oneStep && item.key() == "wpe.weight" ? bytes / p.size(0) : bytes;
  }
  return n;
}

// The Hedgehog step recorded once as a CUDA graph and replayed (generation/decode_graph.h): the
// timing, or zeros with `note` saying why it could not run (a CPU run, a build without CUDA or
// without the fused step kernel).
Timing timeGraphedStep(m::TransformerModel& model, const m::AttentionPlan& plan, int64_t batch, int64_t position,
                       const torch::Tensor& token, int steps, std::string& note) {
  if (gDevice == "cpu") {
    note = "a GPU only";
    return {};
  }
  try {
    model.setAttentionPlan(plan);
    auto state = cacheAt(model, batch, position, 0);
    hh::gen::DecodeGraph graph(model, state);
    return time([&] { graph.step(token); }, steps);
  } catch (const std::exception& e) {
    note = e.what();
    return {};
  }
}

using Args = hh::bench::DecodeOptions;  // the command line (see the header)

// What every table of one run shares.
struct Run {
  const Args& args;
  torch::TensorOptions options;  // the device and dtype of the weights
  double bandwidth = 0.0;        // GB/s, measured
};

// One decoding step of `model` under `plan` from a cache at `position`: its time, the bytes of the
// cache it reads (`extra` positions reserved beyond, as generate() does for the KV cache) and of the
// weights it reads under that plan (weightBytes, one step).
struct StepCost {
  Timing time;
  int64_t cacheBytes = 0, weightBytes = 0;
};

StepCost timeStep(m::TransformerModel& model, const m::AttentionPlan& plan, const Run& run, int64_t position,
                  int64_t extra, const torch::Tensor& token) {
  model.setAttentionPlan(plan);
  auto cache = cacheAt(model, run.args.batch, position, extra);
  m::ForwardOptions forward;
  forward.cache = &cache;
  StepCost cost;
  cost.time = time([&] { model.forward(token, forward); }, run.args.steps);
  cost.cacheBytes = cache.bytes();
  cost.weightBytes = weightBytes(model, true);
  return cost;
}

// The whole-model table: softmax with a KV cache, the Hedgehog recurrent step, the window hybrid
// and the recorded CUDA graph, one row per position.
void modelTable(m::TransformerModel& model, const Run& run) {
  const auto& c = model.config();
  const int64_t batch = run.args.batch, steps = run.args.steps;
  hh::attn::LinearAttentionConfig hedgehog;
  hedgehog.featureMap.kind = hh::attn::FeatureMapKind::Hedgehog;
  const auto plan = m::AttentionPlan::uniform(c.layers, hedgehog);
  auto windowed = hedgehog;
  windowed.window = 64;
  const auto windowPlan = m::AttentionPlan::uniform(c.layers, windowed);
  std::printf("\n| position | softmax + KV cache ms/token | KV cache MB | floor ms | hedgehog recurrent ms/token | state MB "
              "| floor ms | softmax / hedgehog | window(64) ms/token | window state MB | hedgehog, CUDA graph ms/token "
              "| softmax / graph |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  std::string graphNote;  // why the CUDA-graph column is empty, once per shape
  for (const int64_t p : run.args.positions) {
    const auto token = torch::full({batch, 1}, 464, run.options.dtype(torch::kLong));
    const auto softCost = timeStep(model, {}, run, p, steps + 4, token);
    const auto recurrentCost = timeStep(model, plan, run, p, 0, token);
    const auto windowCost = timeStep(model, windowPlan, run, p, 0, token);
    const auto graphed = timeGraphedStep(model, plan, batch, p, token, int(steps), graphNote);
    const auto &soft = softCost.time, &recurrent = recurrentCost.time, &window = windowCost.time;
    const int64_t kvBytes = softCost.cacheBytes, stateBytes = recurrentCost.cacheBytes,
                  windowBytes = windowCost.cacheBytes;
    // Each path's own weights (softmax reads no feature maps): the filled part of the KV cache.
    const double softFloor = double(softCost.weightBytes + kvBytes * (p + 1) / (p + steps + 4)) / run.bandwidth / 1e6;
    const double hhFloor = double(recurrentCost.weightBytes + stateBytes) / run.bandwidth / 1e6;
    char graphCells[64] = "n/a | -";
    if (graphed.medianMs > 0)
      std::snprintf(graphCells, sizeof graphCells, "%.3f (%.3f) | %.1fx", graphed.medianMs, graphed.bestMs,
                    soft.medianMs / graphed.medianMs);
    std::printf("| %lld | %.2f (%.2f) | %.1f | %.2f | %.2f (%.2f) | %.2f | %.2f | %.1fx | %.2f (%.2f) | %.2f | %s |\n",
                (long long)p, soft.medianMs, soft.bestMs, kvBytes / 1e6, softFloor, recurrent.medianMs,
                recurrent.bestMs, stateBytes / 1e6, hhFloor, soft.medianMs / recurrent.medianMs, window.medianMs,
                window.bestMs, windowBytes / 1e6, graphCells);
    std::fflush(stdout);
  }
  if (!graphNote.empty()) std::printf("\nCUDA graph column: %s\n", graphNote.c_str());
}

// One attention layer alone: the softmax over the cached keys against the recurrent step (the
// engine's, and LibTorch's with the fused kernels off), beside the floor of the state it reads.
void layerTable(const std::string& shape, const m::ModelConfig& c, const Run& run) {
  const int64_t batch = run.args.batch;
  const int steps = run.args.steps * 4;
  const auto& options = run.options;
  std::printf("\n%s, one attention layer (H=%lld, D=%lld): the per-token attention alone\n\n", shape.c_str(),
              (long long)c.heads, (long long)c.headDim);
  // The step reads and writes the state S [B, H, 2D, D] and z [B, H, 2D] in fp32: its floor.
  const double stateBytes = 2.0 * batch * c.heads * (2.0 * c.headDim * c.headDim + 2.0 * c.headDim) * 4.0;
  std::printf("| position | softmax over the KV cache ms | hedgehog step ms | softmax / hedgehog | LibTorch step ms "
              "(HH_FUSED_CUDA=off) | state floor ms |\n|---|---|---|---|---|---|\n");
  hh::attn::LinearAttentionConfig hedgehog;
  hedgehog.featureMap.kind = hh::attn::FeatureMapKind::Hedgehog;
  hedgehog.featureMap.heads = c.heads;
  hedgehog.featureMap.headDim = c.headDim;
  hh::attn::LinearAttention layer(hedgehog);
  layer->to(options.device(), options.dtype().toScalarType());
  auto layerState = layer->initialState(batch, options.device(), options.dtype().toScalarType());
  layerState.S.uniform_(0.0, 1.0);
  layerState.z.uniform_(1.0, 2.0);
  const auto q = torch::randn({batch, c.heads, 1, c.headDim}, options),
             k = torch::randn({batch, c.heads, 1, c.headDim}, options),
             v = torch::randn({batch, c.heads, 1, c.headDim}, options);
  for (const int64_t p : run.args.positions) {
    const auto keys = torch::randn({batch, c.heads, p, c.headDim}, options),
               values = torch::randn({batch, c.heads, p, c.headDim}, options);
    const double scale = 1.0 / std::sqrt(double(c.headDim));
    const auto soft = time([&] { hh::attn::cachedSoftmaxAttention(q, keys, values, scale); }, steps);
    const auto step = time([&] { layer->step(layerState, q, k, v); }, steps);
    Timing generic;
    {
      const hh::attn::ScopedFusedCudaPolicy never(hh::attn::FusedCudaPolicy::Never);
      generic = time([&] { layer->step(layerState, q, k, v); }, steps);
    }
    std::printf("| %lld | %.3f | %.3f | %.1fx | %.3f | %.4f |\n", (long long)p, soft.medianMs, step.medianMs,
                soft.medianMs / step.medianMs, generic.medianMs, stateBytes / (run.bandwidth * 1e9) * 1e3);
    std::fflush(stdout);
  }
}

}  // namespace

int benchMain(int argc, char** argv) {
  const Args args = hh::bench::parseDecodeOptions(argc, argv);
  mallopt(M_MMAP_THRESHOLD, 64 * 1024);
  const auto rt = hh::initRuntime();
  at::NoGradGuard noGrad;
  gDevice = hh::resolveDevice(args.device);
  Run run{args, torch::TensorOptions()
                    .device(torch::Device(gDevice))
                    .dtype(args.dtype == "bfloat16" ? torch::kBFloat16 : torch::kFloat)};
  run.bandwidth = readBandwidthGBs(run.options);
  std::printf("# hh_bench_decode: batch %lld, %s, %s, torch %s, %d threads; %d timed steps per cell (median, fastest)\n",
              (long long)args.batch, args.dtype.c_str(), hh::deviceLabel(gDevice).c_str(), rt.torchVersion.c_str(),
              rt.intraOpThreads, args.steps);
  std::printf("# read rate (matrix-vector product over 512 MiB, best of 5): %.1f GB/s\n", run.bandwidth);
  const int64_t maxPosition = *std::max_element(args.positions.begin(), args.positions.end()) + args.steps + 8;
  for (const auto& shape : args.shapes) {
    auto model = m::createModel(m::parseModelConfig(m::benchmarkShapeConfig(shape, maxPosition), shape));
    model->to(run.options.device(), run.options.dtype().toScalarType());
    model->eval();
    const auto& c = model->config();
    char read[96] = "";  // a learned position table: a token reads one row of it
    if (weightBytes(*model, true) != weightBytes(*model))
      std::snprintf(read, sizeof read, ", %.0f MB of them read per token", weightBytes(*model, true) / 1e6);
    std::printf("\n## %s: %lld layers, %lld heads, head dim %lld, %.1f M parameters (%.0f MB of weights%s)\n",
                shape.c_str(), (long long)c.layers, (long long)c.heads, (long long)c.headDim,
                model->parameterCount() / 1e6, weightBytes(*model) / 1e6, read);
    modelTable(*model, run);
    layerTable(shape, c, run);
  }
  std::printf("\n# process peak RSS: %.0f MB\n", hh::peakResidentBytes() / 1e6);
  return 0;
}

int main(int argc, char** argv) {
  return hh::bench::reportErrors(
      "hh_bench_decode", [&] { return benchMain(argc, argv); }, hh::bench::kDecodeUsage);
}
