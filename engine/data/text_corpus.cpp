#include "engine/data/text_corpus.h"

#include <torch/types.h>

#include "engine/io/text_file.h"
#include "engine/tokenizers/unicode_text.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include <nlohmann/json.hpp>

namespace hh::data {
namespace fs = std::filesystem;

namespace {

std::string readCorpusFile(const fs::path& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) throw std::runtime_error(path.string() + ": is a folder, not a text file");
  auto text = io::readWholeFile(path.string());
  if (!text) throw std::runtime_error(path.string() + ": cannot read");
  return std::move(*text);
}

bool attachesLeft(const std::string& w) {  // no space before these
  static const char* kinds[] = {",", ".", ";", ":", "?", "!", ")", "'s", "n't", "''", "%"};
  for (const char* k : kinds)
    if (w == k) return true;
  return false;
}
bool attachesRight(const std::string& w) {
  return w == "(" || w == "``" || w == "$";
}

}  // namespace

// Training text must be UTF-8: the tokenizers read it as such, so a Latin-1 file would be trained
// on as something other than the text it holds, without a word said. A leading byte-order mark
// (editors, spreadsheet exports) is no part of the text: it would be trained on, and it hid a
// .jsonl file's first line from the JSON parser.
std::string readUtf8File(const std::string& path) {
  auto text = readCorpusFile(path);
  if (text.rfind("\xEF\xBB\xBF", 0) == 0) text.erase(0, 3);
  if (!tok::text::isValidUtf8(text)) {
    // Where: the first line that is not valid UTF-8 on its own.
    const std::string_view all(text);
    size_t line = 1, begin = 0;
    for (size_t end = all.find('\n'); end != std::string_view::npos; end = all.find('\n', begin)) {
      if (!tok::text::isValidUtf8(all.substr(begin, end - begin))) break;
      ++line;
      begin = end + 1;
    }
    throw std::runtime_error(path + ":" + std::to_string(line) + ": not UTF-8 text (Latin-1 or another " +
                             "encoding?); convert it, e.g. iconv -f latin1 -t utf-8");
  }
  return text;
}

std::string detagBrown(const std::string& tagged) {
  // One sentence per line (blank lines between them); sentences are joined with a space.
  std::string out;
  std::istringstream tokens(tagged);
  std::string token;
  bool spaceBefore = false;
  bool singleQuoteOpen = false;  // Brown writes opening and closing single quotes alike ('/')
  while (tokens >> token) {
    const auto slash = token.rfind('/');
    std::string word = slash == std::string::npos || slash == 0 ? token : token.substr(0, slash);
    if (word == "'") {  // alternate: an opening quote takes a space before and none after
      singleQuoteOpen = !singleQuoteOpen;
      if (spaceBefore && singleQuoteOpen) out += ' ';
      spaceBefore = !singleQuoteOpen;
      out += word;
      continue;
    }
    if (spaceBefore && !attachesLeft(word)) out += ' ';
    spaceBefore = !attachesRight(word);
    if (word == "``" || word == "''") word = "\"";
    out += word;
  }
  return out;
}

std::vector<Document> readBrownCorpus(const std::string& dir) {
  std::vector<fs::path> files;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const auto name = entry.path().filename().string();
    // Corpus files are named c<genre><nn>; skip README, CONTENTS, the pickle, etc.
    if (name.size() == 4 && name[0] == 'c' && std::isalpha(static_cast<unsigned char>(name[1])) &&
        std::isdigit(static_cast<unsigned char>(name[2])) && std::isdigit(static_cast<unsigned char>(name[3])))
      files.push_back(entry.path());
  }
  if (ec) throw std::runtime_error(dir + ": cannot list (" + ec.message() + ")");
  if (files.empty()) throw std::runtime_error(dir + ": no Brown corpus files (ca01 ..) found");
  std::sort(files.begin(), files.end());
  std::vector<Document> docs;
  for (const auto& f : files) docs.push_back({f.filename().string(), detagBrown(readCorpusFile(f))});
  return docs;
}

