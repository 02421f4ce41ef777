// Reading tokenizer files, special-token roles from the config files, the legacy loaders
// (vocab.json + merges.txt, vocab.txt) and the loadTokenizer factory; see tokenizer_files.h.
#include "engine/tokenizers/tokenizer_files.h"

#include <sys/stat.h>

#include <fstream>
#include <sstream>

#include "engine/io/safetensors.h"
#include "engine/tokenizers/byte_level_bpe.h"
#include "engine/tokenizers/sentencepiece_model.h"
#include "engine/tokenizers/unicode_text.h"
#include "engine/tokenizers/wordpiece.h"
#include "engine/io/text_file.h"

namespace hh::tok {
namespace files {

using nlohmann::json;

bool exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::string join(const std::string& dir, const std::string& name) {
  if (dir.empty()) return name;
  return dir.back() == '/' ? dir + name : dir + "/" + name;
}

std::string directoryOf(const std::string& path) {
  const auto slash = path.find_last_of('/');
  return slash == std::string::npos ? std::string(".") : path.substr(0, slash + 1);
}

std::string readText(const std::string& path) {
  auto text = io::readWholeFile(path);
  if (!text) throw io::FormatError(path + ": cannot open or read the file");
  return std::move(*text);
}

json readJson(const std::string& path) {
  const std::string text = readText(path);
  try {
    return json::parse(text);
  } catch (const json::exception& e) {
    throw io::FormatError(path + ": not valid JSON (" + e.what() + ")");
  }
}

const json* find(const json& object, const char* key) {
  if (!object.is_object()) return nullptr;
  const auto it = object.find(key);
  return it == object.end() || it->is_null() ? nullptr : &*it;
}

std::string stringAt(const json& object, const char* key, const std::string& where, const std::string& fallback) {
  const json* v = find(object, key);
  if (!v) return fallback;
  if (!v->is_string()) throw io::FormatError(where + "." + key + ": expected a string, got " + v->type_name());
  return v->get<std::string>();
}

bool boolAt(const json& object, const char* key, const std::string& where, bool fallback) {
  const json* v = find(object, key);
  if (!v) return fallback;
  if (!v->is_boolean()) throw io::FormatError(where + "." + key + ": expected true or false, got " + v->type_name());
  return v->get<bool>();
}

int64_t intAt(const json& object, const char* key, const std::string& where, int64_t fallback) {
  const json* v = find(object, key);
  if (!v) return fallback;
  if (!v->is_number_integer()) throw io::FormatError(where + "." + key + ": expected an integer, got " + v->type_name());
  return v->get<int64_t>();
}

Vocab vocabFromJson(const json& vocab, const std::string& where) {
  if (!vocab.is_object()) {
    throw io::FormatError(where + ": expected an object {token: id}, got " + std::string(vocab.type_name()));
  }
  Vocab out;
  out.reserve(vocab.size());
  for (const auto& [token, id] : vocab.items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0) {
      throw io::FormatError(where + ": token '" + token + "' has id " + id.dump() + " (expected an integer >= 0)");
    }
    out.emplace(token, id.get<int64_t>());
  }
  return out;
}

namespace {
bool splitPair(const std::string& line, std::pair<std::string, std::string>& pair) {
  const auto space = line.find(' ');
  if (space == std::string::npos || space == 0 || space + 1 >= line.size()) return false;
  if (line.find(' ', space + 1) != std::string::npos) return false;
  pair = {line.substr(0, space), line.substr(space + 1)};
  return true;
}
}  // namespace

Merges mergesFromJson(const json& merges, const std::string& where) {
  if (!merges.is_array()) throw io::FormatError(where + ": expected an array, got " + std::string(merges.type_name()));
  Merges out;
  out.reserve(merges.size());
  for (size_t i = 0; i < merges.size(); ++i) {
    const json& m = merges[i];
    std::pair<std::string, std::string> pair;
    if (m.is_string() && splitPair(m.get<std::string>(), pair)) {
      out.push_back(std::move(pair));
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      out.emplace_back(m[0].get<std::string>(), m[1].get<std::string>());
    } else {
      throw io::FormatError(where + "[" + std::to_string(i) + "]: expected \"left right\" or [\"left\", \"right\"], got " +
                            m.dump().substr(0, 80));
    }
  }
  return out;
}

Merges readMergesTxt(const std::string& path) {
  std::istringstream in(readText(path));
  Merges out;
  std::string line;
  for (size_t number = 1; std::getline(in, line); ++number) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || (number == 1 && line.rfind("#version", 0) == 0)) continue;
    std::pair<std::string, std::string> pair;
    if (!splitPair(line, pair)) {
      throw io::FormatError(path + ": line " + std::to_string(number) + ": expected \"left right\", got '" +
                            line.substr(0, 80) + "'");
    }
    out.push_back(std::move(pair));
  }
  return out;
}

