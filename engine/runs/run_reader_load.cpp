// RunReader's opening of a run file's groups (see run_reader.h; schema in docs/run_file.md): each
// group's columns opened and their shapes checked against the layout, every group listed once in
// /committed_rows. Anything else is a RunFileError naming the file.
#include <cmath>

#include "engine/runs/run_reader_impl.h"

namespace hh::runs {
namespace {

std::vector<LayerHead> readPairs(hid_t group, const std::string& path) {
  std::vector<hsize_t> dims;
  const std::vector<char> raw = h5::readFixed(group, "pairs", H5T_NATIVE_INT64, dims, path);
  if (dims.size() != 2 || dims[1] != 2) throw RunFileError("run file '" + path + "': 'pairs' is not [P, 2]");
  const auto* v = reinterpret_cast<const int64_t*>(raw.data());
  std::vector<LayerHead> pairs(dims[0]);
  for (size_t i = 0; i < pairs.size(); ++i) pairs[i] = {int(v[2 * i]), int(v[2 * i + 1])};
  return pairs;
}

std::string optionalString(hid_t obj, const char* name, const std::string& path) {
  return h5::hasAttr(obj, name) ? h5::stringAttr(obj, name, path) : std::string();
}
}  // namespace

GroupRows openRows(hid_t loc, const std::string& name, const std::vector<PayloadIn>& payload, hid_t dapl,
                   const std::string& path) {
  GroupRows r;
  r.group = h5::openGroup(loc, name, path);
  for (const auto& p : payload) {
    h5::Column c = p.memType == H5I_INVALID_HID ? h5::openStringColumn(r.group, p.name, dapl, path)
                                                : h5::openColumn(r.group, p.name, p.memType, dapl, path);
    if (c.row.size() != p.rank)
      throw RunFileError("run file '" + path + "': dataset '" + name + "/" + p.name + "' has " +
                         std::to_string(c.row.size() + 1) + " dimensions, expected " + std::to_string(p.rank + 1));
    r.data.push_back(std::move(c));
  }
  r.step = h5::openColumn(r.group, "step", H5T_NATIVE_INT64, dapl, path);
  r.time = h5::openColumn(r.group, "time", H5T_NATIVE_DOUBLE, dapl, path);
  if (!r.step.row.empty() || !r.time.row.empty())
    throw RunFileError("run file '" + path + "': '" + name + "/step' and '" + name + "/time' must be 1-D");
  return r;
}

// Re-reads extents (when `live`) and recomputes the visible row count, at most `committed`; true
// if it changed.
bool updateRows(GroupRows& r, int64_t committed, bool live, bool inProcessWriter, const std::string& path) {
  hsize_t n = hsize_t(std::max<int64_t>(committed, 0));
  for (h5::Column* c : r.all()) {
    if (live) h5::refreshColumn(*c, inProcessWriter, path);
    n = std::min(n, c->rows);
  }
  while (n > 0) {
    double t = 0.0;
    h5::readRows(r.time, n - 1, 1, &t, path);
    if (!std::isnan(t)) break;
    --n;
  }
  const bool changed = int64_t(n) != r.visible;
  r.visible = int64_t(n);
  return changed;
}

void RunReader::Impl::load() {
  const std::string& p = path;
  h5::Hid root = h5::openGroup(file, "/", p);
  if (!h5::hasAttr(root, "schema_version"))
    throw RunFileError("run file '" + p + "': not a Hedgehog run file (no 'schema_version' attribute at the root)");
  version = int(h5::intAttr(root, "schema_version", p));
  if (version < 1 || version > kSchemaVersion)
    throw RunFileError("run file '" + p + "': schema version " + std::to_string(version) +
                       " is not supported (this build reads versions 1 to " + std::to_string(kSchemaVersion) + ")");
  loadHeader(root);
  loadScalarsAndTables();
  loadSnapshots();
  loadCurves();
  loadWeights();
  loadCommitted();
  update(false);
}

void RunReader::Impl::loadHeader(hid_t root) {
  const std::string& p = path;
  header.runId = h5::stringAttr(root, "run_id", p);
  header.kind = h5::stringAttr(root, "kind", p);
  header.configJson = h5::stringAttr(root, "config", p);
  header.engineVersion = optionalString(root, "engine_version", p);
  header.device = optionalString(root, "device", p);
  header.startTime = optionalString(root, "start_time", p);
  header.startTimeUnix = h5::hasAttr(root, "start_time_unix") ? h5::doubleAttr(root, "start_time_unix", p) : kNaN;
}

void RunReader::Impl::loadScalarsAndTables() {
  const std::string& p = path;
  RunLayout& layout = header.layout;
  h5::Hid g = h5::openGroup(file, "scalars", p);
  for (const auto& name : h5::childNames(g, p)) {
    GroupRows rows = openRows(g, name, {{"value", H5T_NATIVE_DOUBLE, 0}}, dapl, p);
    layout.scalars.push_back({name, optionalString(rows.data[0].id, "units", p)});
    scalars.emplace(name, std::move(rows));
  }
  g = h5::openGroup(file, "tables", p);
  layout.layers = int(h5::intAttr(g, "layers", p));
  layout.heads = int(h5::intAttr(g, "heads", p));
  for (const auto& name : h5::childNames(g, p)) {
    GroupRows rows = openRows(g, name, {{"value", H5T_NATIVE_DOUBLE, 2}}, dapl, p);
    const auto& row = rows.data[0].row;
    if (row[0] != hsize_t(layout.layers) || row[1] != hsize_t(layout.heads))
      throw RunFileError("run file '" + p + "': table '" + name + "' is not [N, layers, heads]");
    layout.tables.push_back({name, optionalString(rows.data[0].id, "units", p)});
    tables.emplace(name, std::move(rows));
  }
}

void RunReader::Impl::loadSnapshots() {
  const std::string& p = path;
  if ((hasSnapshots = h5::exists(file, "snapshots"))) {
    snapshots =
        openRows(file, "snapshots", {{"softmax", H5T_NATIVE_FLOAT, 3}, {"linear", H5T_NATIVE_FLOAT, 3}}, dapl, p);
    SnapshotSpec& s = header.layout.snapshots;
    s.pairs = readPairs(snapshots.group, p);
    s.tokens = h5::readStringDataset(snapshots.group, "tokens", p);
    const auto& row = snapshots.data[0].row;
    s.size = int(row[1]);
    if (row[0] != s.pairs.size() || row[1] != row[2] || snapshots.data[1].row != row || s.size > s.tokenCount())
      throw RunFileError("run file '" + p + "': snapshots are not [N, P, S, S] with S <= T");
  }
}

void RunReader::Impl::loadCurves() {
  const std::string& p = path;
  RunLayout& layout = header.layout;
  if ((hasCurves = h5::exists(file, "curves"))) {
    curves = openRows(file, "curves",
                      {{"bin_center", H5T_NATIVE_DOUBLE, 2},
                       {"mean", H5T_NATIVE_DOUBLE, 2},
                       {"stddev", H5T_NATIVE_DOUBLE, 2},
                       {"count", H5T_NATIVE_INT64, 2}},
                      dapl, p);
    layout.curves.pairs = readPairs(curves.group, p);
    layout.curves.bins = int(curves.data[0].row[1]);
    if (h5::hasAttr(curves.group, "labels")) {
      layout.curves.labels = h5::stringsAttr(curves.group, "labels", p);
      if (layout.curves.labels.size() != layout.curves.pairs.size())
        throw RunFileError("run file '" + p + "': curve labels do not match the curve pairs");
    }
    for (const auto& c : curves.data)
      if (c.row[0] != layout.curves.pairs.size() || c.row != curves.data[0].row)
        throw RunFileError("run file '" + p + "': curves are not [N, P, B]");
  }
}

void RunReader::Impl::loadWeights() {
  const std::string& p = path;
  h5::Hid g = h5::openGroup(file, "weights", p);
  for (const auto& name : h5::childNames(g, p)) {
    h5::Hid wg = h5::openGroup(g, name, p);
    h5::Column probe = h5::openColumn(wg, "value", H5T_NATIVE_FLOAT, dapl, p);
    GroupRows rows = openRows(g, name, {{"value", H5T_NATIVE_FLOAT, probe.row.size()}}, dapl, p);
    header.layout.weights.push_back({name, std::vector<int64_t>(probe.row.begin(), probe.row.end())});
    weights.emplace(name, std::move(rows));
  }
}

// Every group must be listed in /committed_rows (and nothing else).
void RunReader::Impl::loadCommitted() {
  const std::string& p = path;
  logLines = openRows(file, "log", {{"text", H5I_INVALID_HID, 0}}, dapl, p);
  status = openRows(file, "status", {{"state", H5I_INVALID_HID, 0}, {"message", H5I_INVALID_HID, 0}}, dapl, p);
  exports = openRows(file, "export", {{"path", H5I_INVALID_HID, 0}}, dapl, p);
  committed = h5::openColumn(file, "committed_rows", H5T_NATIVE_INT64, dapl, p);
  const std::vector<std::string> names = h5::stringsAttr(committed.id, "groups", p);
  std::map<std::string, GroupRows*> byName = {{"log", &logLines}, {"status", &status}, {"export", &exports}};
  if (hasSnapshots) byName["snapshots"] = &snapshots;
  if (hasCurves) byName["curves"] = &curves;
  for (auto* m : {&scalars, &tables, &weights})
    for (auto& [name, rows] : *m)
      byName[(m == &scalars ? "scalars/" : m == &tables ? "tables/" : "weights/") + name] = &rows;
  if (!committed.row.empty() || names.size() != committed.rows || names.size() != byName.size())
    throw RunFileError("run file '" + p + "': /committed_rows does not list every group once");
  for (const auto& name : names) {
    auto it = byName.find(name);
    if (it == byName.end())
      throw RunFileError("run file '" + p + "': /committed_rows names an unknown group '" + name + "'");
    order.emplace_back(name, it->second);
  }
}

}  // namespace hh::runs
