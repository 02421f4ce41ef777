// Layout validation, status names, snapshot pooling and time stamps (see run_layout.h).
#include "engine/runs/run_layout.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <limits>
#include <set>

namespace hh::runs {

namespace {
const char* const kStatusNames[] = {"running", "completed", "failed", "cancelled"};

void checkName(const std::string& what, const std::string& name, std::set<std::string>& seen) {
  if (name.empty()) throw std::invalid_argument("run layout: empty " + what + " name");
  if (name.find('/') != std::string::npos || name == "." || name == "..")
    throw std::invalid_argument("run layout: " + what + " name '" + name + "' may not contain '/' or be '.'/'..'");
  if (!seen.insert(name).second) throw std::invalid_argument("run layout: duplicate " + what + " name '" + name + "'");
}

void checkPairs(const std::string& what, const std::vector<LayerHead>& pairs, const RunLayout& layout) {
  for (const auto& p : pairs) {
    const bool negative = p.layer < 0 || p.head < 0;
    const bool outside = layout.layers > 0 && layout.heads > 0 && (p.layer >= layout.layers || p.head >= layout.heads);
    if (negative || outside)
      throw std::invalid_argument("run layout: " + what + " pair (layer " + std::to_string(p.layer) + ", head " +
                                  std::to_string(p.head) + ") is outside " + std::to_string(layout.layers) +
                                  " layers x " + std::to_string(layout.heads) + " heads");
  }
}
}  // namespace

const char* statusName(RunStatus status) {
  return kStatusNames[static_cast<int>(status)];
}

RunStatus parseStatus(const std::string& name) {
  for (int i = 0; i < 4; ++i)
    if (name == kStatusNames[i]) return static_cast<RunStatus>(i);
  throw std::invalid_argument("unknown run status '" + name + "' (expected running, completed, failed or cancelled)");
}

int SnapshotSpec::storedSize() const {
  if (size > 0) return size;
  return std::min(tokenCount(), kDefaultMaxSnapshotSize);
}

int64_t TensorSpec::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

void validateLayout(const RunLayout& layout) {
  std::set<std::string> scalarNames, tableNames, weightNames;
  for (const auto& s : layout.scalars) checkName("scalar", s.name, scalarNames);
  for (const auto& t : layout.tables) checkName("table", t.name, tableNames);
  if (!layout.tables.empty() && (layout.layers < 1 || layout.heads < 1))
    throw std::invalid_argument("run layout: tables need layers >= 1 and heads >= 1 (got " +
                                std::to_string(layout.layers) + " x " + std::to_string(layout.heads) + ")");
  if (layout.layers < 0 || layout.heads < 0) throw std::invalid_argument("run layout: negative layers or heads");

  const SnapshotSpec& snap = layout.snapshots;
  if (snap.enabled()) {
    checkPairs("snapshot", snap.pairs, layout);
    const int t = snap.tokenCount(), s = snap.storedSize();
    if (t < 1) throw std::invalid_argument("run layout: snapshots need at least one probe token");
    if (s < 1 || s > t)
      throw std::invalid_argument("run layout: snapshot size S = " + std::to_string(s) +
                                  " must be in [1, T = " + std::to_string(t) + "]");
  }
  if (layout.curves.enabled()) {
    checkPairs("curve", layout.curves.pairs, layout);
    if (layout.curves.bins < 1) throw std::invalid_argument("run layout: curves need bins >= 1");
    if (!layout.curves.labels.empty() && layout.curves.labels.size() != layout.curves.pairs.size())
      throw std::invalid_argument("run layout: curve labels must be one per pair (" +
                                  std::to_string(layout.curves.pairs.size()) + "), got " +
                                  std::to_string(layout.curves.labels.size()));
  }
  for (const auto& w : layout.weights) {
    checkName("weight", w.name, weightNames);
    for (int64_t d : w.shape)
      if (d < 1) throw std::invalid_argument("run layout: weight '" + w.name + "' has a dimension < 1");
    if (w.numel() > (int64_t{1} << 31)) throw std::invalid_argument("run layout: weight '" + w.name + "' is too large");
  }
}

std::vector<int> poolEdges(int tokens, int size) {
  if (size < 1 || size > tokens) throw std::invalid_argument("poolEdges: need 1 <= S <= T");
  std::vector<int> edges(size + 1);
  for (int i = 0; i <= size; ++i) edges[i] = static_cast<int>(int64_t{i} * tokens / size);
  return edges;
}

bool isCausalMap(const float* map, int tokens) {
  const size_t t = tokens;
  for (size_t r = 0; r < t; ++r)
    for (size_t c = r + 1; c < t; ++c)
      if (!(map[r * t + c] == 0.0f) && !std::isnan(map[r * t + c])) return false;
  return true;
}

namespace {

// The mean of the valid pairs of one block: not NaN, and on or below the diagonal for a causal
// map; NaN when the block has none.
float blockMean(const float* src, size_t t, int r0, int r1, int c0, int c1, bool causal) {
  double sum = 0.0;
  size_t valid = 0;
  for (int r = r0; r < r1; ++r) {
    const int cEnd = causal ? std::min(c1, r + 1) : c1;
    for (int c = c0; c < cEnd; ++c) {
      const float v = src[r * t + c];
      if (std::isnan(v)) continue;
      sum += v;
      ++valid;
    }
  }
  return valid > 0 ? static_cast<float>(sum / double(valid)) : std::numeric_limits<float>::quiet_NaN();
}

}  // namespace

std::vector<float> poolMaps(const std::vector<float>& maps, int count, int tokens, int size) {
  // maps: [count, T, T] -> [count, S, S]; block means accumulated in double.
  const size_t t = tokens, s = size;
  if (maps.size() != count * t * t)
    throw std::invalid_argument("poolMaps: expected " + std::to_string(count * t * t) + " values ([" +
                                std::to_string(count) + ", " + std::to_string(t) + ", " + std::to_string(t) +
                                "]), got " + std::to_string(maps.size()));
  const std::vector<int> edges = poolEdges(tokens, size);
  std::vector<float> out(count * s * s);
  for (size_t m = 0; m < static_cast<size_t>(count); ++m) {
    const float* src = maps.data() + m * t * t;
    const bool causal = t > 1 && isCausalMap(src, tokens);
    float* dst = out.data() + m * s * s;
    for (size_t i = 0; i < s; ++i)
      for (size_t j = 0; j < s; ++j)
        dst[i * s + j] = blockMean(src, t, edges[i], edges[i + 1], edges[j], edges[j + 1], causal);
  }
  return out;
}

double unixNow() {
  using namespace std::chrono;
  return duration_cast<duration<double>>(system_clock::now().time_since_epoch()).count();
}

std::string isoTimeUtc(double unixSeconds) {
  const std::time_t t = static_cast<std::time_t>(unixSeconds);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return text;
}

}  // namespace hh::runs
