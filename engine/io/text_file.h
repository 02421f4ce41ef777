// Whole-file reads of the small text files the engine parses (config.json, tokenizer files,
// sharded indexes, corpus documents). Each caller turns a failure into its own error type, which
// names the file and what the file was for.
#pragma once
#include <optional>
#include <string>

namespace hh::io {

// The file's bytes; std::nullopt when it cannot be opened or a read fails.
std::optional<std::string> readWholeFile(const std::string& path);

}  // namespace hh::io
