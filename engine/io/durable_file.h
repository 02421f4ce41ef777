// Writes that survive a kill -9 or a power cut at any instant: the reader sees either the old
// file or the new one, never a torn one. The recipe (write a temporary file beside the target,
// fsync it, rename it over the target, fsync the folder so the rename itself is on disk) is the
// one every checkpoint, state file and exported model of the jobs goes through.
#pragma once
#include <string>

namespace hh::io {

// fsync of a regular file (opened read-only) or of a folder (makes renames in it durable).
// Throws std::runtime_error naming the path when it cannot be opened or synced.
void syncFile(const std::string& path);
void syncDirectory(const std::string& path);

// `text` to a temporary file beside `path` (`path.tmp.<pid>.<n>`: unique to the call, so writers
// of the same file in several processes or threads never share one), fsync, rename over `path`,
// fsync of the parent folder. Of concurrent writers the last rename wins, whole. A failed write
// removes its temporary file; a killed one leaves it behind (never read).
void writeFileAtomically(const std::string& path, const std::string& text);

}  // namespace hh::io
