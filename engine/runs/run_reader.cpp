// RunReader (see run_reader.h; schema in docs/run_file.md). A group's visible rows are the fewest
// rows among its columns, capped by its entry in /committed_rows (the rows the writer had flushed
// completely), less any trailing rows whose `time` is still the NaN fill value.
#include "engine/runs/run_reader.h"

#include <cmath>
#include <filesystem>
#include <limits>
#include <map>

#include "engine/runs/h5_support.h"

namespace hh::runs {

namespace {
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr unsigned kMetadataReadAttempts = 26;

struct Rows {
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

Rows openRows(hid_t loc, const std::string& name, const std::vector<PayloadIn>& payload, hid_t dapl,
              const std::string& path) {
  Rows r;
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
bool updateRows(Rows& r, int64_t committed, bool live, bool inProcessWriter, const std::string& path) {
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

template <typename T>
std::vector<T> readColumn(const h5::Column& c, int64_t from, int64_t to, const std::string& path) {
  std::vector<T> out(size_t(std::max<int64_t>(0, to - from)) * c.rowElements());
  h5::readRows(c, hsize_t(from), hsize_t(std::max<int64_t>(0, to - from)), out.data(), path);
  return out;
}

int64_t clampFrom(int64_t from, int64_t rows) {
  return std::min(std::max<int64_t>(from, 0), rows);
}

int64_t resolveIndex(int64_t index, int64_t count, const char* what) {
  const int64_t i = index < 0 ? count + index : index;
  if (i < 0 || i >= count)
    throw std::out_of_range(std::string("run reader: ") + what + " index " + std::to_string(index) + " outside " +
                            std::to_string(count) + " rows");
  return i;
}

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

struct RunReader::Impl {
  std::string path;
  h5::Hid file, dapl;
  bool live = false;
  bool inProcessWriter = false;  // a RunWriter in this process has the file open (shared HDF5 file)
  int version = 0;
  RunHeader header;
  std::map<std::string, Rows> scalars, tables, weights;
  Rows snapshots, curves, logLines, status, exports;
  bool hasSnapshots = false, hasCurves = false;
  h5::Column committed;                              // /committed_rows [G]
  std::vector<std::pair<std::string, Rows*>> order;  // groups in /committed_rows order

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
    for (Rows* r : {&snapshots, &curves, &logLines, &status, &exports}) *r = Rows{};
    if (file.valid()) H5Fclose(file.release());
  }

  const Rows& find(const std::map<std::string, Rows>& m, const std::string& name, const char* what) const {
    auto it = m.find(name);
    if (it == m.end())
      throw std::invalid_argument(std::string("run reader: no ") + what + " named '" + name + "' in '" + path + "'");
    return it->second;
  }

  void load();
  std::vector<StatusEntry> statusRows() const;
};

void RunReader::Impl::load() {
  const std::string& p = path;
  h5::Hid root = h5::openGroup(file, "/", p);
  if (!h5::hasAttr(root, "schema_version"))
    throw RunFileError("run file '" + p + "': not a Hedgehog run file (no 'schema_version' attribute at the root)");
  version = int(h5::intAttr(root, "schema_version", p));
  if (version < 1 || version > kSchemaVersion)
    throw RunFileError("run file '" + p + "': schema version " + std::to_string(version) +
                       " is not supported (this build reads versions 1 to " + std::to_string(kSchemaVersion) + ")");
  header.runId = h5::stringAttr(root, "run_id", p);
  header.kind = h5::stringAttr(root, "kind", p);
  header.configJson = h5::stringAttr(root, "config", p);
  header.engineVersion = optionalString(root, "engine_version", p);
  header.device = optionalString(root, "device", p);
  header.startTime = optionalString(root, "start_time", p);
  header.startTimeUnix = h5::hasAttr(root, "start_time_unix") ? h5::doubleAttr(root, "start_time_unix", p) : kNaN;
  RunLayout& layout = header.layout;

  h5::Hid g = h5::openGroup(file, "scalars", p);
  for (const auto& name : h5::childNames(g, p)) {
    Rows rows = openRows(g, name, {{"value", H5T_NATIVE_DOUBLE, 0}}, dapl, p);
    layout.scalars.push_back({name, optionalString(rows.data[0].id, "units", p)});
    scalars.emplace(name, std::move(rows));
  }
  g = h5::openGroup(file, "tables", p);
  layout.layers = int(h5::intAttr(g, "layers", p));
  layout.heads = int(h5::intAttr(g, "heads", p));
  for (const auto& name : h5::childNames(g, p)) {
    Rows rows = openRows(g, name, {{"value", H5T_NATIVE_DOUBLE, 2}}, dapl, p);
    const auto& row = rows.data[0].row;
    if (row[0] != hsize_t(layout.layers) || row[1] != hsize_t(layout.heads))
      throw RunFileError("run file '" + p + "': table '" + name + "' is not [N, layers, heads]");
    layout.tables.push_back({name, optionalString(rows.data[0].id, "units", p)});
    tables.emplace(name, std::move(rows));
  }
  if ((hasSnapshots = h5::exists(file, "snapshots"))) {
    snapshots =
        openRows(file, "snapshots", {{"softmax", H5T_NATIVE_FLOAT, 3}, {"linear", H5T_NATIVE_FLOAT, 3}}, dapl, p);
    SnapshotSpec& s = layout.snapshots;
    s.pairs = readPairs(snapshots.group, p);
    s.tokens = h5::readStringDataset(snapshots.group, "tokens", p);
    const auto& row = snapshots.data[0].row;
    s.size = int(row[1]);
    if (row[0] != s.pairs.size() || row[1] != row[2] || snapshots.data[1].row != row || s.size > s.tokenCount())
      throw RunFileError("run file '" + p + "': snapshots are not [N, P, S, S] with S <= T");
  }
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
  g = h5::openGroup(file, "weights", p);
  for (const auto& name : h5::childNames(g, p)) {
    h5::Hid wg = h5::openGroup(g, name, p);
    h5::Column probe = h5::openColumn(wg, "value", H5T_NATIVE_FLOAT, dapl, p);
    Rows rows = openRows(g, name, {{"value", H5T_NATIVE_FLOAT, probe.row.size()}}, dapl, p);
    layout.weights.push_back({name, std::vector<int64_t>(probe.row.begin(), probe.row.end())});
    weights.emplace(name, std::move(rows));
  }
  logLines = openRows(file, "log", {{"text", H5I_INVALID_HID, 0}}, dapl, p);
  status = openRows(file, "status", {{"state", H5I_INVALID_HID, 0}, {"message", H5I_INVALID_HID, 0}}, dapl, p);
  exports = openRows(file, "export", {{"path", H5I_INVALID_HID, 0}}, dapl, p);
  // Every group must be listed in /committed_rows (and nothing else).
  committed = h5::openColumn(file, "committed_rows", H5T_NATIVE_INT64, dapl, p);
  const std::vector<std::string> names = h5::stringsAttr(committed.id, "groups", p);
  std::map<std::string, Rows*> byName = {{"log", &logLines}, {"status", &status}, {"export", &exports}};
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
  update(false);
}

std::vector<StatusEntry> RunReader::Impl::statusRows() const {
  const int64_t n = status.visible;
  const auto steps = readColumn<int64_t>(status.step, 0, n, path);
  const auto times = readColumn<double>(status.time, 0, n, path);
  const auto states = h5::readStrings(status.data[0], 0, hsize_t(n), path);
  const auto messages = h5::readStrings(status.data[1], 0, hsize_t(n), path);
  std::vector<StatusEntry> out(n);
  for (int64_t i = 0; i < n; ++i) {
    try {
      out[i] = {steps[i], times[i], parseStatus(states[i]), messages[i]};
    } catch (const std::invalid_argument& e) {
      throw RunFileError("run file '" + path + "': " + e.what());
    }
  }
  return out;
}

RunReader RunReader::open(const std::string& path) {
  namespace fs = std::filesystem;
  h5::Quiet quiet;
  std::error_code ec;
  if (!fs::exists(path, ec)) throw RunFileError("run file '" + path + "': no such file");
  if (!fs::is_regular_file(path, ec)) throw RunFileError("run file '" + path + "': not a regular file");
  const htri_t isHdf5 = H5Fis_hdf5(path.c_str());
  if (isHdf5 == 0) throw RunFileError("run file '" + path + "': not an HDF5 file (no HDF5 signature)");
  if (isHdf5 < 0) h5::fail(path, "cannot read the file");

  RunReader reader;
  Impl& impl = *reader.impl_;
  impl.path = path;
  h5::Hid fapl(H5Pcreate(H5P_FILE_ACCESS));
  H5Pset_libver_bounds(fapl, H5F_LIBVER_LATEST, H5F_LIBVER_LATEST);
  // A SWMR reader retries a metadata block whose checksum fails (the writer may be halfway through
  // writing it), sleeping 1 ns, 2 ns, 4 ns, ... between tries. HDF5's default of 100 tries never
  // ends on a damaged file; kMetadataReadAttempts bounds the wait to about 2^26 ns (67 ms).
  H5Pset_metadata_read_attempts(fapl, kMetadataReadAttempts);
  impl.file = h5::Hid(H5Fopen(path.c_str(), H5F_ACC_RDONLY | H5F_ACC_SWMR_READ, fapl));
  impl.live = impl.file.valid();
  if (!impl.live) {
    const std::string swmrError = h5::takeErrorStack();
    impl.file = h5::Hid(H5Fopen(path.c_str(), H5F_ACC_RDONLY, fapl));
    if (!impl.file.valid()) {
      h5::takeErrorStack();
      throw RunFileError("run file '" + path + "': cannot open it (truncated or damaged?)" +
                         (swmrError.empty() ? "" : " (HDF5: " + swmrError + ")"));
    }
  }
  // HDF5 shares one open file per process: the intent is the writer's if this process writes it.
  unsigned intent = 0;
  impl.inProcessWriter = H5Fget_intent(impl.file, &intent) >= 0 && (intent & H5F_ACC_RDWR);
  // Readers see chunks straight from the file: no raw-data cache that could hold a stale chunk.
  impl.dapl = h5::Hid(H5Pcreate(H5P_DATASET_ACCESS));
  H5Pset_chunk_cache(impl.dapl, H5D_CHUNK_CACHE_NSLOTS_DEFAULT, 0, H5D_CHUNK_CACHE_W0_DEFAULT);
  impl.load();
  return reader;
}

RunReader::RunReader() : impl_(std::make_unique<Impl>()) {}
RunReader::RunReader(RunReader&&) noexcept = default;
RunReader& RunReader::operator=(RunReader&&) noexcept = default;
RunReader::~RunReader() = default;

bool RunReader::refresh() {
  h5::Quiet quiet;
  if (!impl_->file.valid()) throw std::logic_error("run reader: no file open");
  if (!impl_->live) return false;
  return impl_->update(true);
}

const std::string& RunReader::path() const {
  return impl_->path;
}
bool RunReader::live() const {
  return impl_->live;
}
int RunReader::schemaVersion() const {
  return impl_->version;
}
const RunHeader& RunReader::header() const {
  return impl_->header;
}

std::vector<StatusEntry> RunReader::statusHistory() const {
  h5::Quiet quiet;
  return impl_->statusRows();
}

RunStatus RunReader::status() const {
  const auto rows = statusHistory();
  return rows.empty() ? RunStatus::Running : rows.back().status;
}

std::string RunReader::statusMessage() const {
  const auto rows = statusHistory();
  return rows.empty() ? std::string() : rows.back().message;
}

double RunReader::endTime() const {
  const auto rows = statusHistory();
  return rows.empty() || !isTerminal(rows.back().status) ? kNaN : rows.back().time;
}

bool RunReader::writerActive() const {
  return h5::writerLockHeld(impl_->path);
}

std::vector<ExportEntry> RunReader::exports() const {
  h5::Quiet quiet;
  const Rows& r = impl_->exports;
  const auto steps = readColumn<int64_t>(r.step, 0, r.visible, impl_->path);
  const auto times = readColumn<double>(r.time, 0, r.visible, impl_->path);
  const auto paths = h5::readStrings(r.data[0], 0, hsize_t(r.visible), impl_->path);
  std::vector<ExportEntry> out(r.visible);
  for (int64_t i = 0; i < r.visible; ++i) out[i] = {steps[i], times[i], paths[i]};
  return out;
}

std::string RunReader::exportPath() const {
  const auto rows = exports();
  return rows.empty() ? std::string() : rows.back().path;
}

int64_t RunReader::scalarRows(const std::string& name) const {
  return impl_->find(impl_->scalars, name, "scalar").visible;
}

ScalarSeries RunReader::scalars(const std::string& name, int64_t from) const {
  h5::Quiet quiet;
  const Rows& r = impl_->find(impl_->scalars, name, "scalar");
  from = clampFrom(from, r.visible);
  return {readColumn<int64_t>(r.step, from, r.visible, impl_->path),
          readColumn<double>(r.time, from, r.visible, impl_->path),
          readColumn<double>(r.data[0], from, r.visible, impl_->path)};
}

int64_t RunReader::tableRows(const std::string& name) const {
  return impl_->find(impl_->tables, name, "table").visible;
}

TableSeries RunReader::table(const std::string& name, int64_t from) const {
  h5::Quiet quiet;
  const Rows& r = impl_->find(impl_->tables, name, "table");
  from = clampFrom(from, r.visible);
  TableSeries t;
  t.layers = impl_->header.layout.layers;
  t.heads = impl_->header.layout.heads;
  t.steps = readColumn<int64_t>(r.step, from, r.visible, impl_->path);
  t.times = readColumn<double>(r.time, from, r.visible, impl_->path);
  t.values = readColumn<double>(r.data[0], from, r.visible, impl_->path);
  return t;
}

int64_t RunReader::snapshotCount() const {
  return impl_->hasSnapshots ? impl_->snapshots.visible : 0;
}

std::vector<int64_t> RunReader::snapshotSteps() const {
  h5::Quiet quiet;
  if (!impl_->hasSnapshots) return {};
  return readColumn<int64_t>(impl_->snapshots.step, 0, impl_->snapshots.visible, impl_->path);
}

Snapshot RunReader::snapshot(int64_t index) const {
  h5::Quiet quiet;
  const int64_t i = resolveIndex(index, snapshotCount(), "snapshot");
  const Rows& r = impl_->snapshots;
  Snapshot s;
  s.step = readColumn<int64_t>(r.step, i, i + 1, impl_->path)[0];
  s.time = readColumn<double>(r.time, i, i + 1, impl_->path)[0];
  s.size = impl_->header.layout.snapshots.size;
  s.softmax = readColumn<float>(r.data[0], i, i + 1, impl_->path);
  s.linear = readColumn<float>(r.data[1], i, i + 1, impl_->path);
  return s;
}

int64_t RunReader::curveCount() const {
  return impl_->hasCurves ? impl_->curves.visible : 0;
}

std::vector<int64_t> RunReader::curveSteps() const {
  h5::Quiet quiet;
  if (!impl_->hasCurves) return {};
  return readColumn<int64_t>(impl_->curves.step, 0, impl_->curves.visible, impl_->path);
}

CurveSet RunReader::curves(int64_t index) const {
  h5::Quiet quiet;
  const int64_t i = resolveIndex(index, curveCount(), "curve");
  const Rows& r = impl_->curves;
  const std::string& p = impl_->path;
  CurveSet set;
  set.step = readColumn<int64_t>(r.step, i, i + 1, p)[0];
  set.time = readColumn<double>(r.time, i, i + 1, p)[0];
  const auto centers = readColumn<double>(r.data[0], i, i + 1, p), means = readColumn<double>(r.data[1], i, i + 1, p),
             stds = readColumn<double>(r.data[2], i, i + 1, p);
  const auto counts = readColumn<int64_t>(r.data[3], i, i + 1, p);
  const size_t np = impl_->header.layout.curves.pairs.size(), b = impl_->header.layout.curves.bins;
  for (size_t k = 0; k < np; ++k) {
    auto slice = [&](const auto& v) {
      return std::vector<typename std::decay_t<decltype(v)>::value_type>(v.begin() + k * b, v.begin() + (k + 1) * b);
    };
    set.curves.push_back({slice(centers), slice(means), slice(stds), slice(counts)});
  }
  return set;
}

int64_t RunReader::weightCount(const std::string& name) const {
  return impl_->find(impl_->weights, name, "weight").visible;
}

std::vector<int64_t> RunReader::weightSteps(const std::string& name) const {
  h5::Quiet quiet;
  const Rows& r = impl_->find(impl_->weights, name, "weight");
  return readColumn<int64_t>(r.step, 0, r.visible, impl_->path);
}

WeightCheckpoint RunReader::weights(const std::string& name, int64_t index) const {
  h5::Quiet quiet;
  const Rows& r = impl_->find(impl_->weights, name, "weight");
  const int64_t i = resolveIndex(index, r.visible, "weight");
  WeightCheckpoint w;
  w.step = readColumn<int64_t>(r.step, i, i + 1, impl_->path)[0];
  w.time = readColumn<double>(r.time, i, i + 1, impl_->path)[0];
  w.shape.assign(r.data[0].row.begin(), r.data[0].row.end());
  w.values = readColumn<float>(r.data[0], i, i + 1, impl_->path);
  return w;
}

int64_t RunReader::logCount() const {
  return impl_->logLines.visible;
}

std::vector<LogLine> RunReader::logLines(int64_t from) const {
  h5::Quiet quiet;
  const Rows& r = impl_->logLines;
  from = clampFrom(from, r.visible);
  const auto steps = readColumn<int64_t>(r.step, from, r.visible, impl_->path);
  const auto times = readColumn<double>(r.time, from, r.visible, impl_->path);
  const auto texts = h5::readStrings(r.data[0], hsize_t(from), hsize_t(r.visible - from), impl_->path);
  std::vector<LogLine> out(steps.size());
  for (size_t i = 0; i < out.size(); ++i) out[i] = {steps[i], times[i], texts[i]};
  return out;
}

}  // namespace hh::runs
