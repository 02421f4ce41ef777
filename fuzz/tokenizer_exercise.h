// What the tokenizer targets do with a tokenizer that loaded: encode and decode a fixed text that
// touches every pre-tokenizer path (spaces, punctuation, digits, accents, CJK, emoji, special
// token strings) and the fuzz input itself as text, then decode ids it does not know.
#pragma once
#include <algorithm>
#include <climits>
#include <cstdint>
#include <exception>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "engine/tokenizers/tokenizer.h"
#include "fuzz/fuzz_support.h"

namespace hh::fuzz {

inline void exerciseTokenizer(const tok::Tokenizer& tok, std::string_view input) {
  static const std::string kText =
      "Hello world!  It's 2024: caf\xc3\xa9 na\xc3\xafve \xe4\xbd\xa0\xe5\xa5\xbd \xf0\x9f\x98\x80\t\n"
      "<|endoftext|> [CLS] [SEP] [MASK] <s> </s> <unk> don't ...";
  for (const std::string& text : {kText, std::string(input.substr(0, 4096))}) {
    for (const bool special : {false, true}) {
      const auto ids = tok.encode(text, special);
      (void)tok.decode(ids);
      (void)tok.decode(ids, /*skipSpecialTokens=*/true);
    }
  }
  const int64_t vocab = tok.vocabSize();
  std::vector<int64_t> ids{-1, vocab, vocab < INT64_MAX - 1000 ? vocab + 1000 : INT64_MAX, INT64_MAX, INT64_MIN};
  for (int64_t id = 0; id < std::min<int64_t>(vocab, 64); ++id) ids.push_back(id);
  (void)tok.decode(ids);
  for (const int64_t id : ids) (void)tok.tokenToId(tok.idToToken(id));
}

// One tokenizer target's whole exec: the input cut into the files `names` of a tokenizer folder
// (in order; a file past the input's parts is written empty) plus, when the input has one more
// part, the tokenizer_config.json beside them (else that file is absent); then loadTokenizer and,
// if it loads, exerciseTokenizer. Errors are exceptions and end the exec.
inline int fuzzTokenizerFolder(const char* target, const std::vector<std::string>& names, const uint8_t* data,
                               size_t size) {
  static std::string dir;  // one target per process
  if (dir.empty()) dir = scratchDir(target);
  const auto parts = splitFiles(data, size, names.size() + 1);
  for (size_t i = 0; i < names.size(); ++i)
    writeFile(dir + "/" + names[i], i < parts.size() ? parts[i] : std::string_view());
  if (parts.size() > names.size()) writeFile(dir + "/tokenizer_config.json", parts[names.size()]);
  else removeFile(dir + "/tokenizer_config.json");
  std::unique_ptr<tok::Tokenizer> tok;
  try {
    tok = tok::loadTokenizer(dir);
  } catch (const std::exception& e) {
    auto files = names;
    files.push_back("tokenizer_config.json");
    requireNamesFile(e, dir, files);
    return 0;
  }
  try {
    exerciseTokenizer(*tok, asText(data, size));
  } catch (const std::exception&) {
  }
  return 0;
}

}  // namespace hh::fuzz
