// HDF5 C API helpers for the run store (see h5_support.h).
#include "engine/runs/h5_support.h"

#include <algorithm>
#include <cstring>

#include <fcntl.h>
#include <unistd.h>

namespace hh::runs::h5 {

Hid& Hid::operator=(Hid&& other) noexcept {
  if (this != &other) {
    reset();
    id_ = other.release();
  }
  return *this;
}

hid_t Hid::release() {
  const hid_t id = id_;
  id_ = H5I_INVALID_HID;
  return id;
}

void Hid::reset() {
  if (id_ >= 0) {
    H5E_BEGIN_TRY {
      H5Idec_ref(id_);
    }
    H5E_END_TRY;
  }
  id_ = H5I_INVALID_HID;
}

Quiet::Quiet() {
  H5Eget_auto2(H5E_DEFAULT, &func_, &data_);
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
}

Quiet::~Quiet() {
  H5Eset_auto2(H5E_DEFAULT, func_, data_);
}

std::string takeErrorStack() {
  std::vector<std::string> reasons;
  H5Ewalk2(
      H5E_DEFAULT, H5E_WALK_DOWNWARD,
      [](unsigned, const H5E_error2_t* err, void* out) -> herr_t {
        auto* list = static_cast<std::vector<std::string>*>(out);
        const std::string desc = err->desc ? err->desc : "";
        if (!desc.empty() && std::find(list->begin(), list->end(), desc) == list->end()) list->push_back(desc);
        return 0;
      },
      &reasons);
  H5Eclear2(H5E_DEFAULT);
  // Outermost says what was attempted, innermost why; the middle is library plumbing.
  if (reasons.size() > 3) reasons.erase(reasons.begin() + 1, reasons.end() - 2);
  std::string text;
  for (const auto& r : reasons) text += (text.empty() ? "" : "; ") + r;
  return text;
}

void fail(const std::string& path, const std::string& what) {
  const std::string stack = takeErrorStack();
  throw RunFileError("run file '" + path + "': " + what + (stack.empty() ? "" : " (HDF5: " + stack + ")"));
}

Hid stringType(size_t bytes) {
  Hid type(H5Tcopy(H5T_C_S1));
  if (!type.valid() || H5Tset_size(type, std::max<size_t>(bytes, 1)) < 0 || H5Tset_strpad(type, H5T_STR_NULLPAD) < 0 ||
      H5Tset_cset(type, H5T_CSET_UTF8) < 0)
    fail("(none)", "cannot build a string type");
  return type;
}

std::string fitUtf8(const std::string& text, size_t bytes) {
  if (text.size() <= bytes) return text;
  size_t end = bytes;
  // Step back over continuation bytes (10xxxxxx) so the cut lands before a sequence's lead byte.
  while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) --end;
  return text.substr(0, end);
}

std::vector<std::string> splitFixed(const std::vector<char>& buffer, size_t count, size_t bytes) {
  std::vector<std::string> out(count);
  for (size_t i = 0; i < count; ++i) {
    const char* field = buffer.data() + i * bytes;
    out[i].assign(field, strnlen(field, bytes));
  }
  return out;
}

namespace {
void writeAttr(hid_t obj, const std::string& name, hid_t type, hid_t space, const void* data, const std::string& path) {
  Hid attr(H5Acreate2(obj, name.c_str(), type, space, H5P_DEFAULT, H5P_DEFAULT));
  check(attr.get(), path, "cannot create attribute '" + name + "'");
  check(H5Awrite(attr, type, data), path, "cannot write attribute '" + name + "'");
}
}  // namespace

void setAttr(hid_t obj, const std::string& name, const std::string& value, const std::string& path) {
  Hid type = stringType(value.size());
  Hid space(H5Screate(H5S_SCALAR));
  std::vector<char> buffer(std::max<size_t>(value.size(), 1), '\0');
  std::memcpy(buffer.data(), value.data(), value.size());
  writeAttr(obj, name, type, space, buffer.data(), path);
}

