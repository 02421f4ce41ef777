// Creating the groups of a new run file (see run_file_groups.h; schema in docs/run_file.md).
#include "engine/runs/run_file_groups.h"

#include <algorithm>

namespace hh::runs {
namespace {
constexpr int64_t kMinusOne = -1;
constexpr hsize_t kRows1d = 512;  // chunk rows of 1-D columns

struct Payload {
  std::string name;
  hid_t fileType, memType;
  std::vector<hsize_t> row;
  hsize_t chunkRows;
  const void* fill;
};

Rows makeRows(h5::Hid group, const std::vector<Payload>& payload, const std::string& path) {
  Rows r;
  for (const auto& p : payload)
    r.data.push_back(h5::createColumn(group, p.name, p.fileType, p.memType, p.row, p.chunkRows, p.fill, path));
  r.step = h5::createColumn(group, "step", H5T_STD_I64LE, H5T_NATIVE_INT64, {}, kRows1d, nullptr, path);
  r.time = h5::createColumn(group, "time", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, {}, kRows1d, &kNaN, path);
  h5::setAttr(r.time.id, "units", std::string("s"), path);
  h5::setAttr(r.time.id, "long_name", std::string("wall-clock time, seconds since 1970-01-01T00:00:00Z"), path);
  r.group = std::move(group);
  return r;
}

void setNxData(hid_t group, const std::string& signal, const std::vector<std::string>& axes, const std::string& path) {
  h5::setAttr(group, "NX_class", std::string("NXdata"), path);
  h5::setAttr(group, "signal", signal, path);
  h5::setAttr(group, "axes", axes, path);
}

void setUnits(hid_t group, const std::string& dataset, const std::string& units, const std::string& longName,
              const std::string& path) {
  h5::Hid d(H5Dopen2(group, dataset.c_str(), H5P_DEFAULT));
  h5::check(d.get(), path, "cannot open dataset '" + dataset + "'");
  if (!units.empty()) h5::setAttr(d, "units", units, path);
  if (!longName.empty()) h5::setAttr(d, "long_name", longName, path);
}

void writePairs(hid_t group, const std::vector<LayerHead>& pairs, const std::string& path) {
  // pairs: [P, 2] int64 (layer, head)
  std::vector<int64_t> flat;
  for (const auto& p : pairs) flat.insert(flat.end(), {p.layer, p.head});
  h5::writeFixed(group, "pairs", H5T_STD_I64LE, H5T_NATIVE_INT64, {pairs.size(), 2}, flat.data(), path);
}

void writeIndex(hid_t group, const std::string& name, const std::vector<int64_t>& values, const std::string& path) {
  h5::writeFixed(group, name, H5T_STD_I64LE, H5T_NATIVE_INT64, {values.size()}, values.data(), path);
}

std::vector<int64_t> iota(int n) {
  std::vector<int64_t> v(n);
  for (int i = 0; i < n; ++i) v[i] = i;
  return v;
}

}  // namespace

void writeRootAttributes(hid_t file, const RunHeader& header, const std::string& p) {
  h5::Hid root(H5Gopen2(file, "/", H5P_DEFAULT));
  h5::setAttr(root, "NX_class", std::string("NXroot"), p);
  h5::setAttr(root, "schema_version", int64_t{kSchemaVersion}, p);
  h5::setAttr(root, "format", std::string("hedgehog-run"), p);
  h5::setAttr(root, "run_id", header.runId, p);
  h5::setAttr(root, "kind", header.kind, p);
  h5::setAttr(root, "config", header.configJson, p);
  h5::setAttr(root, "engine_version", header.engineVersion, p);
  h5::setAttr(root, "device", header.device, p);
  h5::setAttr(root, "start_time", header.startTime, p);
  h5::setAttr(root, "start_time_unix", header.startTimeUnix, p);
  h5::setAttr(root, "file_time", header.startTime, p);
  h5::setAttr(root, "creator", "Hedgehog Workbench " + header.engineVersion, p);
  h5::setAttr(root, "HDF5_Version", std::string(H5_VERS_INFO), p);
  if (!header.layout.scalars.empty()) h5::setAttr(root, "default", "scalars/" + header.layout.scalars[0].name, p);
}

std::map<std::string, Rows> createScalarGroups(hid_t file, const std::vector<SeriesSpec>& scalars,
                                               const std::string& p) {
  std::map<std::string, Rows> out;
  h5::Hid scalarsGroup = h5::createGroup(file, "scalars", p);
  h5::setAttr(scalarsGroup, "NX_class", std::string("NXcollection"), p);
  for (const auto& s : scalars) {
    h5::Hid g = h5::createGroup(scalarsGroup, s.name, p);
    setNxData(g, "value", {"step"}, p);
    Rows rows = makeRows(std::move(g), {{"value", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, {}, kRows1d, &kNaN}}, p);
    setUnits(rows.group, "value", s.units, s.name, p);
    out.emplace(s.name, std::move(rows));
  }
  return out;
}

std::map<std::string, Rows> createTableGroups(hid_t file, const RunLayout& layout, const std::string& p) {
  std::map<std::string, Rows> out;
  h5::Hid tablesGroup = h5::createGroup(file, "tables", p);
  h5::setAttr(tablesGroup, "NX_class", std::string("NXcollection"), p);
  h5::setAttr(tablesGroup, "layers", int64_t{layout.layers}, p);
  h5::setAttr(tablesGroup, "heads", int64_t{layout.heads}, p);
  const std::vector<hsize_t> lh = {hsize_t(layout.layers), hsize_t(layout.heads)};
  for (const auto& t : layout.tables) {
    h5::Hid g = h5::createGroup(tablesGroup, t.name, p);
    setNxData(g, "value", {"step", "layer", "head"}, p);
    writeIndex(g, "layer", iota(layout.layers), p);
    writeIndex(g, "head", iota(layout.heads), p);
    const hsize_t chunk = std::max<hsize_t>(1, 8192 / (lh[0] * lh[1]));
    Rows rows = makeRows(std::move(g), {{"value", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, lh, chunk, &kNaN}}, p);
    setUnits(rows.group, "value", t.units, t.name, p);
    out.emplace(t.name, std::move(rows));
  }
  return out;
}

Rows createSnapshotGroup(hid_t file, const SnapshotSpec& sp, const std::string& p) {
  const hsize_t s = sp.storedSize(), np = sp.pairs.size();
  h5::Hid g = h5::createGroup(file, "snapshots", p);
  setNxData(g, "softmax", {"step", ".", "query_edge", "key_edge"}, p);
  h5::setAttr(g, "auxiliary_signals", std::vector<std::string>{"linear"}, p);
  h5::setAttr(g, "token_count", int64_t{sp.tokenCount()}, p);
  h5::setAttr(g, "size", int64_t(s), p);
  h5::setAttr(g, "pooling", std::string("mean over token blocks [edge[i], edge[i+1])"), p);
  writePairs(g, sp.pairs, p);
  h5::writeStrings(g, "tokens", sp.tokens, p);
  std::vector<int64_t> edges;
  for (int e : poolEdges(sp.tokenCount(), int(s))) edges.push_back(e);
  writeIndex(g, "query_edge", edges, p);
  writeIndex(g, "key_edge", edges, p);
  return makeRows(std::move(g),
                  {{"softmax", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, {np, s, s}, 1, &kNaNf},
                   {"linear", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, {np, s, s}, 1, &kNaNf}},
                  p);
}

Rows createCurveGroup(hid_t file, const CurveSpec& spec, const std::string& p) {
  const hsize_t np = spec.pairs.size(), b = spec.bins;
  const hsize_t chunk = std::max<hsize_t>(1, 8192 / (np * b));
  h5::Hid g = h5::createGroup(file, "curves", p);
  setNxData(g, "mean", {"step", ".", "."}, p);
  h5::setAttr(g, "auxiliary_signals", std::vector<std::string>{"stddev", "bin_center", "count"}, p);
  writePairs(g, spec.pairs, p);
  if (!spec.labels.empty()) h5::setAttr(g, "labels", spec.labels, p);
  Rows curves = makeRows(std::move(g),
                         {{"bin_center", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, {np, b}, chunk, &kNaN},
                          {"mean", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, {np, b}, chunk, &kNaN},
                          {"stddev", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, {np, b}, chunk, &kNaN},
                          {"count", H5T_STD_I64LE, H5T_NATIVE_INT64, {np, b}, chunk, &kMinusOne}},
                         p);
  setUnits(curves.group, "bin_center", "", "scaled dot product q.k/sqrt(d) at the bin centre", p);
  setUnits(curves.group, "mean", "", "mean attention weight in the bin", p);
  return curves;
}

std::map<std::string, Rows> createWeightGroups(hid_t file, const std::vector<TensorSpec>& weights,
                                               const std::string& p) {
  std::map<std::string, Rows> out;
  h5::Hid weightsGroup = h5::createGroup(file, "weights", p);
  h5::setAttr(weightsGroup, "NX_class", std::string("NXcollection"), p);
  for (const auto& w : weights) {
    h5::Hid g = h5::createGroup(weightsGroup, w.name, p);
    std::vector<std::string> axes = {"step"};
    std::vector<hsize_t> shape;
    for (int64_t d : w.shape) {
      shape.push_back(hsize_t(d));
      axes.push_back(".");
    }
    setNxData(g, "value", axes, p);
    out.emplace(w.name, makeRows(std::move(g), {{"value", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, shape, 1, &kNaNf}}, p));
  }
  return out;
}

Rows createTextGroup(hid_t file, const std::string& name, const std::vector<TextColumn>& columns,
                     const std::string& p) {
  h5::Hid g = h5::createGroup(file, name, p);
  h5::setAttr(g, "NX_class", std::string("NXcollection"), p);
  std::vector<Payload> payload;
  for (const auto& c : columns) payload.push_back({c.name, c.type, c.type, {}, c.chunkRows, nullptr});
  return makeRows(std::move(g), payload, p);
}

h5::Hid createCommittedRows(hid_t file, const std::vector<std::string>& groups, const std::string& p) {
  const hsize_t count = groups.size();
  h5::Hid space(H5Screate_simple(1, &count, &count));
  h5::Hid dcpl(H5Pcreate(H5P_DATASET_CREATE));
  h5::check(H5Pset_chunk(dcpl, 1, &count), p, "cannot set chunking of /committed_rows");
  h5::Hid committed(H5Dcreate2(file, "committed_rows", H5T_STD_I64LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT));
  h5::check(committed.get(), p, "cannot create /committed_rows");
  h5::setAttr(committed, "groups", groups, p);
  h5::setAttr(committed, "long_name", std::string("rows of each group that are complete in the file"), p);
  return committed;
}

}  // namespace hh::runs
