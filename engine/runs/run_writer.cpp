// RunWriter (see run_writer.h; schema in docs/run_file.md). Every appendable group holds `time`
// (float64, Unix seconds, fill NaN), `step` (int64) and its payload columns, all with the same row
// count. HDF5 may write extents and chunks of rows appended since the last flush in any order, so
// a flush is two-phase: H5Fflush (all rows so far reach the file), then the row count of every
// group goes into /committed_rows [G] and a second H5Fflush. The counts can only reach the file
// after the rows they count, so readers that stop at them never see a half-written row.
#include "engine/runs/run_writer.h"

#include <cmath>
#include <filesystem>

#include "engine/runs/h5_support.h"
#include "engine/runs/run_file_groups.h"

namespace hh::runs {

namespace {

std::vector<char> fixedText(const std::string& text, size_t bytes) {
  std::vector<char> buffer(bytes, '\0');
  const std::string cut = h5::fitUtf8(text, bytes);
  std::copy(cut.begin(), cut.end(), buffer.begin());
  return buffer;
}
}  // namespace

struct RunWriter::Impl {
  std::string path;
  RunHeader header;
  RunWriterOptions options;
  h5::Hid file;
  int lockFd = -1;
  h5::Hid statusType = h5::stringType(kStatusBytes), messageType = h5::stringType(kMessageBytes),
          logType = h5::stringType(kLogLineBytes), pathType = h5::stringType(kPathBytes);
  std::map<std::string, Rows> scalars, tables, weights;
  Rows snapshots, curves, logLines, status, exports;
  RunStatus current = RunStatus::Running;
  int64_t lastStep = -1;
  int64_t flushes = 0;
  int appendsSinceFlush = 0;
  double lastFlush = 0.0;

  ~Impl() {
    h5::Quiet quiet;
    try {
      closeFile();
    } catch (...) {  // a destructor reports nothing; close() is the checked path
    }
  }

  void closeFile() {
    order.clear();
    committed.reset();
    scalars.clear();
    tables.clear();
    weights.clear();
    snapshots = Rows{};
    curves = Rows{};
    logLines = Rows{};
    status = Rows{};
    exports = Rows{};
    const bool ok = !file.valid() || H5Fclose(file.release()) >= 0;
    h5::unlockWriter(lockFd);
    lockFd = -1;
    if (!ok) h5::fail(path, "cannot close the file");
  }

  void requireOpen() const {
    if (!file.valid()) throw std::logic_error("run writer: '" + path + "' is closed");
  }

  void append(Rows& rows, int64_t step, const std::vector<const void*>& payload) {
    for (size_t i = 0; i < payload.size(); ++i) h5::appendRow(rows.data[i], payload[i], path);
    h5::appendRow(rows.step, &step, path);
    const double now = unixNow();
    h5::appendRow(rows.time, &now, path);
  }

  void appended(int64_t step) {
    lastStep = std::max(lastStep, step);
    ++appendsSinceFlush;
    const FlushPolicy& f = options.flush;
    if ((f.everyAppends > 0 && appendsSinceFlush >= f.everyAppends) ||
        (f.everySeconds > 0 && unixNow() - lastFlush >= f.everySeconds))
      flush();
  }

  // Appendable groups in /committed_rows order, with their paths.
  std::vector<std::pair<std::string, Rows*>> order;
  h5::Hid committed;  // /committed_rows: int64 [G]

  void flush() {
    h5::check(H5Fflush(file, H5F_SCOPE_GLOBAL), path, "cannot flush");
    std::vector<int64_t> counts;
    for (const auto& entry : order) counts.push_back(int64_t(entry.second->time.rows));
    h5::check(H5Dwrite(committed, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, counts.data()), path,
              "cannot write /committed_rows");
    h5::check(H5Fflush(file, H5F_SCOPE_GLOBAL), path, "cannot flush");
    ++flushes;
    appendsSinceFlush = 0;
    lastFlush = unixNow();
  }

  void appendStatus(RunStatus s, const std::string& message) {
    const std::vector<char> state = fixedText(statusName(s), kStatusBytes), text = fixedText(message, kMessageBytes);
    append(status, lastStep, {state.data(), text.data()});
  }