void setAttr(hid_t obj, const std::string& name, const std::vector<std::string>& values, const std::string& path) {
  size_t bytes = 1;
  for (const auto& v : values) bytes = std::max(bytes, v.size());
  Hid type = stringType(bytes);
  const hsize_t n = values.size();
  Hid space(H5Screate_simple(1, &n, nullptr));
  std::vector<char> buffer(bytes * values.size(), '\0');
  for (size_t i = 0; i < values.size(); ++i) std::memcpy(buffer.data() + i * bytes, values[i].data(), values[i].size());
  writeAttr(obj, name, type, space, buffer.data(), path);
}

void setAttr(hid_t obj, const std::string& name, int64_t value, const std::string& path) {
  Hid space(H5Screate(H5S_SCALAR));
  writeAttr(obj, name, H5T_NATIVE_INT64, space, &value, path);
}

void setAttr(hid_t obj, const std::string& name, double value, const std::string& path) {
  Hid space(H5Screate(H5S_SCALAR));
  writeAttr(obj, name, H5T_NATIVE_DOUBLE, space, &value, path);
}

bool hasAttr(hid_t obj, const std::string& name) {
  return H5Aexists(obj, name.c_str()) > 0;
}

std::string stringAttr(hid_t obj, const std::string& name, const std::string& path) {
  Hid attr(H5Aopen(obj, name.c_str(), H5P_DEFAULT));
  check(attr.get(), path, "cannot open attribute '" + name + "'");
  Hid type(H5Aget_type(attr));
  Hid space(H5Aget_space(attr));
  if (H5Tget_class(type) != H5T_STRING || H5Sget_simple_extent_npoints(space) != 1)
    throw RunFileError("run file '" + path + "': attribute '" + name + "' is not a single string");
  if (H5Tis_variable_str(type) > 0) {
    Hid mem(H5Tcopy(H5T_C_S1));
    H5Tset_size(mem, H5T_VARIABLE);
    char* value = nullptr;
    check(H5Aread(attr, mem, &value), path, "cannot read attribute '" + name + "'");
    std::string out = value ? value : "";
    H5free_memory(value);
    return out;
  }
  const size_t bytes = H5Tget_size(type);
  Hid mem = stringType(bytes);
  std::vector<char> buffer(bytes, '\0');
  check(H5Aread(attr, mem, buffer.data()), path, "cannot read attribute '" + name + "'");
  return splitFixed(buffer, 1, bytes)[0];
}

std::vector<std::string> stringsAttr(hid_t obj, const std::string& name, const std::string& path) {
  Hid attr(H5Aopen(obj, name.c_str(), H5P_DEFAULT));
  check(attr.get(), path, "cannot open attribute '" + name + "'");
  Hid type(H5Aget_type(attr));
  Hid space(H5Aget_space(attr));
  if (H5Tget_class(type) != H5T_STRING || H5Tis_variable_str(type) > 0 || H5Sget_simple_extent_ndims(space) != 1)
    throw RunFileError("run file '" + path + "': attribute '" + name + "' is not a list of fixed-length strings");
  const size_t bytes = H5Tget_size(type);
  const hssize_t n = H5Sget_simple_extent_npoints(space);
  Hid mem = stringType(bytes);
  std::vector<char> buffer(bytes * size_t(n), '\0');
  if (n > 0) check(H5Aread(attr, mem, buffer.data()), path, "cannot read attribute '" + name + "'");
  return splitFixed(buffer, size_t(n), bytes);
}

namespace {
template <typename T>
T numberAttr(hid_t obj, const std::string& name, hid_t memType, const std::string& path) {
  Hid attr(H5Aopen(obj, name.c_str(), H5P_DEFAULT));
  check(attr.get(), path, "cannot open attribute '" + name + "'");
  Hid type(H5Aget_type(attr));
  Hid space(H5Aget_space(attr));
  const H5T_class_t cls = H5Tget_class(type);
  if ((cls != H5T_INTEGER && cls != H5T_FLOAT) || H5Sget_simple_extent_npoints(space) != 1)
    throw RunFileError("run file '" + path + "': attribute '" + name + "' is not a single number");
  T value{};
  check(H5Aread(attr, memType, &value), path, "cannot read attribute '" + name + "'");
  return value;
}
}  // namespace

