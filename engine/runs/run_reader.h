// RunReader: reads a run file while its writer appends (HDF5 SWMR read) or after it finished,
// crashed or was killed. open() reconstructs the header and layout from the file; refresh() picks
// up rows the writer has flushed since; getters return what is visible now (never a half-written
// row). Schema: docs/run_file.md. Every failure (missing, foreign, truncated or garbage file,
// unreadable dataset) throws RunFileError naming the file. One reader object per thread.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/runs/run_layout.h"
#include "engine/runs/run_writer.h"

namespace hh::runs {

struct ScalarSeries {
  std::vector<int64_t> steps;  // [N]
  std::vector<double> times;   // [N] Unix seconds
  std::vector<double> values;  // [N]
};

struct TableSeries {
  int layers = 0, heads = 0;   // L, H
  std::vector<int64_t> steps;  // [N]
  std::vector<double> times;   // [N]
  std::vector<double> values;  // [N, L, H] row-major
  size_t size() const { return steps.size(); }
  double at(size_t row, int layer, int head) const { return values[(row * layers + layer) * heads + head]; }
};

struct Snapshot {
  int64_t step = 0;
  double time = 0.0;
  int size = 0;                // S
  std::vector<float> softmax;  // [P, S, S]
  std::vector<float> linear;   // [P, S, S]; NaN where the writer had none
};

struct CurveSet {
  int64_t step = 0;
  double time = 0.0;
  std::vector<CurveRow> curves;  // [P], B bins each
};

struct WeightCheckpoint {
  int64_t step = 0;
  double time = 0.0;
  std::vector<int64_t> shape;
  std::vector<float> values;  // row-major, shape's product
};

struct LogLine {
  int64_t step = -1;
  double time = 0.0;
  std::string text;
};

struct StatusEntry {
  int64_t step = -1;  // last step appended before the change
  double time = 0.0;
  RunStatus status = RunStatus::Running;
  std::string message;
};

struct ExportEntry {
  int64_t step = -1;
  double time = 0.0;
  std::string path;
};

class RunReader {
 public:
  // SWMR-read open first (works while a writer appends, after a crash, and on a closed file),
  // then a plain read-only open.
  static RunReader open(const std::string& path);

  RunReader();
  RunReader(RunReader&&) noexcept;
  RunReader& operator=(RunReader&&) noexcept;
  ~RunReader();

  // Re-reads every dataset's extent (H5Drefresh). True when any row count changed.
  bool refresh();

  const std::string& path() const;
  bool live() const;  // opened in SWMR-read mode
  int schemaVersion() const;
  const RunHeader& header() const;  // the writer's header; layout as found in the file

  RunStatus status() const;  // the last status row
  std::string statusMessage() const;
  std::vector<StatusEntry> statusHistory() const;
  double endTime() const;  // time of the terminal status row; NaN while running
  // Whether a writer still has the file open (an advisory lock it holds, see docs/run_file.md). A
  // run whose status is running with no active writer was interrupted (crash, kill, power loss).
  bool writerActive() const;
  bool interrupted() const { return status() == RunStatus::Running && !writerActive(); }
  std::string exportPath() const;  // last export row; empty if none
  std::vector<ExportEntry> exports() const;

  // Series from row `from` on (for incremental live plots); unknown names throw std::invalid_argument.
  int64_t scalarRows(const std::string& name) const;
  ScalarSeries scalars(const std::string& name, int64_t from = 0) const;
  int64_t tableRows(const std::string& name) const;
  TableSeries table(const std::string& name, int64_t from = 0) const;

  // Indexed records: index in [0, count); a negative index counts from the end (-1 = latest).
  // Out-of-range indices throw std::out_of_range.
  int64_t snapshotCount() const;
  std::vector<int64_t> snapshotSteps() const;
  Snapshot snapshot(int64_t index) const;
  int64_t curveCount() const;
  std::vector<int64_t> curveSteps() const;
  CurveSet curves(int64_t index) const;
  int64_t weightCount(const std::string& name) const;
  std::vector<int64_t> weightSteps(const std::string& name) const;
  WeightCheckpoint weights(const std::string& name, int64_t index) const;

  int64_t logCount() const;
  std::vector<LogLine> logLines(int64_t from = 0) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace hh::runs