  void build();
};

void RunWriter::Impl::build() {
  const RunLayout& layout = header.layout;
  writeRootAttributes(file, header, path);
  scalars = createScalarGroups(file, layout.scalars, path);
  tables = createTableGroups(file, layout, path);
  if (layout.snapshots.enabled()) snapshots = createSnapshotGroup(file, layout.snapshots, path);
  if (layout.curves.enabled()) curves = createCurveGroup(file, layout.curves, path);
  weights = createWeightGroups(file, layout.weights, path);
  logLines = createTextGroup(file, "log", {{"text", logType, 64}}, path);
  status = createTextGroup(file, "status", {{"state", statusType, 16}, {"message", messageType, 16}}, path);
  exports = createTextGroup(file, "export", {{"path", pathType, 4}}, path);

  // /committed_rows: int64 [G], complete rows per group; `groups` [G] names them.
  for (auto* m : {&scalars, &tables, &weights})
    for (auto& [name, rows] : *m)
      order.emplace_back((m == &scalars ? "scalars/" : m == &tables ? "tables/" : "weights/") + name, &rows);
  if (layout.snapshots.enabled()) order.emplace_back("snapshots", &snapshots);
  if (layout.curves.enabled()) order.emplace_back("curves", &curves);
  order.emplace_back("log", &logLines);
  order.emplace_back("status", &status);
  order.emplace_back("export", &exports);
  std::vector<std::string> names;
  for (const auto& entry : order) names.push_back(entry.first);
  committed = createCommittedRows(file, names, path);
}

RunWriter RunWriter::create(const std::string& path, const RunHeader& header, const RunWriterOptions& options) {
  validateLayout(header.layout);
  h5::Quiet quiet;
  std::error_code ec;
  if (!options.overwrite && std::filesystem::exists(path, ec))
    throw RunFileError("run file '" + path + "': already exists (pass overwrite to replace it)");
  RunWriter writer;
  auto& impl = *writer.impl_;
  impl.path = path;
  impl.header = header;
  impl.options = options;
  if (impl.header.startTimeUnix == 0.0) impl.header.startTimeUnix = unixNow();
  if (impl.header.startTime.empty()) impl.header.startTime = isoTimeUtc(impl.header.startTimeUnix);
  impl.lastFlush = unixNow();

  // The file is built under a temporary name and renamed into place once its structure and first
  // status row are flushed: a kill while the datasets are being created leaves the previous file
  // (or none), never a truncated one that no reader can open.
  const std::string staging = path + ".partial";
  bool renamed = false;
  h5::Hid fapl(H5Pcreate(H5P_FILE_ACCESS));
  h5::check(H5Pset_libver_bounds(fapl, H5F_LIBVER_LATEST, H5F_LIBVER_LATEST), path, "cannot request the latest format");
  impl.file = h5::Hid(H5Fcreate(staging.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl));
  h5::check(impl.file.get(), path, "cannot create the file");
  try {
    impl.build();
    impl.appendStatus(RunStatus::Running, "");
    h5::check(H5Fstart_swmr_write(impl.file), path, "cannot start SWMR writing");
    impl.flush();
    std::filesystem::rename(staging, path);
    renamed = true;
    impl.lockFd = h5::lockAsWriter(path);
  } catch (...) {
    try {
      impl.closeFile();
    } catch (...) {
    }
    std::filesystem::remove(renamed ? path : staging, ec);
    throw;
  }
  return writer;
}

RunWriter::RunWriter() : impl_(std::make_unique<Impl>()) {}
RunWriter::RunWriter(RunWriter&&) noexcept = default;
RunWriter& RunWriter::operator=(RunWriter&&) noexcept = default;
RunWriter::~RunWriter() = default;

void RunWriter::appendScalars(int64_t step, const std::map<std::string, double>& values) {
  h5::Quiet quiet;
  impl_->requireOpen();
  for (const auto& [name, value] : values)
    if (!impl_->scalars.count(name))
      throw std::invalid_argument("run writer: scalar '" + name + "' is not in the layout");
  for (const auto& [name, value] : values) impl_->append(impl_->scalars.at(name), step, {&value});
  impl_->appended(step);
}

void RunWriter::appendScalar(int64_t step, const std::string& name, double value) {
  appendScalars(step, {{name, value}});
}

void RunWriter::appendTable(int64_t step, const std::string& name, const std::vector<double>& values) {
  h5::Quiet quiet;
  impl_->requireOpen();
  auto it = impl_->tables.find(name);
  if (it == impl_->tables.end()) throw std::invalid_argument("run writer: table '" + name + "' is not in the layout");
  const size_t want = it->second.data[0].rowElements();
  if (values.size() != want)
    throw std::invalid_argument("run writer: table '" + name + "' needs " + std::to_string(want) +
                                " values [L, H], got " + std::to_string(values.size()));
  impl_->append(it->second, step, {values.data()});
  impl_->appended(step);
}

void RunWriter::appendSnapshot(int64_t step, const std::vector<float>& softmax, const std::vector<float>& linear) {
  h5::Quiet quiet;
  impl_->requireOpen();
  const SnapshotSpec& spec = impl_->header.layout.snapshots;
  if (!spec.enabled()) throw std::invalid_argument("run writer: the layout declares no snapshots");
  const size_t np = spec.pairs.size(), s = spec.storedSize(), t = spec.tokenCount();
  auto fit = [&](const std::vector<float>& maps, const char* which) {
    if (maps.size() == np * s * s) return maps;
    if (maps.size() == np * t * t) return poolMaps(maps, int(np), int(t), int(s));
    throw std::invalid_argument(
        std::string("run writer: snapshot '") + which + "' needs [P, S, S] = " + std::to_string(np * s * s) +
        " or [P, T, T] = " + std::to_string(np * t * t) + " values, got " + std::to_string(maps.size()));
  };
  const std::vector<float> soft = fit(softmax, "softmax");
  const std::vector<float> lin = linear.empty() ? std::vector<float>(np * s * s, kNaNf) : fit(linear, "linear");
  impl_->append(impl_->snapshots, step, {soft.data(), lin.data()});
  impl_->appended(step);
}

void RunWriter::appendCurves(int64_t step, const std::vector<CurveRow>& curves) {
  h5::Quiet quiet;
  impl_->requireOpen();
  const CurveSpec& spec = impl_->header.layout.curves;
  if (!spec.enabled()) throw std::invalid_argument("run writer: the layout declares no curves");
  const size_t b = spec.bins;
  if (curves.size() != spec.pairs.size())
    throw std::invalid_argument("run writer: curves need " + std::to_string(spec.pairs.size()) +
                                " entries (one per pair), got " + std::to_string(curves.size()));
  std::vector<double> centers, means, stds;
  std::vector<int64_t> counts;
  for (const auto& c : curves) {
    if (c.binCenters.size() != b || c.mean.size() != b || c.stddev.size() != b ||
        (!c.count.empty() && c.count.size() != b))
      throw std::invalid_argument("run writer: every curve needs " + std::to_string(b) + " bins");
    centers.insert(centers.end(), c.binCenters.begin(), c.binCenters.end());
    means.insert(means.end(), c.mean.begin(), c.mean.end());
    stds.insert(stds.end(), c.stddev.begin(), c.stddev.end());
    if (c.count.empty())
      counts.insert(counts.end(), b, -1);
    else
      counts.insert(counts.end(), c.count.begin(), c.count.end());
  }
  impl_->append(impl_->curves, step, {centers.data(), means.data(), stds.data(), counts.data()});
  impl_->appended(step);
}

void RunWriter::appendWeights(int64_t step, const std::map<std::string, std::vector<float>>& tensors) {
  h5::Quiet quiet;
  impl_->requireOpen();
  for (const auto& [name, values] : tensors) {
    auto it = impl_->weights.find(name);
    if (it == impl_->weights.end())
      throw std::invalid_argument("run writer: weight '" + name + "' is not in the layout");
    const size_t want = it->second.data[0].rowElements();
    if (values.size() != want)
      throw std::invalid_argument("run writer: weight '" + name + "' needs " + std::to_string(want) + " values, got " +
                                  std::to_string(values.size()));
  }
  for (const auto& [name, values] : tensors) impl_->append(impl_->weights.at(name), step, {values.data()});
  impl_->appended(step);
}

void RunWriter::log(const std::string& line, int64_t step) {
  h5::Quiet quiet;
  impl_->requireOpen();
  const std::vector<char> text = fixedText(line, kLogLineBytes);
  impl_->append(impl_->logLines, step, {text.data()});
  impl_->appended(step);
}

void RunWriter::setStatus(RunStatus status, const std::string& message) {
  h5::Quiet quiet;
  impl_->requireOpen();
  if (isTerminal(impl_->current))
    throw std::logic_error(std::string("run writer: status is already ") + statusName(impl_->current) +
                           ", cannot change it to " + statusName(status));
  impl_->appendStatus(status, message);
  impl_->current = status;
  impl_->flush();
}

void RunWriter::setFinal(const std::string& exportPath, int64_t step) {
  h5::Quiet quiet;
  impl_->requireOpen();
  const std::vector<char> text = fixedText(exportPath, kPathBytes);
  impl_->append(impl_->exports, step, {text.data()});
  impl_->flush();
}

void RunWriter::flush() {
  h5::Quiet quiet;
  impl_->requireOpen();
  impl_->flush();
}

void RunWriter::close() {
  if (!impl_ || !impl_->file.valid()) return;
  h5::Quiet quiet;
  impl_->flush();
  impl_->closeFile();
}

bool RunWriter::isOpen() const {
  return impl_ && impl_->file.valid();
}
const std::string& RunWriter::path() const {
  return impl_->path;
}
const RunLayout& RunWriter::layout() const {
  return impl_->header.layout;
}
RunStatus RunWriter::status() const {
  return impl_->current;
}
int64_t RunWriter::flushCount() const {
  return impl_->flushes;
}

}  // namespace hh::runs
