// Internal to engine/runs (not public API): RAII ownership of HDF5 ids, HDF5 errors turned into
// RunFileError, and the few dataset and attribute operations the run store needs, on the C API
// (SWMR needs control the C++ wrapper does not give).
#pragma once
#include <hdf5.h>

#include <cstddef>
#include <limits>
#include <string>
#include <vector>

#include "engine/runs/run_layout.h"

namespace hh::runs {
// What the run file stores for a number not measured (docs/run_file.md).
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr float kNaNf = std::numeric_limits<float>::quiet_NaN();
}  // namespace hh::runs

namespace hh::runs::h5 {

// Owns one id (file, group, dataset, dataspace, datatype, property list); closes it through
// H5Idec_ref, silently. Files are closed explicitly with H5Fclose where the result matters.
class Hid {
 public:
  Hid() = default;
  explicit Hid(hid_t id) : id_(id) {}
  ~Hid() { reset(); }
  Hid(Hid&& other) noexcept : id_(other.release()) {}
  Hid& operator=(Hid&& other) noexcept;
  Hid(const Hid&) = delete;
  Hid& operator=(const Hid&) = delete;
  operator hid_t() const { return id_; }  // NOLINT: passes straight into C calls
  hid_t get() const { return id_; }
  bool valid() const { return id_ >= 0; }
  hid_t release();
  void reset();

 private:
  hid_t id_ = H5I_INVALID_HID;
};

// While alive, HDF5 prints nothing on this thread (its error stack is per thread in the
// thread-safe build Debian ships); the previous handler comes back afterwards. Every public entry
// point of the run store holds one.
class Quiet {
 public:
  Quiet();
  ~Quiet();
  Quiet(const Quiet&) = delete;
  Quiet& operator=(const Quiet&) = delete;

 private:
  H5E_auto2_t func_ = nullptr;
  void* data_ = nullptr;
};

// The reasons on this thread's HDF5 error stack as one line (outermost first), then clears it.
std::string takeErrorStack();
// Throws RunFileError("run file 'PATH': WHAT (HDF5: reasons)").
[[noreturn]] void fail(const std::string& path, const std::string& what);
template <typename T>
T check(T result, const std::string& path, const std::string& what) {
  if (result < 0) fail(path, what);
  return result;
}

// Fixed-length UTF-8 string type of `bytes` bytes, NUL-padded.
Hid stringType(size_t bytes);
// `text` cut to at most `bytes` bytes without splitting a UTF-8 sequence.
std::string fitUtf8(const std::string& text, size_t bytes);
// Splits `count` fixed-length fields of `bytes` each, dropping NUL padding.
std::vector<std::string> splitFixed(const std::vector<char>& buffer, size_t count, size_t bytes);

// Attributes: created before SWMR starts, never changed afterwards. Strings are fixed-length,
// exactly as long as the value (at least 1 byte).
void setAttr(hid_t obj, const std::string& name, const std::string& value, const std::string& path);
void setAttr(hid_t obj, const std::string& name, const std::vector<std::string>& values, const std::string& path);
void setAttr(hid_t obj, const std::string& name, int64_t value, const std::string& path);
void setAttr(hid_t obj, const std::string& name, double value, const std::string& path);
bool hasAttr(hid_t obj, const std::string& name);
std::string stringAttr(hid_t obj, const std::string& name, const std::string& path);  // fixed or variable length
std::vector<std::string> stringsAttr(hid_t obj, const std::string& name, const std::string& path);  // 1-D, fixed length
int64_t intAttr(hid_t obj, const std::string& name, const std::string& path);
double doubleAttr(hid_t obj, const std::string& name, const std::string& path);

bool exists(hid_t loc, const std::string& name);
Hid createGroup(hid_t loc, const std::string& name, const std::string& path);  // tracks creation order
Hid openGroup(hid_t loc, const std::string& name, const std::string& path);
std::vector<std::string> childNames(hid_t group, const std::string& path);  // in creation order

// One extendable dataset: dims [rows, row...], max [unlimited, row...], chunked.
struct Column {
  Hid id;
  hid_t memType = H5I_INVALID_HID;  // in-memory element type (native, or ownedType)
  Hid ownedType;                    // string types
  std::vector<hsize_t> row;         // dims of one row
  hsize_t rows = 0;                 // rows written (writer) or visible (reader)
  std::string name;                 // path inside the file, for messages
  size_t rowElements() const;
  size_t elementBytes() const { return H5Tget_size(memType); }
};

// Creates `loc/name` with `fileType` elements, zero rows, chunks of at most ~1 MiB starting from
// [chunkRows, row...], and `fill` (one element of memType) for rows not yet written.
Column createColumn(hid_t loc, const std::string& name, hid_t fileType, hid_t memType, const std::vector<hsize_t>& row,
                    hsize_t chunkRows, const void* fill, const std::string& path);
// Extends by one row and writes `data` (rowElements() elements of memType).
void appendRow(Column& column, const void* data, const std::string& path);
// Opens an existing column; rows = current first dim. `memType` for strings is taken from the file.
Column openColumn(hid_t loc, const std::string& name, hid_t memType, hid_t dapl, const std::string& path);
Column openStringColumn(hid_t loc, const std::string& name, hid_t dapl, const std::string& path);
// SWMR readers: H5Drefresh (unless `inProcessWriter`: then this process's writer shares the
// file's metadata cache, which is always current, and a refresh would evict the writer's own
// entries), then re-read the first dim into rows.
void refreshColumn(Column& column, bool inProcessWriter, const std::string& path);
// Reads rows [first, first + count) into `out` (count * rowElements() elements of memType).
void readRows(const Column& column, hsize_t first, hsize_t count, void* out, const std::string& path);
std::vector<std::string> readStrings(const Column& column, hsize_t first, hsize_t count, const std::string& path);

// Small fixed datasets written once before SWMR: `dims` may be {} (scalar).
void writeFixed(hid_t loc, const std::string& name, hid_t fileType, hid_t memType, const std::vector<hsize_t>& dims,
                const void* data, const std::string& path);
void writeStrings(hid_t loc, const std::string& name, const std::vector<std::string>& values, const std::string& path);
// Reads a whole fixed dataset of `memType` elements; dims returned through `dims`.
std::vector<char> readFixed(hid_t loc, const std::string& name, hid_t memType, std::vector<hsize_t>& dims,
                            const std::string& path);
std::vector<std::string> readStringDataset(hid_t loc, const std::string& name, const std::string& path);

}  // namespace hh::runs::h5

namespace hh::runs::h5 {
// Liveness of the writer, outside HDF5 (which drops its own file lock once SWMR starts): the writer
// holds an open-file-description read lock on one byte far past the end of the file, released by
// the kernel when the writer closes or dies. Advisory, never touches data.
constexpr long long kWriterLockOffset = 1LL << 62;
int lockAsWriter(const std::string& path);  // returns the fd holding the lock, or -1
void unlockWriter(int fd);
bool writerLockHeld(const std::string& path);  // false when nobody holds it or it cannot be told
}  // namespace hh::runs::h5