int64_t intAttr(hid_t obj, const std::string& name, const std::string& path) {
  return numberAttr<int64_t>(obj, name, H5T_NATIVE_INT64, path);
}

double doubleAttr(hid_t obj, const std::string& name, const std::string& path) {
  return numberAttr<double>(obj, name, H5T_NATIVE_DOUBLE, path);
}

bool exists(hid_t loc, const std::string& name) {
  return H5Lexists(loc, name.c_str(), H5P_DEFAULT) > 0;
}

Hid createGroup(hid_t loc, const std::string& name, const std::string& path) {
  Hid gcpl(H5Pcreate(H5P_GROUP_CREATE));
  H5Pset_link_creation_order(gcpl, H5P_CRT_ORDER_TRACKED | H5P_CRT_ORDER_INDEXED);
  Hid group(H5Gcreate2(loc, name.c_str(), H5P_DEFAULT, gcpl, H5P_DEFAULT));
  check(group.get(), path, "cannot create group '" + name + "'");
  return group;
}

Hid openGroup(hid_t loc, const std::string& name, const std::string& path) {
  Hid group(H5Gopen2(loc, name.c_str(), H5P_DEFAULT));
  check(group.get(), path, "cannot open group '" + name + "'");
  return group;
}

std::vector<std::string> childNames(hid_t group, const std::string& path) {
  std::vector<std::string> names;
  auto collect = [](hid_t, const char* name, const H5L_info_t*, void* out) -> herr_t {
    static_cast<std::vector<std::string>*>(out)->push_back(name);
    return 0;
  };
  // Creation order where the group tracks it (ours do), name order otherwise.
  if (H5Literate(group, H5_INDEX_CRT_ORDER, H5_ITER_INC, nullptr, collect, &names) < 0) {
    names.clear();
    H5Eclear2(H5E_DEFAULT);
    check(H5Literate(group, H5_INDEX_NAME, H5_ITER_INC, nullptr, collect, &names), path, "cannot list a group");
  }
  return names;
}

size_t Column::rowElements() const {
  size_t n = 1;
  for (hsize_t d : row) n *= d;
  return n;
}

Column createColumn(hid_t loc, const std::string& name, hid_t fileType, hid_t memType, const std::vector<hsize_t>& row,
                    hsize_t chunkRows, const void* fill, const std::string& path) {
  const int rank = 1 + static_cast<int>(row.size());
  std::vector<hsize_t> dims(rank, 0), maxDims(rank, H5S_UNLIMITED), chunk(rank);
  chunk[0] = std::max<hsize_t>(chunkRows, 1);
  for (size_t i = 0; i < row.size(); ++i) dims[i + 1] = maxDims[i + 1] = chunk[i + 1] = row[i];
  // Keep chunks near 1 MiB or below: halve the row count first, then the leading row dims.
  const size_t element = H5Tget_size(fileType);
  auto chunkBytes = [&] {
    size_t b = element;
    for (hsize_t c : chunk) b *= c;
    return b;
  };
  for (int d = 0; d < rank && chunkBytes() > (size_t{1} << 20);) {
    if (chunk[d] > 1)
      chunk[d] = (chunk[d] + 1) / 2;
    else
      ++d;
  }
  Hid space(H5Screate_simple(rank, dims.data(), maxDims.data()));
  Hid dcpl(H5Pcreate(H5P_DATASET_CREATE));
  check(H5Pset_chunk(dcpl, rank, chunk.data()), path, "cannot set chunking of '" + name + "'");
  if (fill) check(H5Pset_fill_value(dcpl, memType, fill), path, "cannot set the fill value of '" + name + "'");
  Column column;
  column.id = Hid(H5Dcreate2(loc, name.c_str(), fileType, space, H5P_DEFAULT, dcpl, H5P_DEFAULT));
  check(column.id.get(), path, "cannot create dataset '" + name + "'");
  column.memType = memType;
  column.row = row;
  column.name = name;
  return column;
}

