// loadTokenizerJson: a Hugging Face tokenizer.json to the matching tokenizer (tokenizer.h).
// Supported components (anything else is a FormatError naming it, rather than wrong ids):
//   model          BPE (merges as "a b" or ["a", "b"]), WordPiece
//   normalizer     null; BertNormalizer (WordPiece); Sequence of Prepend, Replace (String
//                  pattern), NFC/NFD/NFKC/NFKD, Lowercase (SentencePiece-style BPE)
//   pre_tokenizer  ByteLevel (optionally after a Split with GPT-2's own pattern), Metaspace,
//                  BertPreTokenizer, WhitespaceSplit, null, or a Sequence of these
//   post_processor TemplateProcessing (single), BertProcessing, RobertaProcessing, ByteLevel,
//                  Sequence
//   decoder        ByteLevel, WordPiece, Metaspace, Sequence (Replace/ByteFallback/Fuse/Strip)
// A BPE model with a ByteLevel pre-tokenizer or decoder is GPT-2 style; any other BPE is
// SentencePiece style. "dropout" is ignored (inference never drops merges).
#include <nlohmann/json.hpp>

#include "engine/io/safetensors.h"
#include "engine/tokenizers/byte_level_bpe.h"
#include "engine/tokenizers/sentencepiece_bpe.h"
#include "engine/tokenizers/tokenizer_files.h"
#include "engine/tokenizers/unicode_text.h"
#include "engine/tokenizers/wordpiece.h"

namespace hh::tok {

namespace {
using nlohmann::json;
using files::boolAt;
using files::find;
using files::stringAt;

const char* kGpt2Pattern = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

std::string typeOf(const json& component, const std::string& where) {
  if (!component.is_object()) throw io::FormatError(where + ": expected an object, got " + component.type_name());
  const std::string type = stringAt(component, "type", where, "");
  if (type.empty()) throw io::FormatError(where + ": no \"type\"");
  return type;
}

// A component and, for a Sequence, its parts in order (nested Sequences flattened, at most
// kMaxNesting deep so that a hostile file cannot exhaust the stack).
constexpr int kMaxNesting = 16;
void flatten(const json* component, const char* listKey, const std::string& where, std::vector<const json*>& out,
             int depth = 0) {
  if (!component) return;
  if (typeOf(*component, where) != "Sequence") {
    out.push_back(component);
    return;
  }
  if (depth >= kMaxNesting) throw io::FormatError(where + ": Sequences nested more than " + std::to_string(kMaxNesting) + " deep");
  const json* parts = find(*component, listKey);
  if (!parts || !parts->is_array()) throw io::FormatError(where + "." + listKey + ": expected an array");
  for (size_t i = 0; i < parts->size(); ++i) {
    flatten(&(*parts)[i], listKey, where + "." + listKey + "[" + std::to_string(i) + "]", out, depth + 1);
  }
}

std::vector<AddedToken> addedTokens(const json& root, const std::string& path) {
  std::vector<AddedToken> out;
  const json* list = find(root, "added_tokens");
  if (!list) return out;
  if (!list->is_array()) throw io::FormatError(path + ": added_tokens: expected an array");
  for (size_t i = 0; i < list->size(); ++i) {
    const json& e = (*list)[i];
    const std::string where = path + ": added_tokens[" + std::to_string(i) + "]";
    if (!e.is_object()) throw io::FormatError(where + ": expected an object");
    AddedToken t;
    t.id = files::intAt(e, "id", where, -1);
    t.content = stringAt(e, "content", where, "");
    if (t.id < 0 || t.content.empty()) throw io::FormatError(where + ": needs an id >= 0 and a non-empty content");
    t.special = boolAt(e, "special", where, false);
    t.lstrip = boolAt(e, "lstrip", where, false);
    t.rstrip = boolAt(e, "rstrip", where, false);
    t.singleWord = boolAt(e, "single_word", where, false);
    out.push_back(std::move(t));
  }
  return out;
}

// Looks up the ids a post-processor names, refusing any the tokenizer does not have: past its
// last id an id would index past the model's embedding.
struct SpecialIds {
  const Tokenizer& tok;
  std::string at;  // where in the file, for errors

