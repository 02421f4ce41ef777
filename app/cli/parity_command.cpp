// `hedgehog parity`: every feature map x rule x form against the fp64 brute force.
#include <cstdio>
#include <iostream>

#include "app/cli/commands.h"
#include "engine/core/device.h"
#include "engine/core/runtime.h"
#include "engine/parity/parity_check.h"

namespace hh::cli {

namespace {
struct ParityArgs {
  std::vector<int64_t> lengths = {37, 131};
  std::vector<std::string> dtypes = {"float32", "float64", "bfloat16"};
  std::vector<std::string> maps;
  std::vector<std::string> rules;
  int64_t headDim = 16;
  int64_t chunk = 16;
  uint64_t seed = 1234;
  std::string device;
};

int runParityCommand(const ParityArgs& a) {
  hh::initRuntime();
  parity::ParityOptions o;
  o.lengths = a.lengths;
  o.dtypes = a.dtypes;
  o.headDim = a.headDim;
  o.chunkSize = a.chunk;
  o.seed = a.seed;
  o.device = resolveDevice(a.device.empty() ? "cpu" : a.device);
  if (!a.maps.empty()) {
    o.featureMaps.clear();
    for (const auto& m : a.maps) o.featureMaps.push_back(attn::parseFeatureMapKind(m));
  }
  if (!a.rules.empty()) {
    o.rules.clear();
    for (const auto& r : a.rules) o.rules.push_back(attn::parseUpdateRule(r));
  }
  std::printf("%-17s %-9s %-7s %-10s %-9s %5s %12s %12s  %s\n", "feature_map", "rule", "causal", "form", "dtype",
              "T", "max_abs_err", "rel_err", "ok");
  int failures = 0, total = 0;
  double worst32 = 0.0, worst64 = 0.0;
  parity::runParity(o, [&](const parity::ParityRow& r) {
    const bool ok = r.relError <= parity::toleranceFor(r.dtype);
    ++total;
    failures += ok ? 0 : 1;
    // A NaN row is the worst there is (std::max would keep the old value).
    if (r.dtype == "float32" && !(r.relError <= worst32)) worst32 = r.relError;
    if (r.dtype == "float64" && !(r.relError <= worst64)) worst64 = r.relError;
    std::printf("%-17s %-9s %-7s %-10s %-9s %5lld %12.3e %12.3e  %s\n", r.featureMap.c_str(), r.rule.c_str(),
                r.causal ? "causal" : "full", r.form.c_str(), r.dtype.c_str(), static_cast<long long>(r.length),
                r.maxAbsError, r.relError, ok ? "ok" : "FAIL");
    std::fflush(stdout);
  });
  std::printf("\n%d rows, %d over tolerance (float64 %.0e, float32 %.0e, bfloat16 %.0e); worst relative error: "
              "float32 %.2e, float64 %.2e\n",
              total, failures, parity::toleranceFor("float64"), parity::toleranceFor("float32"),
              parity::toleranceFor("bfloat16"), worst32, worst64);
  return failures == 0 ? 0 : 2;  // a mismatch, as forward --compare says one (1 is bad input)
}
}  // namespace

void addParityCommand(CLI::App& app) {
  auto args = std::make_shared<ParityArgs>();
  auto* cmd = app.add_subcommand("parity", "Check every attention form against an fp64 brute-force reference");
  cmd->add_option("--lengths", args->lengths, "Sequence lengths (odd, not multiples of the chunk)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t(1), int64_t(1) << 16));
  cmd->add_option("--dtypes", args->dtypes, "float32, float64, bfloat16")->capture_default_str();
  cmd->add_option("--maps", args->maps, "Feature maps (default: all)");
  cmd->add_option("--rules", args->rules, "Update rules (default: all)");
  cmd->add_option("--head-dim", args->headDim, "Head dimension D")
      ->capture_default_str()
      ->check(CLI::Range(int64_t(1), int64_t(4096)));
  cmd->add_option("--chunk", args->chunk, "Chunk size of the chunked form")
      ->capture_default_str()
      ->check(CLI::Range(int64_t(1), int64_t(4096)));
  cmd->add_option("--seed", args->seed, "Random seed")->capture_default_str();
  cmd->add_option("--device", args->device,
                  "cpu (default) | cuda | cuda:N: where the forms run (the fp64 reference stays on the CPU); with "
                  "--head-dim 32, 64 or 128 the \"layer\" rows take the fused CUDA kernels of a HH_CUDA_KERNELS build");
  cmd->callback([args] {
    const int rc = runParityCommand(*args);
    if (rc != 0) throw CLI::RuntimeError(rc);  // 2: rows over tolerance, the table says which
  });
}

}  // namespace hh::cli
