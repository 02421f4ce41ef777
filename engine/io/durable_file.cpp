// Durable, atomic file replacement (see durable_file.h).
#include "engine/io/durable_file.h"

#include <fcntl.h>
#include <unistd.h>

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

}  // namespace

void syncFile(const std::string& path) { syncPath(path, O_RDONLY, "file"); }

void syncDirectory(const std::string& path) {
  syncPath(path.empty() ? std::string(".") : path, O_RDONLY | O_DIRECTORY, "folder");
}

void writeFileAtomically(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw std::runtime_error("cannot create '" + tmp + "': " + std::strerror(errno));
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = errno;
      ::close(fd);
      std::filesystem::remove(tmp);
      throw std::runtime_error("cannot write '" + tmp + "': " + std::strerror(err));
    }
    done += static_cast<size_t>(n);
  }
  const bool synced = ::fsync(fd) == 0;
  const int err = errno;
  ::close(fd);
  if (!synced) throw std::runtime_error("cannot sync '" + tmp + "': " + std::strerror(err));
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) throw std::runtime_error("cannot rename '" + tmp + "' to '" + path + "': " + ec.message());
  syncDirectory(std::filesystem::path(path).parent_path().string());
}

}  // namespace hh::io
