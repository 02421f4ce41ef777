// Private to engine/runs: RunReader's state (RunReader::Impl) and the row groups it reads, shared
// by run_reader.cpp (the accessors) and run_reader_load.cpp (opening and checking the groups).
#pragma once
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "engine/runs/h5_support.h"
#include "engine/runs/run_reader.h"

namespace hh::runs {

// One row group: its time and step columns and its payload columns, and how many rows are visible.
struct GroupRows {
  h5::Hid group;
  h5::Column time, step;
  std::vector<h5::Column> data;
  int64_t visible = 0;

  std::vector<h5::Column*> all() {
    std::vector<h5::Column*> out = {&time, &step};
    for (auto& c : data) out.push_back(&c);
    return out;
  }
};

struct PayloadIn {
  const char* name;
  hid_t memType;  // H5I_INVALID_HID = fixed-length string from the file
  size_t rank;    // expected dims per row
};

// Opens group `name` under `loc` with `payload`'s columns (checked against their ranks).
GroupRows openRows(hid_t loc, const std::string& name, const std::vector<PayloadIn>& payload, hid_t dapl,
                   const std::string& path);
// Re-reads extents (when `live`) and recomputes the visible row count, at most `committed`; true
// if it changed.
bool updateRows(GroupRows& r, int64_t committed, bool live, bool inProcessWriter, const std::string& path);

struct RunReader::Impl {
  std::string path;
  h5::Hid file, dapl;
  bool live = false;
  bool inProcessWriter = false;  // a RunWriter in this process has the file open (shared HDF5 file)
  int version = 0;
  RunHeader header;
  std::map<std::string, GroupRows> scalars, tables, weights;
  GroupRows snapshots, curves, logLines, status, exports;
  bool hasSnapshots = false, hasCurves = false;
  h5::Column committed;                                   // /committed_rows [G]
  std::vector<std::pair<std::string, GroupRows*>> order;  // groups in /committed_rows order

  // Reads /committed_rows and updates every group; true if any count changed.
  bool update(bool refresh) {
    if (refresh) h5::refreshColumn(committed, inProcessWriter, path);
    std::vector<int64_t> counts(committed.rows);
    h5::readRows(committed, 0, committed.rows, counts.data(), path);
    bool changed = false;
    for (size_t g = 0; g < order.size(); ++g)
      changed = updateRows(*order[g].second, counts[g], refresh, inProcessWriter, path) || changed;
    return changed;
  }

  ~Impl() {
    h5::Quiet quiet;
    order.clear();
    committed = h5::Column{};
    scalars.clear();
    tables.clear();
    weights.clear();
    for (GroupRows* r : {&snapshots, &curves, &logLines, &status, &exports}) *r = GroupRows{};
    if (file.valid()) H5Fclose(file.release());
  }

  const GroupRows& find(const std::map<std::string, GroupRows>& m, const std::string& name, const char* what) const {
    auto it = m.find(name);
    if (it == m.end())
      throw std::invalid_argument(std::string("run reader: no ") + what + " named '" + name + "' in '" + path + "'");
    return it->second;
  }

  void load();  // every group, checked (run_reader_load.cpp)
  void loadHeader(hid_t root);
  void loadScalarsAndTables();
  void loadSnapshots();
  void loadCurves();
  void loadWeights();
  void loadCommitted();  // the log, status and export groups, then /committed_rows and its order
  std::vector<StatusEntry> statusRows() const;
};

}  // namespace hh::runs
