// Read-only memory mapping of a whole file (POSIX mmap), RAII: the object owns the descriptor and
// the mapping and releases both in its destructor. Move-only. An empty file maps to size 0 with a
// null data pointer. Errors throw std::runtime_error naming the file.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace hh::io {

class MappedFile {
 public:
  MappedFile() = default;
  explicit MappedFile(const std::string& path);
  ~MappedFile();
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }
  // Tells the kernel the pages wholly inside [begin, begin + size) are not needed for now: they
  // leave this process's resident memory (the page cache keeps them; reading them again faults
  // them back in from the file). For a reader that copies each tensor once, so a loaded model
  // does not also hold its file's pages.
  void dropPages(const uint8_t* begin, size_t size) const noexcept;

 private:
  void release() noexcept;

  std::string path_;
  int fd_ = -1;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace hh::io
