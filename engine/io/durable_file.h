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

// `text` to `path + ".tmp"`, fsync, rename over `path`, fsync of the parent folder.
void writeFileAtomically(const std::string& path, const std::string& text);

}  // namespace hh::io
