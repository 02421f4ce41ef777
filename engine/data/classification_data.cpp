#include "engine/data/classification_data.h"

#include <torch/types.h>

#include "engine/data/data_paths.h"
#include "engine/data/text_corpus.h"
#include "engine/io/text_file.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>

#include <nlohmann/json.hpp>

namespace hh::data {
namespace fs = std::filesystem;

namespace {

std::string readDatasetFile(const fs::path& path) {
  auto text = io::readWholeFile(path.string());
  if (!text) throw std::runtime_error(path.string() + ": cannot read");
  return std::move(*text);
}

struct LabelTable {
  std::map<std::string, int64_t> ids;
  std::vector<std::string> names;
  int64_t idOf(const std::string& name) {
    auto [it, inserted] = ids.emplace(name, static_cast<int64_t>(names.size()));
    if (inserted) names.push_back(name);
    return it->second;
  }
};

// A label is a class name or a class number 0..K-1. An empty label, or one that reads as a number
// but not as a non-negative integer ("1.5", "-1", "1e3"), is a mistake in the file: taken as a
// name it would silently become a class of its own.
void checkLabel(const std::string& where, const std::string& label) {
  if (label.find_first_not_of(" \t") == std::string::npos) throw std::runtime_error(where + ": empty label");
  if (label.find_first_not_of("0123456789") == std::string::npos) return;
  char* end = nullptr;
  std::strtod(label.c_str(), &end);
  if (end != label.c_str() && *end == '\0')
    throw std::runtime_error(where + ": label \"" + label + "\" is not a class: labels are integers 0..K-1 or names");
}

// One .jsonl line: {"text": string, "label": integer or string}. `where` is file:line.
LabelledText parseJsonlLine(const std::string& line, const std::string& where, std::string& labelName) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(line);
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(where + ": not JSON (" + e.what() + ")");
  }
  if (!j.is_object() || !j.contains("text") || !j["text"].is_string() || !j.contains("label"))
    throw std::runtime_error(where + ": needs \"text\" (string) and \"label\" (integer or string)");
  const auto& label = j["label"];
  if (label.is_number_integer())
    labelName = std::to_string(label.get<int64_t>());
  else if (label.is_string())
    labelName = label.get<std::string>();
  else
    throw std::runtime_error(where + ": \"label\" must be an integer or a string");
  return {j["text"].get<std::string>(), 0};
}

// One .tsv line: label<TAB>text (only the first tab splits).
LabelledText parseTsvLine(const std::string& line, const std::string& where, std::string& labelName) {
  const auto tab = line.find('\t');
  if (tab == std::string::npos) throw std::runtime_error(where + ": expected \"label<TAB>text\"");
  labelName = line.substr(0, tab);
  return {line.substr(tab + 1), 0};
}

// Integer labels keep their numeric meaning when they are exactly 0..K-1: relabels the examples
// with their numbers and names the classes in that order. False (nothing changed) otherwise.
bool keepNumericLabels(const LabelTable& labels, LabelledCorpus& corpus) {
  // A number of more than 18 digits cannot be a class number, and would not fit std::stoll.
  for (const auto& name : labels.names)
    if (name.empty() || name.size() > 18 || name.find_first_not_of("0123456789") != std::string::npos) return false;
  std::vector<int64_t> values;
  for (const auto& name : labels.names) values.push_back(std::stoll(name));
  auto sorted = values;
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 0; i < sorted.size(); ++i)
    if (sorted[i] != static_cast<int64_t>(i)) return false;
  for (auto& e : corpus.examples) e.label = values[static_cast<size_t>(e.label)];
  corpus.labelNames.resize(values.size());
  for (size_t i = 0; i < values.size(); ++i) corpus.labelNames[static_cast<size_t>(values[i])] = labels.names[i];
  return true;
}

}  // namespace

LabelledCorpus readClassificationFile(const std::string& path) {
  // UTF-8, as training text must be (a Latin-1 export is refused naming its first such line); a
  // byte-order mark (spreadsheet exports) dropped.
  const auto text = readUtf8File(path);
  const bool jsonl = fs::path(path).extension() == ".jsonl";
  LabelledCorpus corpus;
  LabelTable labels;
  std::istringstream lines(text);
  std::string line;
  int64_t number = 0;
  while (std::getline(lines, line)) {
    ++number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    const auto where = path + ":" + std::to_string(number);
    std::string labelName;
    auto example = jsonl ? parseJsonlLine(line, where, labelName) : parseTsvLine(line, where, labelName);
    if (!jsonl && number == 1 && labelName == "label") continue;  // header
    checkLabel(where, labelName);
    example.label = labels.idOf(labelName);
    corpus.examples.push_back(std::move(example));
  }
  if (corpus.examples.empty()) throw std::runtime_error(path + ": no examples");
  if (!keepNumericLabels(labels, corpus)) corpus.labelNames = labels.names;
  return corpus;
}

