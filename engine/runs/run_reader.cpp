// RunReader (see run_reader.h; schema in docs/run_file.md). A group's visible rows are the fewest
// rows among its columns, capped by its entry in /committed_rows (the rows the writer had flushed
// completely), less any trailing rows whose `time` is still the NaN fill value.
#include "engine/runs/run_reader.h"

#include <cmath>
#include <filesystem>
#include <map>

#include "engine/runs/run_reader_impl.h"

namespace hh::runs {

namespace {
constexpr unsigned kMetadataReadAttempts = 26;

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

}  // namespace

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
  const GroupRows& r = impl_->exports;
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
  const GroupRows& r = impl_->find(impl_->scalars, name, "scalar");
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
  const GroupRows& r = impl_->find(impl_->tables, name, "table");
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
  const GroupRows& r = impl_->snapshots;
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
  const GroupRows& r = impl_->curves;
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
  const GroupRows& r = impl_->find(impl_->weights, name, "weight");
  return readColumn<int64_t>(r.step, 0, r.visible, impl_->path);
}

WeightCheckpoint RunReader::weights(const std::string& name, int64_t index) const {
  h5::Quiet quiet;
  const GroupRows& r = impl_->find(impl_->weights, name, "weight");
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
  const GroupRows& r = impl_->logLines;
  from = clampFrom(from, r.visible);
  const auto steps = readColumn<int64_t>(r.step, from, r.visible, impl_->path);
  const auto times = readColumn<double>(r.time, from, r.visible, impl_->path);
  const auto texts = h5::readStrings(r.data[0], hsize_t(from), hsize_t(r.visible - from), impl_->path);
  std::vector<LogLine> out(steps.size());
  for (size_t i = 0; i < out.size(); ++i) out[i] = {steps[i], times[i], texts[i]};
  return out;
}

}  // namespace hh::runs
