// Durable, atomic file replacement (see durable_file.h).
#include "engine/io/durable_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>

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

// Writes all of `text` to fd; 0, or the errno that stopped it (ENOSPC for a write of 0 bytes).
int writeAll(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno;
    if (n == 0) return ENOSPC;
    done += static_cast<size_t>(n);
  }
  return 0;
}

// fsync of an open file, again when a signal interrupts it; 0 or the errno.
int syncOpenFile(int fd) {
  while (::fsync(fd) != 0)
    if (errno != EINTR) return errno;
  return 0;
}

}  // namespace

void syncFile(const std::string& path) { syncPath(path, O_RDONLY, "file"); }

void syncDirectory(const std::string& path) {
  syncPath(path.empty() ? std::string(".") : path, O_RDONLY | O_DIRECTORY, "folder");
}

void writeFileAtomically(const std::string& path, const std::string& text) {
  const std::string tmp = temporaryName(path);
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw std::runtime_error("cannot create '" + tmp + "': " + std::strerror(errno));
  const auto giveUp = [&](const std::string& what, const std::string& reason) {
    std::error_code ignored;
    std::filesystem::remove(tmp, ignored);
    throw std::runtime_error(what + ": " + reason);
  };
  const int writeError = writeAll(fd, text);
  const int syncError = writeError == 0 ? syncOpenFile(fd) : 0;
  ::close(fd);
  if (writeError != 0) giveUp("cannot write '" + tmp + "'", std::strerror(writeError));
  if (syncError != 0) giveUp("cannot sync '" + tmp + "'", std::strerror(syncError));
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) giveUp("cannot rename '" + tmp + "' to '" + path + "'", ec.message());
  syncDirectory(std::filesystem::path(path).parent_path().string());
}

}  // namespace hh::io