std::vector<Document> readTextDocuments(const std::string& path) {
  std::error_code ec;
  std::vector<Document> docs;
  if (fs::is_directory(path, ec)) {
    std::vector<fs::path> files;
    for (const auto& entry : fs::directory_iterator(path, ec))
      if (entry.path().extension() == ".txt") files.push_back(entry.path());
    std::sort(files.begin(), files.end());
    for (const auto& f : files) docs.push_back({f.filename().string(), readUtf8File(f.string())});
    if (docs.empty()) throw std::runtime_error(path + ": no .txt files in this folder");
    return docs;
  }
  const auto text = readUtf8File(path);
  if (fs::path(path).extension() == ".jsonl") {
    std::istringstream lines(text);
    std::string line;
    int64_t number = 0;
    while (std::getline(lines, line)) {
      ++number;
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      nlohmann::json j;
      try {
        j = nlohmann::json::parse(line);
      } catch (const nlohmann::json::exception& e) {
        throw std::runtime_error(path + ":" + std::to_string(number) + ": not JSON (" + e.what() + ")");
      }
      if (!j.is_object() || !j.contains("text") || !j["text"].is_string())
        throw std::runtime_error(path + ":" + std::to_string(number) + ": needs a string \"text\" field");
      docs.push_back({path + ":" + std::to_string(number), j["text"].get<std::string>()});
    }
  } else {
    docs.push_back({fs::path(path).filename().string(), text});
  }
  if (docs.empty()) throw std::runtime_error(path + ": no documents");
  return docs;
}

LmDataset buildLmDataset(const std::vector<Document>& documents, const tok::Tokenizer& tokenizer,
                         const LmDataOptions& options) {
  if (options.sequenceLength < 2) throw std::invalid_argument("sequence length must be at least 2");
  if (options.validationFraction < 0 || options.validationFraction > 1)
    throw std::invalid_argument("validation fraction must be in [0, 1]");
  std::vector<size_t> order(documents.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::mt19937_64 rng(options.seed);
  std::shuffle(order.begin(), order.end(), rng);
  size_t heldOut = static_cast<size_t>(options.validationFraction * double(documents.size()) + 0.5);
  if (options.validationFraction > 0 && heldOut == 0 && documents.size() > 1) heldOut = 1;
  // A fraction below 1 asks for a training split too: 0.95 of 10 documents rounded to all 10, and
  // the job then said the text gave no training sequence. 1 holds every document out (evaluation).
  if (options.validationFraction < 1 && documents.size() > 1) heldOut = std::min(heldOut, documents.size() - 1);
  LmDataset out;
  const int64_t T = options.sequenceLength;
  // Documents framed as the tokenizer frames a text (Llama: <s> first); one that frames nothing
  // (GPT-2) gets its eos after each document instead.
  const bool framed = !tokenizer.prefixIds().empty() || !tokenizer.suffixIds().empty();
  auto build = [&](size_t begin, size_t end, int64_t limit) {
    std::vector<int64_t> stream;
    for (size_t i = begin; i < end; ++i) {
      const auto ids = tokenizer.encode(documents[order[i]].text, /*addSpecialTokens=*/framed);
      stream.insert(stream.end(), ids.begin(), ids.end());
      if (!framed && tokenizer.eosId() >= 0) stream.push_back(tokenizer.eosId());
      // stream.size() / T >= limit, as limit * T would overflow for a huge limit (--max-train 2^63-1).
      if (limit > 0 && static_cast<int64_t>(stream.size()) / T >= limit) break;
    }
    out.tokens += static_cast<int64_t>(stream.size());
    int64_t rows = static_cast<int64_t>(stream.size()) / T;
    if (limit > 0) rows = std::min(rows, limit);
    stream.resize(static_cast<size_t>(rows * T));
    return torch::tensor(stream, torch::kLong).view({rows, T});
  };
  out.validation = build(0, heldOut, options.maxValidationSequences);
  out.train = build(heldOut, documents.size(), options.maxTrainSequences);
  out.validationDocuments = static_cast<int64_t>(heldOut);
  out.trainDocuments = static_cast<int64_t>(documents.size() - heldOut);
  return out;
}

}  // namespace hh::data
