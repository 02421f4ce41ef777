#include "engine/core/process_memory.h"

#include <dlfcn.h>
#include <malloc.h>

#include <fstream>
#include <string>

namespace hh {
namespace {

// "VmRSS:     1234 kB" -> 1234 * 1024; 0 when the file or the field is missing.
int64_t statusFieldBytes(const std::string& key) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key, 0) != 0) continue;
    try {
      return std::stoll(line.substr(key.size())) * 1024;
    } catch (const std::exception&) {
      return 0;
    }
  }
  return 0;
}

}  // namespace

int64_t residentBytes() { return statusFieldBytes("VmRSS:"); }
int64_t peakResidentBytes() { return statusFieldBytes("VmHWM:"); }
void resetPeakResident() { std::ofstream("/proc/self/clear_refs") << "5"; }

void releaseFreeMemory() {
  // tcmalloc (linked into the executables when installed) keeps freed pages for reuse; its C
  // entry point returns them. Looked up at run time: the engine does not link tcmalloc itself.
  using Release = void (*)();
  static const auto tcmalloc = reinterpret_cast<Release>(::dlsym(RTLD_DEFAULT, "MallocExtension_ReleaseFreeMemory"));
  if (tcmalloc != nullptr) {
    tcmalloc();
    return;
  }
#if defined(__GLIBC__)
  ::malloc_trim(0);
#endif
}

}  // namespace hh
