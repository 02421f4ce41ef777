// The groups of a new run file, created empty (schema in docs/run_file.md): the root's
// attributes, /scalars, /tables, /snapshots, /curves, /weights, the text groups (/log, /status,
// /export) and /committed_rows. Each appendable group holds `time` (float64, Unix seconds, fill
// NaN), `step` (int64) and its payload columns. Internal to engine/runs (RunWriter builds a file
// with them); every HDF5 failure throws RunFileError naming `path`.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "engine/runs/h5_support.h"
#include "engine/runs/run_writer.h"

namespace hh::runs {

// One appendable group: time, step and payload columns.
struct Rows {
  h5::Hid group;
  h5::Column time, step;
  std::vector<h5::Column> data;
};

// A column of a text group: its name, fixed-size string type and rows per chunk.
struct TextColumn {
  std::string name;
  hid_t type;
  hsize_t chunkRows;
};

void writeRootAttributes(hid_t file, const RunHeader& header, const std::string& path);
// /scalars/NAME: value [N] float64
std::map<std::string, Rows> createScalarGroups(hid_t file, const std::vector<SeriesSpec>& scalars,
                                               const std::string& path);
// /tables/NAME: value [N, L, H] float64; layer [L], head [H] index axes
std::map<std::string, Rows> createTableGroups(hid_t file, const RunLayout& layout, const std::string& path);
// /snapshots: softmax, linear [N, P, S, S] float32; pairs [P, 2]; tokens [T]; query/key_edge [S + 1]
Rows createSnapshotGroup(hid_t file, const SnapshotSpec& spec, const std::string& path);
// /curves: bin_center, mean, stddev [N, P, B] float64, count [N, P, B] int64; pairs [P, 2]
Rows createCurveGroup(hid_t file, const CurveSpec& spec, const std::string& path);
// /weights/NAME: value [N, shape...] float32
std::map<std::string, Rows> createWeightGroups(hid_t file, const std::vector<TensorSpec>& weights,
                                               const std::string& path);
// /NAME with fixed-size string columns (/log: text S512; /status: state S16, message S1024;
// /export: path S4096).
Rows createTextGroup(hid_t file, const std::string& name, const std::vector<TextColumn>& columns,
                     const std::string& path);
// /committed_rows: int64 [G], chunked, with `groups` [G] naming the groups it counts.
h5::Hid createCommittedRows(hid_t file, const std::vector<std::string>& groups, const std::string& path);

}  // namespace hh::runs