Vocab readVocabTxt(const std::string& path) {
  const std::string text = readText(path);
  if (text.find('\0') != std::string::npos) throw io::FormatError(path + ": binary data, not a vocab.txt");
  Vocab out;
  int64_t id = 0;
  for (size_t begin = 0; begin < text.size(); ++id) {
    size_t end = text.find('\n', begin);
    if (end == std::string::npos) end = text.size();
    std::string token = text.substr(begin, end - begin);
    if (!token.empty() && token.back() == '\r') token.pop_back();
    // A vocab.txt saved in Latin-1 (or any non-UTF-8 encoding) loads without complaint but its
    // tokens never match the UTF-8 text they are meant to encode.
    if (!text::isValidUtf8(token))
      throw io::FormatError(path + ": line " + std::to_string(id + 1) +
                            " is not valid UTF-8 (vocab.txt must be UTF-8 text)");
    out[token] = id;  // a repeated token keeps its last line, as Python's dict does
    begin = end + 1;
  }
  if (out.empty()) throw io::FormatError(path + ": empty vocabulary");
  return out;
}

std::optional<json> configValue(const std::string& dir, const char* key) {
  const std::string path = join(dir, "tokenizer_config.json");
  if (!exists(path)) return std::nullopt;
  const json config = readJson(path);
  const json* v = find(config, key);
  if (!v) return std::nullopt;
  return *v;
}

