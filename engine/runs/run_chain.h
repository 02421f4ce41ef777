// The run files of one job's run folder, in the order they were written. A resumed job cannot
// reopen its HDF5 run file for writing, so it writes a continuation beside it
// (run-resumed-<S>.h5, starting after step S; docs/jobs.md). Readers that show a job from start
// to end (the experiment view, the experiment summary) read the chain, not run.h5 alone.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "engine/runs/run_reader.h"

namespace hh::runs {

// <dir>/run.h5 (if present), then <dir>/run-resumed-<S>.h5 by increasing S. Empty when the folder
// holds neither.
std::vector<std::string> runChain(const std::string& dir);

// S of a run-resumed-<S>.h5 path; 0 for any other name.
int64_t resumedAfter(const std::string& file);

// The chain `file` belongs to: runChain of its folder with `file` in its place, even when `file`
// is not written yet (a job about to write its continuation). A file named neither run.h5 nor
// run-resumed-<S>.h5 is a chain of its own: {file}.
std::vector<std::string> chainOf(const std::string& file);
// `file` and the continuations written after it: the part of chainOf(file) from `file` on.
std::vector<std::string> chainFrom(const std::string& file);

// Deletes the continuations of `dir` with S >= fromStep: a run started afresh (fromStep 1) or
// continued after step S (fromStep S + 1) must not be joined to an earlier run's later files.
// Returns how many were deleted; one that cannot be deleted throws, naming it.
int removeContinuations(const std::string& dir, int64_t fromStep);

// One scalar over the whole chain: each file's rows up to the step its continuation resumed
// from (a killed run may have logged steps past its last checkpoint, which the continuation
// redoes). A file without the scalar, or unreadable, contributes nothing.
ScalarSeries chainedScalars(const std::vector<std::string>& files, const std::string& name);

// Every scalar of the chain, joined as chainedScalars joins one, each file opened once: the
// names of every file (one only in a continuation included), in name order.
std::map<std::string, ScalarSeries> chainedAllScalars(const std::vector<std::string>& files);
// The same with files[0] already open as `first` (whose errors its caller has seen): no file
// is opened twice.
std::map<std::string, ScalarSeries> chainedAllScalars(const RunReader& first, const std::vector<std::string>& files);

// A run file's status as shown to people: "interrupted" when it says running but no writer has
// it open (a killed job), else its status's name.
std::string shownStatus(const RunReader& reader);

}  // namespace hh::runs
