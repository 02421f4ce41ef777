// Writes that survive a kill -9 or a power cut at any instant: the reader sees either the old
// file or the new one, never a torn one. The recipe (write a temporary file beside the target,
// fsync it, rename it over the target, fsync the folder so the rename itself is on disk) is the
// one every checkpoint, state file and exported model of the jobs goes through.
#pragma once
#include <cstddef>
#include <string>

namespace hh::io {

// fsync of a regular file (opened read-only) or of a folder (makes renames in it durable).
// Throws std::runtime_error naming the path when it cannot be opened or synced.
void syncFile(const std::string& path);
void syncDirectory(const std::string& path);

// A file written under a temporary name beside `path` (`path.tmp.<pid>.<n>`: unique to the
// object, so writers of the same file in several processes or threads never share one) and put in
// place by commit(): fsync, rename over `path`, fsync of the parent folder. Destroyed without a
// commit (an error, an exception), it removes the temporary file. Errors are std::runtime_error
// naming the file.
class AtomicFile {
 public:
  explicit AtomicFile(std::string path);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(const void* data, size_t bytes);  // all of it, or throws
  void commit();

 private:
  [[noreturn]] void giveUp(const std::string& what, int error);

  std::string path_, temporary_;
  int fd_ = -1;
  bool committed_ = false;
};

// `text` to `path` through an AtomicFile. Of concurrent writers the last rename wins, whole. A
// killed writer leaves its temporary file behind (never read).
void writeFileAtomically(const std::string& path, const std::string& text);

}  // namespace hh::io