  int64_t byName(const std::string& token) const {
    const int64_t id = tok.tokenToId(token);
    if (id < 0) throw io::FormatError(at + ": special token '" + token + "' is not in the vocabulary");
    return id;
  }
  int64_t byNumber(const json& id, const std::string& key) const {
    if (!id.is_number_integer()) throw io::FormatError(at + key + ": not integers");
    const int64_t value = id.get<int64_t>();
    if (value < 0 || value >= tok.vocabSize())
      throw io::FormatError(at + key + ": id " + std::to_string(value) + " is not in the vocabulary (0.." +
                            std::to_string(tok.vocabSize() - 1) + ")");
    return value;
  }
};

// TemplateProcessing's "single" template: special tokens before and after "$A".
void templateIds(const json& c, const SpecialIds& ids, std::vector<int64_t>& before, std::vector<int64_t>& after) {
  const json* single = find(c, "single");
  if (!single || !single->is_array()) throw io::FormatError(ids.at + ".single: expected an array");
  const json* specials = find(c, "special_tokens");
  bool seenSequence = false;
  for (const json& item : *single) {
    const json* st = find(item, "SpecialToken");
    if (!st) {
      if (!find(item, "Sequence"))
        throw io::FormatError(ids.at + ".single: expected SpecialToken or Sequence items, got " +
                              item.dump().substr(0, 80));
      seenSequence = true;
      continue;
    }
    const std::string name = stringAt(*st, "id", ids.at + ".single.SpecialToken", "");
    std::vector<int64_t>& side = seenSequence ? after : before;
    const json* entry = specials ? find(*specials, name.c_str()) : nullptr;
    const json* list = entry ? find(*entry, "ids") : nullptr;
    if (!list) {
      side.push_back(ids.byName(name));
      continue;
    }
    const std::string key = ".special_tokens." + name + ".ids";
    if (!list->is_array()) throw io::FormatError(ids.at + key + ": expected an array");
    for (const json& id : *list) side.push_back(ids.byNumber(id, key));
  }
}

// BertProcessing / RobertaProcessing: "cls" before the sequence and "sep" after, each [token, id].
void bertIds(const json& c, const SpecialIds& ids, std::vector<int64_t>& before, std::vector<int64_t>& after) {
  for (const char* key : {"cls", "sep"}) {
    const json* pair = find(c, key);
    if (!pair || !pair->is_array() || pair->size() != 2 || !(*pair)[1].is_number_integer()) {
      throw io::FormatError(ids.at + "." + key + ": expected [token, id]");
    }
    (std::string(key) == "cls" ? before : after).push_back(ids.byNumber((*pair)[1], std::string(".") + key));
  }
}

// Ids the post-processor puts around a single sequence. In a Sequence each processor wraps what
// the ones before it produced.
void postProcessor(const json* pp, const Tokenizer& tok, const std::string& where, std::vector<int64_t>& prefix,
                   std::vector<int64_t>& suffix) {
  std::vector<const json*> parts;
  flatten(pp, "processors", where, parts);
  for (size_t p = 0; p < parts.size(); ++p) {
    const json& c = *parts[p];
    const SpecialIds ids{tok, where + (parts.size() > 1 ? "[" + std::to_string(p) + "]" : "")};
    const std::string type = typeOf(c, ids.at);
    std::vector<int64_t> before, after;
    if (type == "TemplateProcessing") {
      templateIds(c, ids, before, after);
    } else if (type == "BertProcessing" || type == "RobertaProcessing") {
      bertIds(c, ids, before, after);
    } else if (type != "ByteLevel") {
      throw io::FormatError(ids.at + ": post-processor type '" + type + "' is not supported");
    }
    before.insert(before.end(), prefix.begin(), prefix.end());
    prefix = std::move(before);
    suffix.insert(suffix.end(), after.begin(), after.end());
  }
}

std::unique_ptr<Tokenizer> wordPiece(const json& root, const json& model, const std::string& path,
                                     std::string& modelUnk) {
  WordPieceOptions o;
  const std::string where = path + ": model";
  o.unkToken = stringAt(model, "unk_token", where, "[UNK]");
  o.prefix = stringAt(model, "continuing_subword_prefix", where, "##");
  const int64_t maxChars = files::intAt(model, "max_input_chars_per_word", where, 100);
  if (maxChars < 0) throw io::FormatError(where + ".max_input_chars_per_word: negative");
  o.maxInputCharsPerWord = static_cast<size_t>(maxChars);
  modelUnk = o.unkToken;
  if (const json* n = find(root, "normalizer")) {
    const std::string at = path + ": normalizer";
    if (typeOf(*n, at) != "BertNormalizer") throw io::FormatError(at + ": '" + typeOf(*n, at) + "' is not supported with WordPiece");
    o.cleanText = boolAt(*n, "clean_text", at, true);
    o.handleChineseChars = boolAt(*n, "handle_chinese_chars", at, true);
    if (find(*n, "strip_accents")) o.stripAccents = boolAt(*n, "strip_accents", at, false);
    o.lowercase = boolAt(*n, "lowercase", at, true);
  } else {
    o.normalize = false;
  }
  std::vector<const json*> pre;
  flatten(find(root, "pre_tokenizer"), "pretokenizers", path + ": pre_tokenizer", pre);
  o.splitPunctuation = false;
  for (const json* pp : pre) {
    const json& p = *pp;
    const std::string type = typeOf(p, path + ": pre_tokenizer");
    if (type == "BertPreTokenizer") {
      o.splitPunctuation = true;
    } else if (type != "WhitespaceSplit") {
      throw io::FormatError(path + ": pre_tokenizer '" + type + "' is not supported with WordPiece");
    }
  }
  if (const json* d = find(root, "decoder")) {
    o.cleanupDecode = boolAt(*d, "cleanup", path + ": decoder", true);
  } else {
    o.cleanupDecode = false;
  }
  const json* vocab = find(model, "vocab");
  if (!vocab) throw io::FormatError(where + ": no vocab");
  return std::make_unique<WordPieceTokenizer>(files::vocabFromJson(*vocab, where + ".vocab"), o, path);
}

// A ByteLevel BPE's pre-tokenizers: ByteLevel's options, and GPT-2's Split pattern (no other).
ByteLevelOptions byteLevelOptions(const std::vector<const json*>& pre, const std::string& path, int64_t unkId) {
  ByteLevelOptions o;
  o.unkId = unkId;
  bool splitByPattern = false;
  const std::string at = path + ": pre_tokenizer";
  for (const json* pp : pre) {
    const json& p = *pp;
    const std::string type = typeOf(p, at);
    if (type == "ByteLevel") {
      o.addPrefixSpace = boolAt(p, "add_prefix_space", at, false);
      o.useRegex = boolAt(p, "use_regex", at, true) || splitByPattern;
    } else if (type == "Split") {
      const json* pattern = find(p, "pattern");
      const std::string regex = pattern ? stringAt(*pattern, "Regex", at + ".pattern", "") : "";
      if (regex != kGpt2Pattern) {
        throw io::FormatError(at + ": Split pattern '" + regex.substr(0, 120) + "' is not supported (only GPT-2's)");
      }
      splitByPattern = true;
    } else {
      throw io::FormatError(at + ": '" + type + "' is not supported with a ByteLevel BPE");
    }
  }
  return o;
}

// A SentencePiece-style BPE's normalizer steps into `o`.
void readNormalizer(const json& root, const std::string& path, SentencePieceOptions& o) {
  std::vector<const json*> norm;
  flatten(find(root, "normalizer"), "normalizers", path + ": normalizer", norm);
  const std::string at = path + ": normalizer";
  for (const json* np : norm) {
    const json& n = *np;
    const std::string type = typeOf(n, at);
    using K = NormalizerStep::Kind;
    if (type == "Prepend") {
      o.normalizer.push_back({K::kPrepend, "", stringAt(n, "prepend", at, "")});
    } else if (type == "Replace") {
      const json* pattern = find(n, "pattern");
      if (!pattern || !find(*pattern, "String")) throw io::FormatError(at + ": Replace needs a String pattern (Regex is not supported)");
      o.normalizer.push_back({K::kReplace, stringAt(*pattern, "String", at + ".pattern", ""), stringAt(n, "content", at, "")});
    } else if (type == "NFC" || type == "NFD" || type == "NFKC" || type == "NFKD" || type == "Lowercase") {
      const K kind = type == "NFC" ? K::kNfc : type == "NFD" ? K::kNfd : type == "NFKC" ? K::kNfkc : type == "NFKD" ? K::kNfkd : K::kLowercase;
      o.normalizer.push_back({kind, "", ""});
    } else {
      throw io::FormatError(at + ": '" + type + "' is not supported");
    }
  }
}

// Its pre-tokenizers (Metaspace only) into `o`.
void readMetaspace(const std::vector<const json*>& pre, const std::string& path, SentencePieceOptions& o) {
  const std::string at = path + ": pre_tokenizer";
  for (const json* pp : pre) {
    const json& p = *pp;
    const std::string type = typeOf(p, at);
    if (type != "Metaspace") throw io::FormatError(at + ": '" + type + "' is not supported with this BPE");
    o.metaspace = true;
    o.replacement = stringAt(p, "replacement", at, o.replacement);
    o.split = boolAt(p, "split", at, true);
    const std::string scheme = stringAt(p, "prepend_scheme", at, boolAt(p, "add_prefix_space", at, true) ? "always" : "never");
    using P = SentencePieceOptions::Prepend;
    if (scheme == "always") o.prepend = P::kAlways;
    else if (scheme == "first") o.prepend = P::kFirst;
    else if (scheme == "never") o.prepend = P::kNever;
    else
      throw io::FormatError(at + ".prepend_scheme: '" + scheme + "' (expected always, first or never)");
  }
}

// A SentencePiece-style BPE's decoder chain into `o` (none: tokens joined with ' ', as HF does).
void readDecoder(const json* decoder, const std::string& path, SentencePieceOptions& o) {
  std::vector<const json*> dec;
  flatten(decoder, "decoders", path + ": decoder", dec);
  o.hasDecoder = decoder && !decoder->is_null();
  o.decoder.clear();
  const std::string at = path + ": decoder";
  using K = DecodeStep::Kind;
  for (const json* dp : dec) {
    const json& d = *dp;
    const std::string type = typeOf(d, at);
    if (type == "Replace") {
      const json* pattern = find(d, "pattern");
      if (!pattern || !find(*pattern, "String"))
        throw io::FormatError(at + ": Replace needs a String pattern (Regex is not supported)");
      o.decoder.push_back(
          {K::kReplace, stringAt(*pattern, "String", at + ".pattern", ""), stringAt(d, "content", at, "")});
    } else if (type == "ByteFallback" || type == "Fuse") {
      o.decoder.push_back({type == "Fuse" ? K::kFuse : K::kByteFallback, "", ""});
    } else if (type == "Strip") {
      const std::string content = stringAt(d, "content", at, " ");
      char32_t cp;
      if (content.empty() || text::decodeUtf8(content, 0, cp) != content.size())
        throw io::FormatError(at + ": Strip's content must be one character");
      const int64_t start = files::intAt(d, "start", at, 0), stop = files::intAt(d, "stop", at, 0);
      if (start < 0 || stop < 0) throw io::FormatError(at + ": Strip's start and stop must be >= 0");
      o.decoder.push_back({K::kStrip, content, "", start, stop});
    } else if (type == "Metaspace") {
      const std::string scheme = stringAt(d, "prepend_scheme", at, boolAt(d, "add_prefix_space", at, true) ? "always" : "never");
      const std::string replacement = stringAt(d, "replacement", at, "\xE2\x96\x81");
      if (replacement.empty()) throw io::FormatError(at + ": Metaspace's replacement is empty");
      if (scheme != "always" && scheme != "first" && scheme != "never") {
        throw io::FormatError(at + ".prepend_scheme: '" + scheme + "' (expected always, first or never)");
      }
      o.decoder.push_back({K::kMetaspace, replacement, " ", 0, 0, scheme != "never"});
    } else {
      throw io::FormatError(at + ": '" + type + "' is not supported with this BPE");
    }
  }
}

std::unique_ptr<Tokenizer> bpe(const json& root, const json& model, const std::string& path, std::string& modelUnk) {
  const std::string where = path + ": model";
  const json* vocab = find(model, "vocab");
  const json* merges = find(model, "merges");
  if (!vocab) throw io::FormatError(where + ": no vocab");
  if (!merges) throw io::FormatError(where + ": BPE model without merges");
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    if (!stringAt(model, key, where, "").empty()) throw io::FormatError(where + "." + key + " is not supported");
  }
  modelUnk = stringAt(model, "unk_token", where, "");
  auto bpeModel = std::make_unique<BpeModel>(files::vocabFromJson(*vocab, where + ".vocab"),
                                             files::mergesFromJson(*merges, where + ".merges"), path);
  const int64_t unkId = modelUnk.empty() ? -1 : bpeModel->id(modelUnk);

