// Durable, atomic file replacement (see durable_file.h).
#include "engine/io/durable_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <utility>

namespace hh::io {
namespace {

void syncPath(const std::string& path, int flags, const char* what) {
  const int fd = ::open(path.c_str(), flags | O_CLOEXEC);
  if (fd < 0) throw std::runtime_error(std::string("cannot open ") + what + " '" + path + "' to sync it: " + std::strerror(errno));
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0) throw std::runtime_error(std::string("cannot sync ") + what + " '" + path + "': " + std::strerror(err));
}

// A temporary name beside `path` that no other call, in this process or another, uses at once.
std::string temporaryName(const std::string& path) {
  static std::atomic<unsigned long> written{0};
  return path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(written++);
}

}  // namespace

void syncFile(const std::string& path) { syncPath(path, O_RDONLY, "file"); }

void syncDirectory(const std::string& path) {
  syncPath(path.empty() ? std::string(".") : path, O_RDONLY | O_DIRECTORY, "folder");
}

AtomicFile::AtomicFile(std::string path) : path_(std::move(path)), temporary_(temporaryName(path_)) {
  fd_ = ::open(temporary_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) throw std::runtime_error("cannot create '" + temporary_ + "': " + std::strerror(errno));
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) {
    std::error_code ignored;
    std::filesystem::remove(temporary_, ignored);
  }
}

void AtomicFile::giveUp(const std::string& what, int error) {
  throw std::runtime_error(what + " '" + temporary_ + "': " + std::strerror(error));
}

void AtomicFile::write(const void* data, size_t bytes) {
  const char* from = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::write(fd_, from, bytes);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) giveUp("cannot write", n < 0 ? errno : ENOSPC);  // 0 bytes written: the disk is full
    from += n;
    bytes -= static_cast<size_t>(n);
  }
}

void AtomicFile::commit() {
  while (::fsync(fd_) != 0)  // on disk before the rename: a crash must not expose a torn file
    if (errno != EINTR) giveUp("cannot sync", errno);
  const int closed = ::close(fd_);
  fd_ = -1;
  if (closed != 0) giveUp("cannot close", errno);
  std::error_code ec;
  std::filesystem::rename(temporary_, path_, ec);
  if (ec) throw std::runtime_error("cannot rename '" + temporary_ + "' to '" + path_ + "': " + ec.message());
  committed_ = true;
  syncDirectory(std::filesystem::path(path_).parent_path().string());
}

void writeFileAtomically(const std::string& path, const std::string& text) {
  AtomicFile file(path);
  file.write(text.data(), text.size());
  file.commit();
}

}  // namespace hh::io