std::string mailBody(const std::string& mail) {
  auto pos = mail.find("\n\n");
  const auto crlf = mail.find("\r\n\r\n");
  if (crlf != std::string::npos && (pos == std::string::npos || crlf < pos)) return mail.substr(crlf + 4);
  return pos == std::string::npos ? mail : mail.substr(pos + 2);
}

bool namesSpamAssassin(const std::string& corpus) {
  return corpus == "spam_assassin" || corpus == "spamassassin";
}

LabelledCorpus readClassificationCorpus(const std::string& corpus) {
  return namesSpamAssassin(corpus) ? readSpamAssassin(spamAssassinDir()) : readClassificationFile(corpus);
}

LabelledCorpus readSpamAssassin(const std::string& dir) {
  LabelledCorpus corpus;
  corpus.labelNames = {"ham", "spam"};
  std::vector<fs::path> groups;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec))
    if (entry.is_directory()) groups.push_back(entry.path());
  std::sort(groups.begin(), groups.end());
  for (const auto& group : groups) {
    const auto name = group.filename().string();
    const int64_t label = name.rfind("spam", 0) == 0 ? 1 : name.find("ham") != std::string::npos ? 0 : -1;
    if (label < 0) continue;
    std::vector<fs::path> files;
    for (const auto& entry : fs::directory_iterator(group, ec))
      if (entry.path().extension() == ".txt") files.push_back(entry.path());
    std::sort(files.begin(), files.end());
    for (const auto& f : files) corpus.examples.push_back({mailBody(readDatasetFile(f)), label});
  }
  if (corpus.examples.empty()) throw std::runtime_error(dir + ": no SpamAssassin mails (easy-ham-*/spam-* folders)");
  return corpus;
}

ClassificationDataset buildClassificationDataset(const LabelledCorpus& corpus, const tok::Tokenizer& tokenizer,
                                                 const ClassificationOptions& options) {
  if (options.sequenceLength < 2) throw std::invalid_argument("sequence length must be at least 2");
  if (options.validationFraction < 0 || options.validationFraction >= 1)
    throw std::invalid_argument("validation fraction must be in [0, 1)");
  std::vector<size_t> order(corpus.examples.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::mt19937_64 rng(options.seed);
  std::shuffle(order.begin(), order.end(), rng);
  if (options.maxExamples > 0 && static_cast<int64_t>(order.size()) > options.maxExamples)
    order.resize(static_cast<size_t>(options.maxExamples));
  const size_t heldOut = static_cast<size_t>(options.validationFraction * double(order.size()) + 0.5);
  const int64_t T = options.sequenceLength;
  const int64_t pad = tokenizer.padId() >= 0 ? tokenizer.padId() : 0;
  auto build = [&](size_t begin, size_t end) {
    const int64_t n = static_cast<int64_t>(end - begin);
    ClassificationSplit split{torch::full({n, T}, pad, torch::kLong), torch::zeros({n, T}, torch::kLong),
                              torch::zeros({n}, torch::kLong)};
    auto ids = split.ids.accessor<int64_t, 2>();
    auto mask = split.mask.accessor<int64_t, 2>();
    auto labels = split.labels.accessor<int64_t, 1>();
    for (int64_t row = 0; row < n; ++row) {
      const auto& example = corpus.examples[order[begin + static_cast<size_t>(row)]];
      auto tokens = tokenizer.encode(example.text, /*addSpecialTokens=*/true);
      tokenizer.truncateFramed(tokens, static_cast<size_t>(T));  // keeps BERT's [SEP]
      for (size_t t = 0; t < tokens.size(); ++t) {
        ids[row][static_cast<int64_t>(t)] = tokens[t];
        mask[row][static_cast<int64_t>(t)] = 1;
      }
      labels[row] = example.label;
    }
    return split;
  };
  ClassificationDataset out;
  out.validation = build(0, heldOut);
  out.train = build(heldOut, order.size());
  out.labelNames = corpus.labelNames;
  return out;
}

}  // namespace hh::data
