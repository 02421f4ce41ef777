// UTF-8 codec and Unicode classes for the tokenizers; see unicode_text.h.
#include "engine/tokenizers/unicode_text.h"

#include <unicode/locid.h>
#include <unicode/normalizer2.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <stdexcept>

namespace hh::tok::text {

size_t decodeUtf8(std::string_view s, size_t i, char32_t& cp) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  if (b0 < 0x80) {
    cp = b0;
    return 1;
  }
  size_t len;
  char32_t value, min;
  if ((b0 & 0xE0) == 0xC0) {
    len = 2, value = b0 & 0x1F, min = 0x80;
  } else if ((b0 & 0xF0) == 0xE0) {
    len = 3, value = b0 & 0x0F, min = 0x800;
  } else if ((b0 & 0xF8) == 0xF0) {
    len = 4, value = b0 & 0x07, min = 0x10000;
  } else {
    cp = kReplacement;
    return 1;
  }
  if (i + len > s.size()) {
    cp = kReplacement;
    return 1;
  }
  for (size_t k = 1; k < len; ++k) {
    const auto b = static_cast<unsigned char>(s[i + k]);
    if ((b & 0xC0) != 0x80) {
      cp = kReplacement;
      return 1;
    }
    value = (value << 6) | (b & 0x3F);
  }
  if (value < min || value > 0x10FFFF || (value >= 0xD800 && value <= 0xDFFF)) {
    cp = kReplacement;
    return 1;
  }
  cp = value;
  return len;
}

void appendUtf8(std::string& out, char32_t cp) {
  if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) cp = kReplacement;
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

size_t countCodePoints(std::string_view s) {
  size_t n = 0;
  char32_t cp;
  for (size_t i = 0; i < s.size(); ++n) i += decodeUtf8(s, i, cp);
  return n;
}

bool isValidUtf8(std::string_view s) {
  char32_t cp;
  for (size_t i = 0; i < s.size();) {
    const size_t len = decodeUtf8(s, i, cp);
    if (cp == kReplacement && len == 1 && static_cast<unsigned char>(s[i]) >= 0x80) return false;
    i += len;
  }
  return true;
}

namespace {
bool isJsWhitespace(char32_t cp) {
  switch (cp) {
    case 0x09: case 0x0A: case 0x0B: case 0x0C: case 0x0D: case 0x20: case 0xA0: case 0xFEFF:
    case 0x2028: case 0x2029:
      return true;
    default:
      return cp > 0x7F && u_charType(static_cast<UChar32>(cp)) == U_SPACE_SEPARATOR;
  }
}

Gpt2Class classifySlow(char32_t cp) {
  if (isJsWhitespace(cp)) return Gpt2Class::kSpace;
  const auto mask = U_GET_GC_MASK(static_cast<UChar32>(cp));
  if (mask & U_GC_L_MASK) return Gpt2Class::kLetter;
  if (mask & U_GC_N_MASK) return Gpt2Class::kNumber;
  return Gpt2Class::kOther;
}

const std::array<Gpt2Class, 128>& asciiClasses() {
  static const auto table = [] {
    std::array<Gpt2Class, 128> t{};
    for (char32_t c = 0; c < 128; ++c) t[c] = classifySlow(c);
    return t;
  }();
  return table;
}
}  // namespace

Gpt2Class gpt2Class(char32_t cp) {
  if (cp < 128) return asciiClasses()[cp];
  return classifySlow(cp);
}

bool isWhiteSpace(char32_t cp) {
  return cp == '\t' || cp == '\n' || cp == '\r' || u_isUWhiteSpace(static_cast<UChar32>(cp));
}

bool isControl(char32_t cp) {
  if (cp == '\t' || cp == '\n' || cp == '\r') return false;
  // Cc, Cf and Co, as HF tokenizers' BERT normalizer has it: an unassigned character (Cn) stays.
  return (U_GET_GC_MASK(static_cast<UChar32>(cp)) & (U_GC_CC_MASK | U_GC_CF_MASK | U_GC_CO_MASK)) != 0;
}

bool isBertPunctuation(char32_t cp) {
  if ((cp >= 33 && cp <= 47) || (cp >= 58 && cp <= 64) || (cp >= 91 && cp <= 96) || (cp >= 123 && cp <= 126))
    return true;
  return (U_GET_GC_MASK(static_cast<UChar32>(cp)) & U_GC_P_MASK) != 0;
}

bool isCjk(char32_t cp) {
  return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) || (cp >= 0x20000 && cp <= 0x2A6DF) ||
         (cp >= 0x2A700 && cp <= 0x2B73F) || (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B920 && cp <= 0x2CEAF) ||
         (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

bool isNonspacingMark(char32_t cp) { return u_charType(static_cast<UChar32>(cp)) == U_NON_SPACING_MARK; }

std::string normalizeForm(std::string_view s, NormalForm form) {
  UErrorCode status = U_ZERO_ERROR;
  const icu::Normalizer2* norm = form == NormalForm::kNfc    ? icu::Normalizer2::getNFCInstance(status)
                                 : form == NormalForm::kNfd  ? icu::Normalizer2::getNFDInstance(status)
                                 : form == NormalForm::kNfkc ? icu::Normalizer2::getNFKCInstance(status)
                                                             : icu::Normalizer2::getNFKDInstance(status);
  if (U_FAILURE(status)) throw std::runtime_error(std::string("ICU: no normalizer: ") + u_errorName(status));
  const auto in = icu::UnicodeString::fromUTF8(icu::StringPiece(s.data(), static_cast<int32_t>(s.size())));
  const icu::UnicodeString out = norm->normalize(in, status);
  if (U_FAILURE(status)) throw std::runtime_error(std::string("ICU: normalization failed: ") + u_errorName(status));
  std::string result;
  out.toUTF8String(result);
  return result;
}

std::string toLower(std::string_view s) {
  if (std::all_of(s.begin(), s.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; })) {
    std::string ascii(s);
    for (char& c : ascii) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return ascii;
  }
  const auto u = icu::UnicodeString::fromUTF8(icu::StringPiece(s.data(), static_cast<int32_t>(s.size())));
  icu::UnicodeString lowered;
  // Each code point alone (its full mapping, no context): HF tokenizers lowercases char by char,
  // so a final capital sigma becomes σ, not ς.
  for (int32_t i = 0; i < u.length(); i = u.moveIndex32(i, 1)) {
    icu::UnicodeString one(u.char32At(i));
    lowered.append(one.toLower(icu::Locale::getRoot()));
  }
  std::string result;
  lowered.toUTF8String(result);
  return result;
}

void replaceAll(std::string& s, std::string_view from, std::string_view to) {
  if (from.empty()) return;
  for (size_t pos = s.find(from); pos != std::string::npos; pos = s.find(from, pos + to.size()))
    s.replace(pos, from.size(), to);
}

}  // namespace hh::tok::text