void appendRow(Column& column, const void* data, const std::string& path) {
  const int rank = 1 + static_cast<int>(column.row.size());
  std::vector<hsize_t> dims(rank), start(rank, 0), count(rank);
  dims[0] = column.rows + 1;
  start[0] = column.rows;
  count[0] = 1;
  for (size_t i = 0; i < column.row.size(); ++i) dims[i + 1] = count[i + 1] = column.row[i];
  check(H5Dset_extent(column.id, dims.data()), path, "cannot extend '" + column.name + "'");
  Hid fileSpace(H5Dget_space(column.id));
  check(fileSpace.get(), path, "cannot get the dataspace of '" + column.name + "'");
  check(H5Sselect_hyperslab(fileSpace, H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr), path,
        "cannot select a row of '" + column.name + "'");
  Hid memSpace(H5Screate_simple(rank, count.data(), nullptr));
  check(H5Dwrite(column.id, column.memType, memSpace, fileSpace, H5P_DEFAULT, data), path,
        "cannot write a row of '" + column.name + "'");
  ++column.rows;
}

namespace {
void readShape(Column& column, const std::string& path) {
  Hid space(H5Dget_space(column.id));
  check(space.get(), path, "cannot get the dataspace of '" + column.name + "'");
  const int rank = H5Sget_simple_extent_ndims(space);
  if (rank < 1) throw RunFileError("run file '" + path + "': dataset '" + column.name + "' is not an array");
  std::vector<hsize_t> dims(rank);
  H5Sget_simple_extent_dims(space, dims.data(), nullptr);
  column.rows = dims[0];
  column.row.assign(dims.begin() + 1, dims.end());
}
}  // namespace

Column openColumn(hid_t loc, const std::string& name, hid_t memType, hid_t dapl, const std::string& path) {
  Column column;
  column.name = name;
  column.id = Hid(H5Dopen2(loc, name.c_str(), dapl));
  check(column.id.get(), path, "cannot open dataset '" + name + "'");
  column.memType = memType;
  readShape(column, path);
  return column;
}

Column openStringColumn(hid_t loc, const std::string& name, hid_t dapl, const std::string& path) {
  Column column = openColumn(loc, name, H5I_INVALID_HID, dapl, path);
  Hid type(H5Dget_type(column.id));
  if (H5Tget_class(type) != H5T_STRING || H5Tis_variable_str(type) > 0)
    throw RunFileError("run file '" + path + "': dataset '" + name + "' is not a fixed-length string array");
  column.ownedType = stringType(H5Tget_size(type));
  column.memType = column.ownedType;
  return column;
}

void refreshColumn(Column& column, bool inProcessWriter, const std::string& path) {
  if (!inProcessWriter) check(H5Drefresh(column.id), path, "cannot refresh '" + column.name + "'");
  readShape(column, path);
}

void readRows(const Column& column, hsize_t first, hsize_t count, void* out, const std::string& path) {
  if (count == 0) return;
  const int rank = 1 + static_cast<int>(column.row.size());
  std::vector<hsize_t> start(rank, 0), extent(rank);
  start[0] = first;
  extent[0] = count;
  for (size_t i = 0; i < column.row.size(); ++i) extent[i + 1] = column.row[i];
  Hid fileSpace(H5Dget_space(column.id));
  check(fileSpace.get(), path, "cannot get the dataspace of '" + column.name + "'");
  check(H5Sselect_hyperslab(fileSpace, H5S_SELECT_SET, start.data(), nullptr, extent.data(), nullptr), path,
        "cannot select rows of '" + column.name + "'");
  Hid memSpace(H5Screate_simple(rank, extent.data(), nullptr));
  check(H5Dread(column.id, column.memType, memSpace, fileSpace, H5P_DEFAULT, out), path,
        "cannot read '" + column.name + "'");
}

