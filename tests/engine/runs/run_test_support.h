// Shared by the engine.runs suites: a scratch folder, a sample layout, the values a test writer
// appends at each step (pure functions of the step, so a reader can check any row), and small
// helpers for expected exceptions and raw file bytes.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <vector>

#include "engine/runs/run_layout.h"
#include "engine/runs/run_writer.h"
#include "tests/support/temp_dir.h"

namespace hh::runs::testing {

// A fresh folder under the system temp dir, removed with everything in it on destruction.
class ScratchDir {
 public:
  ScratchDir() {
    std::string pattern = (hh::test::tempRoot() / "hh-runs-XXXXXX").string();
    if (!mkdtemp(pattern.data())) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

constexpr int kLayers = 2, kHeads = 3, kTokens = 10, kBins = 4;

// scalars loss, lr, val_loss; tables kl, entropy_softmax, entropy_linear, monotonicity [2, 3];
// snapshots of pairs (0,1), (1,2) on 10 tokens (S = T = 10 unless `snapshotSize`); curves of pairs
// (0,0), (1,1) with 4 bins; weights fm.weight [3, 4, 4] and fm.bias [3, 4].
inline RunHeader sampleHeader(const std::string& runId = "run-1", int snapshotSize = 0) {
  RunHeader h;
  h.runId = runId;
  h.kind = "distill";
  h.configJson = R"({"model": "tiny-gpt2", "lr": 0.001, "feature_map": "hedgehog"})";
  h.engineVersion = "0.1.0";
  h.device = "cpu";
  RunLayout& l = h.layout;
  l.scalars = {{"loss", "nat"}, "lr", {"val_loss", "nat"}};
  l.layers = kLayers;
  l.heads = kHeads;
  l.tables = {{"kl", "nat"}, {"entropy_softmax", "nat"}, {"entropy_linear", "nat"}, "monotonicity"};
  l.snapshots.pairs = {{0, 1}, {1, 2}};
  for (int i = 0; i < kTokens; ++i) l.snapshots.tokens.push_back(i == 3 ? " caf\xC3\xA9" : " t" + std::to_string(i));
  l.snapshots.size = snapshotSize;
  l.curves.pairs = {{0, 0}, {1, 1}};
  l.curves.bins = kBins;
  l.curves.labels = {"softmax", "linear"};
  l.weights = {{"fm.weight", {3, 4, 4}}, {"fm.bias", {3, 4}}};
  return h;
}

inline double lossAt(int64_t step) {
  return 5.0 / (1.0 + 0.01 * double(step));
}
inline double lrAt(int64_t step) {
  return 1e-3 * std::pow(0.999, double(step));
}

// [L, H] for table `which` at `step`.
inline std::vector<double> tableAt(int64_t step, int which) {
  std::vector<double> v(kLayers * kHeads);
  for (int l = 0; l < kLayers; ++l)
    for (int h = 0; h < kHeads; ++h) v[l * kHeads + h] = double(step) + 10.0 * which + l + 0.125 * h;
  return v;
}

// [P, S, S] maps for `step`; `offset` separates softmax (0) from linear (1).
inline std::vector<float> mapsAt(int64_t step, int pairs, int size, int offset) {
  std::vector<float> v(size_t(pairs) * size * size);
  for (size_t i = 0; i < v.size(); ++i) v[i] = float(step) + 0.5f * offset + 0.001f * float(i);
  return v;
}

inline std::vector<CurveRow> curvesAt(int64_t step) {
  std::vector<CurveRow> rows(2);
  for (int p = 0; p < 2; ++p)
    for (int b = 0; b < kBins; ++b) {
      rows[p].binCenters.push_back(-1.0 + 0.5 * b);
      rows[p].mean.push_back(0.01 * double(step) + 0.1 * b + p);
      rows[p].stddev.push_back(0.001 * b);
      rows[p].count.push_back(step + b + 100 * p);
    }
  return rows;
}

inline std::vector<float> weightAt(int64_t step, size_t n) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = float(step) * 0.25f - float(i);
  return v;
}

inline bool has(const std::string& text, const std::string& needle) {
  return text.find(needle) != std::string::npos;
}

// "!" + the message of the exception of type E that fn throws; "" if it throws nothing or another type.
template <typename E>
std::string errorOf(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const E& e) {
    return std::string("!") + e.what();
  } catch (...) {
    return {};
  }
  return {};
}

// Verifies that `expr` throws E with `needle` in its message.
#define QVERIFY_THROWS(E, expr, needle)                                                                   \
  do {                                                                                                    \
    const std::string hhMsg = errorOf<E>([&] { expr; });                                                  \
    QVERIFY2(!hhMsg.empty() && has(hhMsg, needle), (std::string(#expr) + " -> '" + hhMsg + "'").c_str()); \
  } while (0)

inline void writeBytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), std::streamsize(bytes.size()));
}

inline std::string readBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

}  // namespace hh::runs::testing