  std::vector<const json*> pre;
  flatten(find(root, "pre_tokenizer"), "pretokenizers", path + ": pre_tokenizer", pre);
  const json* decoder = find(root, "decoder");
  bool byteLevel = decoder && decoder->is_object() && stringAt(*decoder, "type", path + ": decoder", "") == "ByteLevel";
  for (const json* p : pre) byteLevel = byteLevel || typeOf(*p, path + ": pre_tokenizer") == "ByteLevel";
  if (byteLevel) {
    if (find(root, "normalizer")) throw io::FormatError(path + ": normalizer with a ByteLevel BPE is not supported");
    return std::make_unique<ByteLevelBpeTokenizer>(std::move(bpeModel), byteLevelOptions(pre, path, unkId));
  }

  SentencePieceOptions o;
  o.unkId = unkId;
  o.byteFallback = boolAt(model, "byte_fallback", where, false);
  o.fuseUnk = boolAt(model, "fuse_unk", where, false);
  o.ignoreMerges = boolAt(model, "ignore_merges", where, false);
  readNormalizer(root, path, o);
  readMetaspace(pre, path, o);
  readDecoder(decoder, path, o);
  return std::make_unique<SentencePieceBpeTokenizer>(std::move(bpeModel), o);
}
}  // namespace

std::unique_ptr<Tokenizer> loadTokenizerJson(const std::string& path) {
  const json root = files::readJson(path);
  if (!root.is_object()) throw io::FormatError(path + ": expected a JSON object at the top level");
  const json* model = find(root, "model");
  if (!model) throw io::FormatError(path + ": no \"model\"");
  if (!model->is_object()) throw io::FormatError(path + ": model: expected an object, got " + model->type_name());
  std::string type = stringAt(*model, "type", path + ": model", "");
  if (type.empty()) type = find(*model, "merges") ? "BPE" : find(*model, "max_input_chars_per_word") ? "WordPiece" : "";
  std::string modelUnk;
  std::unique_ptr<Tokenizer> tok;
  if (type == "BPE") {
    tok = bpe(root, *model, path, modelUnk);
  } else if (type == "WordPiece") {
    tok = wordPiece(root, *model, path, modelUnk);
  } else {
    throw io::FormatError(path + ": model type '" + type + "' is not supported (BPE and WordPiece are)");
  }
  tok->setAddedTokens(addedTokens(root, path));
  files::applyConfig(*tok, files::directoryOf(path), modelUnk, /*addConfigTokens=*/false);
  std::vector<int64_t> prefix, suffix;
  postProcessor(find(root, "post_processor"), *tok, path + ": post_processor", prefix, suffix);
  tok->setPostProcessor(std::move(prefix), std::move(suffix));
  return tok;
}

}  // namespace hh::tok
