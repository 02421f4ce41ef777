// UTF-8 and Unicode helpers for the tokenizers (ICU 72 = Unicode 15 underneath).
// Decoding is strict (no overlongs, no surrogates, nothing above U+10FFFF); an invalid or
// truncated sequence decodes as U+FFFD with length 1, so a scanner consumes every input byte
// exactly once and byte-level tokenizers still round-trip the original bytes.
// Character classes are named after the tokenizer that defines them:
//   gpt2Class   the classes of GPT-2's pre-tokenizer regex as JavaScript's /u regex (the
//               reference encoder) reads them: \p{L} = general category L*, \p{N} = N*, \s =
//               ECMAScript WhiteSpace + LineTerminator (TAB VT FF CR LF, Zs, U+FEFF, U+2028/9).
//               Differs from Python/Rust White_Space only on U+0085 (not \s) and U+FEFF (\s).
//   isWhiteSpace, isControl, isBertPunctuation, isCjk: BERT's normalizer and pre-tokenizer as
//               Hugging Face tokenizers defines them (Rust char::is_whitespace = White_Space;
//               control = general category C* except \t \n \r; punctuation = ASCII punctuation
//               or general category P*).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace hh::tok::text {

constexpr char32_t kReplacement = 0xFFFD;

// Decodes the code point starting at s[i] (i < s.size()); returns its length in bytes.
size_t decodeUtf8(std::string_view s, size_t i, char32_t& cp);
void appendUtf8(std::string& out, char32_t cp);
size_t countCodePoints(std::string_view s);
bool isValidUtf8(std::string_view s);

enum class Gpt2Class : uint8_t { kLetter, kNumber, kSpace, kOther };
Gpt2Class gpt2Class(char32_t cp);

bool isWhiteSpace(char32_t cp);       // White_Space, plus \t \n \r
bool isControl(char32_t cp);          // general category Cc, Cf or Co, minus \t \n \r
bool isBertPunctuation(char32_t cp);  // ASCII punctuation or general category P*
bool isCjk(char32_t cp);              // CJK Unified Ideographs blocks BERT pads with spaces
bool isNonspacingMark(char32_t cp);   // general category Mn

// Unicode normalization forms. Invalid UTF-8 becomes U+FFFD.
enum class NormalForm { kNfc, kNfd, kNfkc, kNfkd };
std::string normalizeForm(std::string_view s, NormalForm form);
inline std::string nfd(std::string_view s) { return normalizeForm(s, NormalForm::kNfd); }
// Full Unicode lower-case mapping of each code point alone, root locale, as HF tokenizers
// lowercases (no final sigma: Σ -> σ everywhere; İ -> i̇). Invalid UTF-8 -> U+FFFD.
std::string toLower(std::string_view s);
// Every occurrence of `from` in s replaced by `to`, left to right, replacements not rescanned;
// nothing for an empty `from`.
void replaceAll(std::string& s, std::string_view from, std::string_view to);

}  // namespace hh::tok::text
