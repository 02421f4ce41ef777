// hh_bench_run_writer: what the run file costs a job. A distillation-shaped layout (5 scalars,
// 4 per-head tables of L x H, snapshots of P pairs at S x S, 2P curves of B bins, feature-map
// weights) is appended step by step as the distill job does, with a flush after every `every`
// steps; reports the time per append call and per flush (median and 95th percentile).
//   hh_bench_run_writer [--steps N] [--dir DIR]
// The question it answers: how often can a job flush (the dashboard can only be as fresh as the
// file) before the flushes cost the job more than a per-cent of a ~100 ms step.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "app/bench/bench_args.h"
#include "engine/runs/run_writer.h"

namespace {
using Clock = std::chrono::steady_clock;

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, size_t(p * double(v.size() - 1) + 0.5))];
}

double msSince(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }
}  // namespace

int benchMain(int argc, char** argv) {
  int steps = 2000;
  std::string dir = std::filesystem::temp_directory_path().string();
  hh::bench::parseOptions(argc, argv, [&](const std::string& key, const std::string& value) {
    if (key == "--steps")
      steps = static_cast<int>(hh::bench::parseCount(key, value));
    else if (key == "--dir")
      dir = value;
    else
      return false;
    return true;
  });
  const int L = 4, H = 4, P = 4, S = 22, B = 32;
  hh::runs::RunHeader header;
  header.runId = "bench";
  header.kind = "distill";
  header.configJson = "{}";
  auto& l = header.layout;
  l.scalars = {{"loss", "nats"}, {"lr"}, {"val_loss", "nats"}, {"kl_mean", "nats"}, {"step_seconds", "s"}};
  l.layers = L;
  l.heads = H;
  l.tables = {{"kl"}, {"entropy_softmax"}, {"entropy_linear"}, {"monotonicity"}};
  for (int p = 0; p < P; ++p) l.snapshots.pairs.push_back({p, 0});
  for (int t = 0; t < S; ++t) l.snapshots.tokens.push_back("t" + std::to_string(t));
  l.curves.bins = B;
  for (int p = 0; p < P; ++p)
    for (const char* label : {"softmax", "linear"}) l.curves.pairs.push_back({p, 0}), l.curves.labels.push_back(label);
  l.weights = {{"layers.0.hedgehog.weight", {H, 32, 32}}, {"layers.0.hedgehog.bias", {H, 32}}};

  std::printf("run writer, %d steps of a distill-shaped run (evaluation every 25 steps)\n", steps);
  std::printf("| flush every | append (median, p95) | flush (median, p95) | flushes | file |\n|---|---|---|---|---|\n");
  for (int every : {1, 2, 5, 20}) {
    const std::string path = dir + "/hh_bench_run_writer.h5";
    hh::runs::RunWriterOptions options;
    options.overwrite = true;
    options.flush = {0, 0.0};  // flushes only where this loop asks
    auto writer = hh::runs::RunWriter::create(path, header, options);
    std::vector<double> appendMs, flushMs;
    const std::vector<double> table(size_t(L * H), 0.5);
    const std::vector<float> maps(size_t(P * S * S), 0.01f);
    const hh::runs::CurveRow curve{std::vector<double>(B, 0.1), std::vector<double>(B, 0.2), std::vector<double>(B, 0.3),
                                   std::vector<int64_t>(B, 4)};
    for (int s = 1; s <= steps; ++s) {
      auto t0 = Clock::now();
      writer.appendScalars(s, {{"loss", 1.0 / s}, {"lr", 1e-2}, {"step_seconds", 0.1}});
      if (s % 25 == 0) {  // an evaluation, as the distill job writes it
        for (const auto& t : l.tables) writer.appendTable(s, t.name, table);
        writer.appendSnapshot(s, maps, maps);
        writer.appendCurves(s, std::vector<hh::runs::CurveRow>(size_t(2 * P), curve));
        writer.appendScalars(s, {{"val_loss", 1.0}, {"kl_mean", 0.1}});
        writer.appendWeights(s, {{"layers.0.hedgehog.weight", std::vector<float>(H * 32 * 32, 1.0f)},
                                 {"layers.0.hedgehog.bias", std::vector<float>(H * 32, 0.0f)}});
      }
      appendMs.push_back(msSince(t0));
      if (s % every == 0) {
        t0 = Clock::now();
        writer.flush();
        flushMs.push_back(msSince(t0));
      }
    }
    writer.close();
    std::printf("| %d step%s | %.3f ms, %.3f ms | %.3f ms, %.3f ms | %zu | %.1f MiB |\n", every, every == 1 ? "" : "s",
                percentile(appendMs, 0.5), percentile(appendMs, 0.95), percentile(flushMs, 0.5), percentile(flushMs, 0.95),
                flushMs.size(), double(std::filesystem::file_size(path)) / (1 << 20));
    std::filesystem::remove(path);
  }
  return 0;
}

int main(int argc, char** argv) {
  return hh::bench::reportErrors(
      "hh_bench_run_writer", [&] { return benchMain(argc, argv); }, "[--steps N] [--dir DIR]");
}
