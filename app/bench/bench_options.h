// The command lines of hh_bench_attention and hh_bench_decode, parsed without Torch so that
// app.cli.bench_options can check them: every option needs its value, every count is an integer of
// at least 1 (0 repeats or steps crashed the benchmarks), and an unknown option is refused
// (UsageError: the benchmark prints it with the usage and exits 2).
#pragma once
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "app/bench/bench_args.h"

namespace hh::bench {

// hh_bench_attention
struct AttentionOptions {
  std::vector<int64_t> lengths = {1024, 2048, 4096, 8192, 16384};
  int repeats = 3;
  int64_t softmaxMax = 8192, batch = 1, heads = 12, dim = 64, chunk = 64;
  int64_t plainMax = std::numeric_limits<int64_t>::max();  // the plain loop only up to this length
  std::string device = "auto", dtype = "float32";
};

inline constexpr const char* kAttentionUsage =
    "[--lengths 1024,2048,...] [--repeats N] [--softmax-max N] [--plain-max N] [--batch B] [--heads H] [--dim D] "
    "[--chunk C] [--device auto|cpu|cuda[:N]] [--dtype float32|bfloat16]";

inline void checkBenchDtype(const std::string& dtype) {
  if (dtype != "float32" && dtype != "bfloat16")
    throw UsageError("--dtype must be float32 or bfloat16 (got " + dtype + ")");
}

inline AttentionOptions parseAttentionOptions(int argc, char** argv) {
  AttentionOptions o;
  constexpr int64_t kAny = std::numeric_limits<int64_t>::max();
  parseOptions(argc, argv, [&o](const std::string& key, const std::string& val) {
    if (key == "--lengths")
      o.lengths = parseCounts(key, val);
    else if (key == "--repeats")
      o.repeats = static_cast<int>(parseCount(key, val));
    else if (key == "--softmax-max")
      o.softmaxMax = parseCount(key, val, 0, kAny);  // 0: no softmax column
    else if (key == "--plain-max")
      o.plainMax = parseCount(key, val, 0, kAny);  // 0: no plain loop
    else if (key == "--batch")
      o.batch = parseCount(key, val);
    else if (key == "--heads")
      o.heads = parseCount(key, val);
    else if (key == "--dim")
      o.dim = parseCount(key, val);
    else if (key == "--chunk")
      o.chunk = parseCount(key, val);
    else if (key == "--device")
      o.device = val;
    else if (key == "--dtype")
      o.dtype = val;
    else
      return false;
    return true;
  });
  checkBenchDtype(o.dtype);
  return o;
}

// hh_bench_decode
struct DecodeOptions {
  std::vector<int64_t> positions = {512, 2048, 8192, 32768};
  std::vector<std::string> shapes = {"demo", "gpt2-small"};
  int steps = 16;
  int64_t batch = 1;
  std::string device = "auto", dtype = "float32";
};

inline constexpr const char* kDecodeUsage =
    "[--positions 512,2048,8192,32768] [--steps 16] [--shapes demo,gpt2-small] [--batch B] "
    "[--device auto|cpu|cuda[:N]] [--dtype float32|bfloat16]";

inline DecodeOptions parseDecodeOptions(int argc, char** argv) {
  DecodeOptions a;
  parseOptions(argc, argv, [&a](const std::string& key, const std::string& val) {
    if (key == "--positions")
      a.positions = parseCounts(key, val);
    else if (key == "--steps")
      a.steps = static_cast<int>(parseCount(key, val));
    else if (key == "--shapes")
      a.shapes = parseNames(val);
    else if (key == "--batch")
      a.batch = parseCount(key, val);
    else if (key == "--device")
      a.device = val;
    else if (key == "--dtype")
      a.dtype = val;
    else
      return false;
    return true;
  });
  if (a.shapes.empty()) throw UsageError("--shapes needs at least one shape");
  checkBenchDtype(a.dtype);
  return a;
}

}  // namespace hh::bench
