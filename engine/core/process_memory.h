// Memory of this process as the kernel counts it (Linux /proc/self/status), for the CLI's and the
// workbench's readouts and the benchmarks. Elsewhere every value is 0 and resetting does nothing.
#pragma once
#include <cstdint>

namespace hh {

int64_t residentBytes();      // VmRSS: resident now
int64_t peakResidentBytes();  // VmHWM: the peak of VmRSS since start (or since resetPeakResident)
void resetPeakResident();     // sets the peak to the current resident size (/proc/self/clear_refs)
// Gives the allocator's free pages back to the system (tcmalloc's ReleaseFreeMemory when it is
// the allocator, else glibc's malloc_trim): called when a model is loaded or dropped and when a
// job ends, so that memory a finished piece of work used is not held until the process exits.
void releaseFreeMemory();

}  // namespace hh