namespace {

using RoleMember = int64_t SpecialTokenIds::*;

// special_tokens_map.json, then tokenizer_config.json, where the folder has them.
std::vector<std::pair<std::string, json>> readTokenizerConfigs(const std::string& dir) {
  std::vector<std::pair<std::string, json>> configs;
  for (const char* name : {"special_tokens_map.json", "tokenizer_config.json"}) {
    const std::string path = join(dir, name);
    if (dir.empty() || !exists(path)) continue;
    json j = readJson(path);
    if (!j.is_object()) throw io::FormatError(path + ": expected a JSON object");
    configs.emplace_back(path, std::move(j));
  }
  return configs;
}

// One entry of added_tokens_decoder: "<id>": {"content": ..., "special": ..., ...}.
AddedToken addedTokenOf(const std::string& key, const json& entry, const std::string& where) {
  AddedToken t;
  try {
    size_t used = 0;
    t.id = std::stoll(key, &used);
    if (used != key.size() || t.id < 0) throw std::invalid_argument(key);
  } catch (const std::exception&) {
    throw io::FormatError(where + ": the key is not a token id");
  }
  t.content = stringAt(entry, "content", where, "");
  t.special = boolAt(entry, "special", where, true);
  t.lstrip = boolAt(entry, "lstrip", where, false);
  t.rstrip = boolAt(entry, "rstrip", where, false);
  t.singleWord = boolAt(entry, "single_word", where, false);
  return t;
}

bool hasContent(const std::vector<AddedToken>& added, const std::string& content) {
  for (const auto& t : added)
    if (t.content == content) return true;
  return false;
}

// The roles a config names (bos_token, eos_token, ...) with their tokens' text.
void readRoleTokens(const json& config, const std::string& path, std::vector<std::pair<RoleMember, std::string>>& out) {
  static const std::vector<std::pair<const char*, RoleMember>> kRoles = {
      {"bos_token", &SpecialTokenIds::bos}, {"eos_token", &SpecialTokenIds::eos}, {"pad_token", &SpecialTokenIds::pad},
      {"unk_token", &SpecialTokenIds::unk}, {"cls_token", &SpecialTokenIds::cls}, {"sep_token", &SpecialTokenIds::sep},
      {"mask_token", &SpecialTokenIds::mask}};
  for (const auto& [key, member] : kRoles) {
    const json* v = find(config, key);
    if (!v) continue;
    const json* content = v->is_object() ? find(*v, "content") : v;
    if (!content || !content->is_string()) {
      throw io::FormatError(path + ": " + key + ": expected a string or {\"content\": string}");
    }
    out.emplace_back(member, content->get<std::string>());
  }
}

// Without any config: the special tokens by the names models commonly give them.
SpecialTokenIds specialIdsByName(const Tokenizer& tok) {
  const std::vector<std::pair<RoleMember, std::vector<const char*>>> kNames = {
      {&SpecialTokenIds::bos, {"<s>", "<|begin_of_text|>", "<|endoftext|>"}},
      {&SpecialTokenIds::eos, {"</s>", "<|end_of_text|>", "<|endoftext|>"}},
      {&SpecialTokenIds::unk, {"<unk>", "[UNK]", "<|endoftext|>"}},
      {&SpecialTokenIds::pad, {"<pad>", "[PAD]"}},
      {&SpecialTokenIds::cls, {"[CLS]"}},
      {&SpecialTokenIds::sep, {"[SEP]"}},
      {&SpecialTokenIds::mask, {"[MASK]", "<mask>"}}};
  SpecialTokenIds ids;
  for (const auto& [member, names] : kNames) {
    for (const char* name : names) {
      if ((ids.*member = tok.tokenToId(name)) >= 0) break;
    }
  }
  return ids;
}

}  // namespace

void applyConfig(Tokenizer& tok, const std::string& dir, const std::string& modelUnk, bool addConfigTokens) {
  const auto configs = readTokenizerConfigs(dir);
  std::vector<AddedToken> added = tok.addedTokens();
  std::vector<std::pair<RoleMember, std::string>> roleTokens;
  for (const auto& [path, config] : configs) {
    if (const json* decoder = find(config, "added_tokens_decoder"); decoder && addConfigTokens) {
      if (!decoder->is_object()) throw io::FormatError(path + ": added_tokens_decoder: expected an object");
      for (const auto& [key, entry] : decoder->items()) {
        const AddedToken t = addedTokenOf(key, entry, path + ": added_tokens_decoder." + key);
        if (!t.content.empty() && !hasContent(added, t.content)) added.push_back(t);
      }
    }
    readRoleTokens(config, path, roleTokens);
  }
  if (addConfigTokens) {
    for (const auto& [member, content] : roleTokens) {
      const int64_t id = tok.tokenToId(content);
      if (id >= 0 && !hasContent(added, content)) added.push_back({content, id, true, false, false, false});
    }
  }
  tok.setAddedTokens(std::move(added));

  SpecialTokenIds ids;
  if (configs.empty()) ids = specialIdsByName(tok);
  for (const auto& [member, content] : roleTokens) ids.*member = tok.tokenToId(content);
  if (ids.unk < 0 && !modelUnk.empty()) ids.unk = tok.tokenToId(modelUnk);
  tok.setSpecialTokens(ids);
}

}  // namespace files

