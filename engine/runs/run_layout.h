// Run files (docs/design.md, "Runs in HDF5"): the plain-data description of a run that the writer
// declares up front and the reader reconstructs. No HDF5, no Torch, no Qt: values travel as
// std::vector<float|double> with the shapes stated here. The on-disk schema (version
// kSchemaVersion) is written down in docs/run_file.md.
//
// Letters: N rows (appends so far), L layers, H heads, P (layer, head) pairs, T probe tokens,
// S stored snapshot side (S <= T), B curve bins.
#pragma once
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace hh::runs {

constexpr int kSchemaVersion = 1;
constexpr int kDefaultMaxSnapshotSize = 128;  // S = min(T, 128) when SnapshotSpec::size is 0

// Fixed-length string fields (bytes, UTF-8, NUL-padded). Longer text is cut at a UTF-8 boundary.
constexpr int kStatusBytes = 16;
constexpr int kMessageBytes = 1024;
constexpr int kLogLineBytes = 512;
constexpr int kPathBytes = 4096;

// Every HDF5 failure and every malformed or foreign file: the message names the file and what
// failed, followed by HDF5's own reason where it gave one.
class RunFileError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

enum class RunStatus { Running, Completed, Failed, Cancelled };
const char* statusName(RunStatus status);        // "running", "completed", ...
RunStatus parseStatus(const std::string& name);  // throws std::invalid_argument
inline bool isTerminal(RunStatus s) {
  return s != RunStatus::Running;
}

// A named series with optional units (HDF5 `units` attribute on its values).
struct SeriesSpec {
  std::string name;
  std::string units;
  SeriesSpec() = default;
  SeriesSpec(const char* n) : name(n) {}  // NOLINT: lets {"loss", "lr"} initialise a list
  SeriesSpec(std::string n, std::string u = {}) : name(std::move(n)), units(std::move(u)) {}
};

struct LayerHead {
  int layer = 0;
  int head = 0;
  bool operator==(const LayerHead& o) const { return layer == o.layer && head == o.head; }
};

// Attention snapshots on a fixed probe text: for each pair, the softmax and the linear map,
// average-pooled from [T, T] to [S, S] (see poolEdges).
struct SnapshotSpec {
  std::vector<LayerHead> pairs;     // P
  std::vector<std::string> tokens;  // T probe token strings
  int size = 0;                     // S; 0 = min(T, kDefaultMaxSnapshotSize)
  bool enabled() const { return !pairs.empty(); }
  int tokenCount() const { return static_cast<int>(tokens.size()); }
  int storedSize() const;  // S after resolving 0
};

// Monotonicity curves (hh::metrics::monotonicityCurve) for chosen pairs, B bins each. A pair may
// appear more than once when its curves measure different weights; labels then say which (e.g.
// "softmax" and "linear" for a distillation's teacher and student on the same head).
struct CurveSpec {
  std::vector<LayerHead> pairs;     // P
  int bins = 0;                     // B
  std::vector<std::string> labels;  // [P] or empty (no labels)
  bool enabled() const { return !pairs.empty(); }
};

// A tensor stored at checkpoints (feature-map weights): row-major, float32.
struct TensorSpec {
  std::string name;
  std::vector<int64_t> shape;  // every dim >= 1; [] = a scalar
  int64_t numel() const;
};

// Everything a run will ever append, declared before the file switches to SWMR (no object can be
// created afterwards).
struct RunLayout {
  std::vector<SeriesSpec> scalars;  // e.g. loss, lr, kl_mean, val_loss, perplexity
  int layers = 0;                   // L of every table
  int heads = 0;                    // H of every table
  std::vector<SeriesSpec> tables;   // e.g. kl, entropy_softmax, entropy_linear, monotonicity: [L, H] per row
  SnapshotSpec snapshots;
  CurveSpec curves;
  std::vector<TensorSpec> weights;
};

struct RunHeader {
  std::string runId;
  std::string kind;        // distill, finetune, evaluate, train, ...
  std::string configJson;  // the full job config
  std::string engineVersion;
  std::string device;          // "cpu", "cuda:0 (NAME)"
  std::string startTime;       // ISO 8601 UTC; the writer fills it in when empty
  double startTimeUnix = 0.0;  // seconds since 1970-01-01T00:00:00Z; the writer fills it in when 0
  RunLayout layout;
};

// Throws std::invalid_argument naming the first problem: empty/duplicate names or names with '/',
// tables without L, H >= 1, pairs outside [0, L) x [0, H) (when L, H are set), S outside [1, T],
// curves without bins, tensor dims < 1.
void validateLayout(const RunLayout& layout);

// Snapshot pooling from [T, T] to [S, S]: bin i covers tokens [edges[i], edges[i + 1]) with
// edges[i] = floor(i * T / S) (S + 1 entries, edges[0] = 0, edges[S] = T); a stored value is the
// mean of the valid pairs of its block, NaN when it has none. NaN pairs are masked; a map whose
// pairs above the diagonal are all 0 or NaN is causal (isCausalMap) and those pairs are masked
// too, so a diagonal block is not diluted by the zeros of the future and a block wholly above
// the diagonal is NaN. S == T copies (a causal map's upper triangle becomes NaN).
std::vector<int> poolEdges(int tokens, int size);
// maps: [count, T, T] -> [count, S, S]
std::vector<float> poolMaps(const std::vector<float>& maps, int count, int tokens, int size);
// Whether a [T, T] map (row = query) has only 0 or NaN above the diagonal: causal attention.
bool isCausalMap(const float* map, int tokens);

// Current time: ISO 8601 UTC ("2024-05-01T12:34:56Z") and Unix seconds.
std::string isoTimeUtc(double unixSeconds);
double unixNow();

}  // namespace hh::runs
