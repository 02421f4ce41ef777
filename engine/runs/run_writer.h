// RunWriter: the single writer of one run file (HDF5, SWMR). create() builds every group,
// dataset and attribute the layout declares, then switches the file to SWMR writing; from then on
// it only appends rows, so readers in other processes (the workbench) see a consistent file at
// every moment and a killed job leaves every row up to the last flush. Schema: docs/run_file.md.
//
// Appends are buffered by HDF5 and reach the file on flush(): automatically every
// FlushPolicy::everyAppends appends or everySeconds seconds (checked on each append), on every
// status change, on setFinal and on close. Not thread-safe: one thread writes (other threads and
// processes read through RunReader).
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine/runs/run_layout.h"

namespace hh::runs {

struct FlushPolicy {
  int everyAppends = 64;      // flush after this many appends (0 = never by count)
  // Flush when the last flush is this old at an append (0 = never by time). 0.2 s: a dashboard
  // following the file sees it change 5 times a second; a flush costs about 0.05 ms
  // (hh_bench_run_writer, docs/performance.md), 0.03 % of a 100 ms step at this rate.
  double everySeconds = 0.2;
};

struct RunWriterOptions {
  FlushPolicy flush;
  bool overwrite = false;  // replace an existing file at `path` (otherwise creating it fails)
};

// One monotonicity curve (hh::metrics::MonotonicityCurve's fields), B entries each.
struct CurveRow {
  std::vector<double> binCenters;  // [B]
  std::vector<double> mean;        // [B]
  std::vector<double> stddev;      // [B]
  std::vector<int64_t> count;      // [B]; empty = unknown (stored as -1)
};

class RunWriter {
 public:
  // Creates the file (parent folder must exist), records the header as root attributes, builds the
  // layout, appends the first status row ("running") and starts SWMR. Throws std::invalid_argument
  // for a bad layout, RunFileError for anything HDF5 refuses (existing file, unwritable folder...).
  static RunWriter create(const std::string& path, const RunHeader& header, const RunWriterOptions& options = {});

  RunWriter();
  RunWriter(RunWriter&&) noexcept;
  RunWriter& operator=(RunWriter&&) noexcept;
  ~RunWriter();  // close(), swallowing errors; the status is left as it is

  // One row per named series (a subset of the layout's scalars); unknown names throw
  // std::invalid_argument before anything is written.
  void appendScalars(int64_t step, const std::map<std::string, double>& values);
  void appendScalar(int64_t step, const std::string& name, double value);
  // values: [L, H] row-major (values[l * H + h]).
  void appendTable(int64_t step, const std::string& name, const std::vector<double>& values);
  // softmax, linear: [P, S, S], or [P, T, T] which is pooled to [P, S, S] (poolMaps); pairs in the
  // layout's order. `linear` may be empty (stored as NaN), e.g. before any feature map exists.
  void appendSnapshot(int64_t step, const std::vector<float>& softmax, const std::vector<float>& linear);
  // curves: P entries in the layout's pair order, each with B bins.
  void appendCurves(int64_t step, const std::vector<CurveRow>& curves);
  // A subset of the layout's tensors, each flat row-major with exactly numel() values.
  void appendWeights(int64_t step, const std::map<std::string, std::vector<float>>& tensors);
  // One log line (cut to kLogLineBytes at a UTF-8 boundary); step -1 = not tied to a step.
  void log(const std::string& line, int64_t step = -1);

  // Appends a status row (and flushes). From running to any status; a terminal status (completed,
  // failed, cancelled) is final: changing it throws std::logic_error. Message cut to kMessageBytes.
  void setStatus(RunStatus status, const std::string& message = {});
  // Records where the final weights were exported (a safetensors file or a Hugging Face-style
  // folder); may be called more than once, the last row wins. Path cut to kPathBytes.
  void setFinal(const std::string& exportPath, int64_t step = -1);

  void flush();
  // Flushes and closes; later calls are no-ops. Appending after close throws std::logic_error.
  void close();

  bool isOpen() const;
  const std::string& path() const;
  const RunLayout& layout() const;  // as declared at create()
  RunStatus status() const;
  int64_t flushCount() const;  // H5Fflush calls so far

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace hh::runs