std::vector<std::string> readStrings(const Column& column, hsize_t first, hsize_t count, const std::string& path) {
  const size_t bytes = column.elementBytes();
  std::vector<char> buffer(count * bytes);
  readRows(column, first, count, buffer.data(), path);
  return splitFixed(buffer, count, bytes);
}

void writeFixed(hid_t loc, const std::string& name, hid_t fileType, hid_t memType, const std::vector<hsize_t>& dims,
                const void* data, const std::string& path) {
  Hid space(dims.empty() ? H5Screate(H5S_SCALAR)
                         : H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr));
  Hid dset(H5Dcreate2(loc, name.c_str(), fileType, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
  check(dset.get(), path, "cannot create dataset '" + name + "'");
  check(H5Dwrite(dset, memType, H5S_ALL, H5S_ALL, H5P_DEFAULT, data), path, "cannot write dataset '" + name + "'");
}

void writeStrings(hid_t loc, const std::string& name, const std::vector<std::string>& values, const std::string& path) {
  size_t bytes = 1;
  for (const auto& v : values) bytes = std::max(bytes, v.size());
  Hid type = stringType(bytes);
  std::vector<char> buffer(bytes * values.size(), '\0');
  for (size_t i = 0; i < values.size(); ++i) std::memcpy(buffer.data() + i * bytes, values[i].data(), values[i].size());
  writeFixed(loc, name, type, type, {values.size()}, buffer.data(), path);
}

std::vector<char> readFixed(hid_t loc, const std::string& name, hid_t memType, std::vector<hsize_t>& dims,
                            const std::string& path) {
  Hid dset(H5Dopen2(loc, name.c_str(), H5P_DEFAULT));
  check(dset.get(), path, "cannot open dataset '" + name + "'");
  Hid space(H5Dget_space(dset));
  const int rank = H5Sget_simple_extent_ndims(space);
  check(rank, path, "cannot get the dataspace of '" + name + "'");
  dims.assign(rank, 0);
  H5Sget_simple_extent_dims(space, dims.data(), nullptr);
  const hssize_t n = H5Sget_simple_extent_npoints(space);
  std::vector<char> buffer(static_cast<size_t>(n) * H5Tget_size(memType));
  if (n > 0)
    check(H5Dread(dset, memType, H5S_ALL, H5S_ALL, H5P_DEFAULT, buffer.data()), path, "cannot read '" + name + "'");
  return buffer;
}

std::vector<std::string> readStringDataset(hid_t loc, const std::string& name, const std::string& path) {
  Hid dset(H5Dopen2(loc, name.c_str(), H5P_DEFAULT));
  check(dset.get(), path, "cannot open dataset '" + name + "'");
  Hid type(H5Dget_type(dset));
  if (H5Tget_class(type) != H5T_STRING || H5Tis_variable_str(type) > 0)
    throw RunFileError("run file '" + path + "': dataset '" + name + "' is not a fixed-length string array");
  const size_t bytes = H5Tget_size(type);
  Hid mem = stringType(bytes);
  std::vector<hsize_t> dims;
  const std::vector<char> buffer = readFixed(loc, name, mem, dims, path);
  return splitFixed(buffer, buffer.size() / bytes, bytes);
}

}  // namespace hh::runs::h5

namespace hh::runs::h5 {
namespace {
struct flock lockRange(short type) {
  struct flock fl {};
  fl.l_type = type;
  fl.l_whence = SEEK_SET;
  fl.l_start = static_cast<off_t>(kWriterLockOffset);
  fl.l_len = 1;
  fl.l_pid = 0;  // required 0 for OFD locks
  return fl;
}
}  // namespace

int lockAsWriter(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  struct flock fl = lockRange(F_RDLCK);
  if (::fcntl(fd, F_OFD_SETLK, &fl) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

void unlockWriter(int fd) {
  if (fd >= 0) ::close(fd);
}

bool writerLockHeld(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  struct flock fl = lockRange(F_WRLCK);
  const bool held = ::fcntl(fd, F_OFD_GETLK, &fl) == 0 && fl.l_type != F_UNLCK;
  ::close(fd);
  return held;
}
}  // namespace hh::runs::h5
