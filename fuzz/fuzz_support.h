// Shared pieces of the libFuzzer targets (docs/reliability.md, "Fuzzing"): a scratch folder
// per process under /dev/shm (or $TMPDIR), files in it rewritten in place on every exec (no
// per-exec mkdir or unique names: the targets spend their time parsing, not in the file system),
// and the split of one input into several files.
#pragma once
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace hh::fuzz {

// Separates the files of a multi-file input ("vocab.json<sep>merges.txt<sep>tokenizer_config.json").
// A line of its own so that seeds assembled by scripts/fuzz.sh stay readable; fuzz/*.dict lists it.
constexpr std::string_view kFileSeparator = "\n#--hh-fuzz-next-file--\n";

// <base>/hh-fuzz-<target>-<pid>, created once; removed at exit (best effort).
inline const std::string& scratchDir(const char* target) {
  static const std::string dir = [target] {
    std::filesystem::path base = "/dev/shm";
    std::error_code ec;
    if (!std::filesystem::is_directory(base, ec)) {
      const char* tmp = std::getenv("TMPDIR");
      base = tmp != nullptr && *tmp != '\0' ? tmp : "/tmp";
    }
    const auto path = base / ("hh-fuzz-" + std::string(target) + "-" + std::to_string(::getpid()));
    std::filesystem::create_directories(path);
    static const std::string removeAtExit = path.string();
    std::atexit([] {
      std::error_code ignored;
      std::filesystem::remove_all(removeAtExit, ignored);
    });
    return path.string();
  }();
  return dir;
}

// Writes `bytes` to `path` (truncating); aborts when the scratch file system fails, since every
// later exec would then test nothing.
inline void writeFile(const std::string& path, std::string_view bytes) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr || (!bytes.empty() && std::fwrite(bytes.data(), 1, bytes.size(), f) != bytes.size()) ||
      std::fclose(f) != 0) {
    std::perror(path.c_str());
    std::abort();
  }
}

inline void removeFile(const std::string& path) { std::remove(path.c_str()); }

// Up to `parts` pieces split at kFileSeparator; the last piece keeps any further separators.
inline std::vector<std::string_view> splitFiles(const uint8_t* data, size_t size, size_t parts) {
  std::string_view rest(reinterpret_cast<const char*>(data), size);
  std::vector<std::string_view> out;
  while (out.size() + 1 < parts) {
    const size_t at = rest.find(kFileSeparator);
    if (at == std::string_view::npos) break;
    out.push_back(rest.substr(0, at));
    rest.remove_prefix(at + kFileSeparator.size());
  }
  out.push_back(rest);
  return out;
}

// Copies tensor `name`'s bytes out of a safetensors file or model (SafetensorsFile or
// ShardedSafetensors), as a reader does; AddressSanitizer reports a range outside the mapping.
template <class File>
void copyBytes(const File& file, const std::string& name) {
  const auto size = file.info(name).size;
  std::vector<uint8_t> out(static_cast<size_t>(size));
  if (size > 0) std::memcpy(out.data(), file.bytes(name), out.size());
}

// A parser that rejects a file must say which file: the CLI and the workbench show the message as
// it is, so it has to name the folder the input lies in (`dir`) or one of its files (`names`). A
// message that names neither (std::stoll's bare "stoll", say) aborts, and libFuzzer keeps the
// input as a crash (docs/reliability.md, "Fuzzing").
inline void requireNamesFile(const std::exception& e, const std::string& dir, const std::vector<std::string>& names) {
  const std::string_view what = e.what();
  if (what.find(dir) != std::string_view::npos) return;
  for (const auto& name : names)
    if (what.find(name) != std::string_view::npos) return;
  std::fprintf(stderr, "hh-fuzz: a rejection that names no file (%s): %s\n", dir.c_str(), e.what());
  std::abort();
}

inline std::string_view asText(const uint8_t* data, size_t size) {
  return std::string_view(reinterpret_cast<const char*>(data), size);
}

}  // namespace hh::fuzz
