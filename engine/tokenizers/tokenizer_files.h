// Internal helpers shared by the tokenizer loaders (tokenizer_files.cpp, tokenizer_json.cpp):
// reading and checking the files of tokenizer.h. Every problem is an hh::io::FormatError whose
// message starts with the file's path.
//   vocab.json   {"token": id, ...}              ids: non-negative integers
//   merges.txt   "#version: ..." (optional first line), then one "left right" pair per line
//   vocab.txt    one token per line, id = 0-based line number ("\r\n" accepted)
//   tokenizer_config.json / special_tokens_map.json: role keys bos_token, eos_token, pad_token,
//                unk_token, cls_token, sep_token, mask_token (string or {"content": string});
//                tokenizer_config.json's "added_tokens_decoder" {"id": {"content", "special",
//                "lstrip", "rstrip", "single_word"}} adds matched-as-a-unit tokens.
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "engine/tokenizers/tokenizer.h"

namespace hh::tok::files {

using Vocab = std::unordered_map<std::string, int64_t>;
using Merges = std::vector<std::pair<std::string, std::string>>;

bool exists(const std::string& path);
std::string join(const std::string& dir, const std::string& name);
std::string directoryOf(const std::string& path);
std::string readText(const std::string& path);  // FormatError when it cannot be read
nlohmann::json readJson(const std::string& path);

// Typed access into parsed JSON; `where` is "file: key path" for messages.
const nlohmann::json* find(const nlohmann::json& object, const char* key);  // nullptr when absent or null
std::string stringAt(const nlohmann::json& object, const char* key, const std::string& where,
                     const std::string& fallback);
bool boolAt(const nlohmann::json& object, const char* key, const std::string& where, bool fallback);
int64_t intAt(const nlohmann::json& object, const char* key, const std::string& where, int64_t fallback);

Vocab vocabFromJson(const nlohmann::json& vocab, const std::string& where);
Merges mergesFromJson(const nlohmann::json& merges, const std::string& where);  // "a b" or ["a", "b"]
Merges readMergesTxt(const std::string& path);
Vocab readVocabTxt(const std::string& path);

// Fills the special-token roles of `tok`: from tokenizer_config.json / special_tokens_map.json in
// `dir` when either exists, else by well-known names ("<s>", "[CLS]", "<|endoftext|>", ...).
// `modelUnk` (the model's own unknown token, "" if none) fills unk when nothing else does.
// With `addConfigTokens`, the config's added_tokens_decoder and role tokens that are in the
// vocabulary become added tokens (legacy files have no added_tokens list of their own).
void applyConfig(Tokenizer& tok, const std::string& dir, const std::string& modelUnk, bool addConfigTokens);

// The config value of `key` in tokenizer_config.json in `dir`, if the file and key exist.
std::optional<nlohmann::json> configValue(const std::string& dir, const char* key);

}  // namespace hh::tok::files
