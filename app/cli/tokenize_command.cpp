// `hedgehog tokenize`: encode text files with a tokenizer, report throughput, optionally write
// the ids. Used by scripts/check_gpt2_bpe.sh to compare GPT-2 BPE with the reference encoder.
//   --vocab V --merges M   GPT-2 byte-level BPE from explicit files, with no special tokens
//                          (what OpenAI's encoder.py and gpt-3-encoder do)
//   --tokenizer DIR        loadTokenizer(DIR): tokenizer.json, vocab.json + merges.txt or vocab.txt
// Ids file (--out), one line per input file, in the order given:
//   PATH <TAB> N <TAB> id_1 id_2 ... id_N
// Timing counts encode() only (files are read first); the first pass starts with an empty BPE
// cache, later passes (--passes) show the warm-cache rate.
#include <chrono>
#include <cstdio>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "app/cli/commands.h"
#include "engine/io/text_file.h"
#include "engine/tokenizers/tokenizer.h"
#include "engine/tokenizers/unicode_text.h"

namespace hh::cli {

namespace {
struct TokenizeArgs {
  std::string vocab, merges, tokenizerDir, out;
  std::vector<std::string> files;
  bool addSpecial = false;
  bool checkRoundTrip = false;
  int passes = 1;
};

std::string readFile(const std::string& path) {
  auto text = io::readWholeFile(path);
  if (!text) throw std::runtime_error(path + ": cannot open");
  return std::move(*text);
}

std::unique_ptr<tok::Tokenizer> loadTokenizer(const TokenizeArgs& a) {
  const bool explicitFiles = !a.vocab.empty() || !a.merges.empty();
  if (explicitFiles == !a.tokenizerDir.empty()) {
    throw std::runtime_error("tokenize: give either --vocab and --merges, or --tokenizer DIR");
  }
  if (explicitFiles && (a.vocab.empty() || a.merges.empty())) {
    throw std::runtime_error("tokenize: --vocab and --merges go together");
  }
  const auto loadStart = std::chrono::steady_clock::now();
  auto tok = explicitFiles ? tok::loadGpt2Bpe(a.vocab, a.merges, /*endOfTextIsSpecial=*/false)
                           : tok::loadTokenizer(a.tokenizerDir);
  const double loadSecs = std::chrono::duration<double>(std::chrono::steady_clock::now() - loadStart).count();
  std::printf("tokenizer: %s, %lld tokens, loaded in %.3f s\n", tok->kind().c_str(), (long long)tok->vocabSize(), loadSecs);
  return tok;
}

// Each text's ids, encoded `passes` times with the rate of each pass printed.
std::vector<std::vector<int64_t>> encodeTimed(const tok::Tokenizer& tok, const std::vector<std::string>& texts,
                                              const TokenizeArgs& a) {
  size_t bytes = 0, chars = 0;
  for (const auto& text : texts) {
    bytes += text.size();
    chars += tok::text::countCodePoints(text);
  }
  std::vector<std::vector<int64_t>> ids(texts.size());
  for (int pass = 0; pass < a.passes; ++pass) {
    size_t tokens = 0;
    const auto start = std::chrono::steady_clock::now();
    for (size_t i = 0; i < texts.size(); ++i) {
      ids[i] = tok.encode(texts[i], a.addSpecial);
      tokens += ids[i].size();
    }
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("pass %d (%s cache): %zu files, %zu bytes, %zu characters, %zu tokens in %.3f s: %.0f tokens/s, %.1f MB/s\n",
                pass + 1, pass == 0 ? "cold" : "warm", texts.size(), bytes, chars, tokens, secs, tokens / secs,
                bytes / secs / 1e6);
  }
  return ids;
}

void checkRoundTrip(const tok::Tokenizer& tok, const std::vector<std::string>& texts,
                    const std::vector<std::vector<int64_t>>& ids, const std::vector<std::string>& files) {
  size_t bad = 0;
  for (size_t i = 0; i < texts.size(); ++i) {
    if (tok.decode(ids[i]) != texts[i]) {
      ++bad;
      std::printf("round trip differs: %s\n", files[i].c_str());
    }
  }
  std::printf("round trip decode(encode(text)) == text: %zu of %zu files\n", texts.size() - bad, texts.size());
  if (bad) throw std::runtime_error("tokenize: round trip failed for " + std::to_string(bad) + " files");
}

// The ids file, written whole or not at all (a full disk left half a file behind).
void writeIds(const std::string& path, const std::vector<std::string>& files,
              const std::vector<std::vector<int64_t>>& ids) {
  std::ostringstream out;
  for (size_t i = 0; i < files.size(); ++i) {
    out << files[i] << '\t' << ids[i].size() << '\t';
    for (size_t k = 0; k < ids[i].size(); ++k) out << (k ? " " : "") << ids[i][k];
    out << '\n';
  }
  writeOutput(path, out.str(), "ids");
  std::printf("ids written to %s\n", path.c_str());
}

void runTokenize(const TokenizeArgs& a) {
  const auto tok = loadTokenizer(a);
  std::vector<std::string> texts;
  texts.reserve(a.files.size());
  for (const auto& f : a.files) texts.push_back(readFile(f));
  const auto ids = encodeTimed(*tok, texts, a);
  if (a.checkRoundTrip) checkRoundTrip(*tok, texts, ids, a.files);
  if (!a.out.empty()) writeIds(a.out, a.files, ids);
}
}  // namespace

void addTokenizeCommand(CLI::App& app) {
  auto args = std::make_shared<TokenizeArgs>();
  auto* cmd = app.add_subcommand("tokenize", "Encode text files with a tokenizer; report tokens/s, optionally write the ids");
  cmd->add_option("files", args->files, "Text files to encode")->required()->check(CLI::ExistingFile);
  cmd->add_option("--vocab", args->vocab, "GPT-2 vocab.json / encoder.json")->check(CLI::ExistingFile);
  cmd->add_option("--merges", args->merges, "GPT-2 merges.txt / vocab.bpe")->check(CLI::ExistingFile);
  cmd->add_option("--tokenizer", args->tokenizerDir, "Model folder (tokenizer.json, vocab.json + merges.txt or vocab.txt)");
  cmd->add_option("--out", args->out, "Write the ids here: one line per file, PATH<TAB>N<TAB>ids");
  cmd->add_flag("--add-special", args->addSpecial, "Add the post-processor's special tokens ([CLS]/[SEP], <s>)");
  cmd->add_flag("--check-roundtrip", args->checkRoundTrip, "Check decode(encode(text)) == text for every file");
  cmd->add_option("--passes", args->passes, "Encode everything this many times (later passes: warm cache)")
      ->capture_default_str()
      ->check(CLI::Range(1, 100));
  cmd->callback([args] { runTokenize(*args); });
}

}  // namespace hh::cli