namespace {
std::unique_ptr<Tokenizer> makeGpt2(const std::string& vocabPath, const std::string& mergesPath,
                                    bool endOfTextIsSpecial, ByteLevelOptions options) {
  auto vocab = files::vocabFromJson(files::readJson(vocabPath), vocabPath);
  const auto merges = files::readMergesTxt(mergesPath);
  auto model = std::make_unique<BpeModel>(std::move(vocab), merges, mergesPath);
  auto tok = std::make_unique<ByteLevelBpeTokenizer>(std::move(model), options);
  const int64_t eot = tok->tokenToId("<|endoftext|>");
  if (endOfTextIsSpecial && eot >= 0) {
    tok->setAddedTokens({{"<|endoftext|>", eot, true, false, false, false}});
    SpecialTokenIds ids;
    ids.bos = ids.eos = ids.unk = eot;
    tok->setSpecialTokens(ids);
  }
  return tok;
}
}  // namespace

std::unique_ptr<Tokenizer> loadGpt2Bpe(const std::string& vocabJson, const std::string& mergesTxt,
                                        bool endOfTextIsSpecial) {
  return makeGpt2(vocabJson, mergesTxt, endOfTextIsSpecial, ByteLevelOptions{});
}

std::unique_ptr<Tokenizer> loadWordPieceVocab(const std::string& vocabTxt) {
  const std::string dir = files::directoryOf(vocabTxt);
  const std::string configPath = files::join(dir, "tokenizer_config.json");
  WordPieceOptions options;
  if (files::exists(configPath)) {
    const auto config = files::readJson(configPath);
    options.lowercase = files::boolAt(config, "do_lower_case", configPath, true);
    options.handleChineseChars = files::boolAt(config, "tokenize_chinese_chars", configPath, true);
    if (files::find(config, "strip_accents")) options.stripAccents = files::boolAt(config, "strip_accents", configPath, false);
    if (const auto* unk = files::find(config, "unk_token"); unk && unk->is_string()) options.unkToken = unk->get<std::string>();
  }
  auto tok = std::make_unique<WordPieceTokenizer>(files::readVocabTxt(vocabTxt), options, vocabTxt);
  // BertTokenizer never splits its own special tokens: they are added tokens here.
  std::vector<AddedToken> added;
  for (const char* name : {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"}) {
    const int64_t id = tok->tokenToId(name);
    if (id >= 0) added.push_back({name, id, true, false, false, false});
  }
  tok->setAddedTokens(std::move(added));
  files::applyConfig(*tok, dir, options.unkToken, /*addConfigTokens=*/true);
  if (tok->clsId() >= 0 && tok->sepId() >= 0) tok->setPostProcessor({tok->clsId()}, {tok->sepId()});
  return tok;
}

std::unique_ptr<Tokenizer> loadTokenizer(const std::string& modelDir) {
  if (files::exists(modelDir)) {  // a file: tokenizer.json or tokenizer.model itself
    const bool model = modelDir.size() >= 6 && modelDir.compare(modelDir.size() - 6, 6, ".model") == 0;
    return model ? loadSentencePieceModel(modelDir) : loadTokenizerJson(modelDir);
  }
  const std::string json = files::join(modelDir, "tokenizer.json");
  if (files::exists(json)) return loadTokenizerJson(json);
  const std::string spModel = files::join(modelDir, "tokenizer.model");
  if (files::exists(spModel)) return loadSentencePieceModel(spModel);
  const std::string vocabJson = files::join(modelDir, "vocab.json"), merges = files::join(modelDir, "merges.txt");
  if (files::exists(vocabJson) && files::exists(merges)) {
    ByteLevelOptions options;
    if (const auto v = files::configValue(modelDir, "add_prefix_space"); v && v->is_boolean()) {
      options.addPrefixSpace = v->get<bool>();
    }
    auto tok = makeGpt2(vocabJson, merges, /*endOfTextIsSpecial=*/true, options);
    files::applyConfig(*tok, modelDir, "", /*addConfigTokens=*/true);
    return tok;
  }
  const std::string vocabTxt = files::join(modelDir, "vocab.txt");
  if (files::exists(vocabTxt)) return loadWordPieceVocab(vocabTxt);
  throw io::FormatError(modelDir + ": no tokenizer files (looked for tokenizer.json, tokenizer.model, vocab.json + merges.txt, vocab.txt)");
}

}  // namespace hh::tok
