// engine.data.synthetic_tasks: the associative-recall and copy generators are deterministic for a
// seed (and differ for another), the test split does not depend on train_samples; associative
// recall: keys and values in their ranges, each key keeps one value within a sequence, the query
// key appears in an earlier pair and the answer is its value, exactly one target per row (at
// T-2, equal to the last token), odd T; copy: the copy equals the symbols, padding after it,
// targets exactly at the positions that predict the copy and equal to the next token, never on
// padding; token names; bad configs throw naming the field; "every_recall" supervision scores
// every repeated key of the train split.

#include <torch/types.h>

#include <map>
#include <set>

#include "engine/data/synthetic_tasks.h"
#include "tests/support/hh_test.h"

namespace test_synthetic_tasks {

namespace {

namespace d = hh::data;

d::SyntheticTaskConfig recall(int64_t V = 40, int64_t T = 128) {
  d::SyntheticTaskConfig c;
  c.kind = "associative_recall";
  c.vocabSize = V;
  c.sequenceLength = T;
  c.trainSamples = 300;
  c.testSamples = 100;
  c.seed = 7;
  return c;
}

d::SyntheticTaskConfig copyTask(int64_t T = 32) {
  d::SyntheticTaskConfig c;
  c.kind = "copy";
  c.sequenceLength = T;
  c.trainSamples = 300;
  c.testSamples = 100;
  c.seed = 3;
  return c;
}

bool same(const d::TaskSplit& a, const d::TaskSplit& b) {
  return a.ids.equal(b.ids) && a.targets.equal(b.targets);
}

// Every property of an associative-recall split with vocab V; returns "" or the first failure.
std::string checkRecall(const d::TaskSplit& split, int64_t V) {
  const int64_t N = split.ids.size(0), T = split.ids.size(1), keys = V / 2;
  const auto ids = split.ids.accessor<int64_t, 2>();
  const auto targets = split.targets.accessor<int64_t, 2>();
  const int64_t first = T % 2;  // odd T: a filler key at position 0
  for (int64_t n = 0; n < N; ++n) {
    const std::string row = "row " + std::to_string(n) + ": ";
    std::map<int64_t, int64_t> valueOf;
    if (first == 1 && !(ids[n][0] >= 0 && ids[n][0] < keys)) return row + "filler is not a key";
    for (int64_t t = first; t + 1 < T - 2; t += 2) {
      const int64_t k = ids[n][t], v = ids[n][t + 1];
      if (k < 0 || k >= keys) return row + "key out of range at " + std::to_string(t);
      if (v < keys || v >= V) return row + "value out of range at " + std::to_string(t + 1);
      if (valueOf.count(k) && valueOf[k] != v) return row + "key " + std::to_string(k) + " has two values";
      valueOf[k] = v;
    }
    const int64_t query = ids[n][T - 2], answer = ids[n][T - 1];
    if (!valueOf.count(query)) return row + "the query key does not appear earlier";
    if (valueOf[query] != answer) return row + "the answer is not the query's value";
    for (int64_t t = 0; t < T; ++t) {
      const int64_t expected = t == T - 2 ? answer : d::kIgnoreTarget;
      if (targets[n][t] != expected) return row + "target at " + std::to_string(t);
    }
  }
  return {};
}

std::string checkCopy(const d::TaskSplit& split, int64_t V) {
  const int64_t N = split.ids.size(0), T = split.ids.size(1), sep = V - 2, pad = V - 1;
  const auto ids = split.ids.accessor<int64_t, 2>();
  const auto targets = split.targets.accessor<int64_t, 2>();
  for (int64_t r = 0; r < N; ++r) {
    const std::string row = "row " + std::to_string(r) + ": ";
    int64_t n = 0;
    while (n < T && ids[r][n] != sep) {
      if (ids[r][n] < 0 || ids[r][n] >= V - 2) return row + "not a symbol at " + std::to_string(n);
      ++n;
    }
    if (n < 1 || n > (T - 1) / 2) return row + "length " + std::to_string(n) + " out of range";
    for (int64_t i = 0; i < n; ++i)
      if (ids[r][n + 1 + i] != ids[r][i]) return row + "the copy differs at " + std::to_string(i);
    for (int64_t t = 2 * n + 1; t < T; ++t)
      if (ids[r][t] != pad) return row + "no padding at " + std::to_string(t);
    for (int64_t t = 0; t < T; ++t) {
      const bool scored = t >= n && t < 2 * n;
      if (scored && targets[r][t] != ids[r][t + 1]) return row + "target at " + std::to_string(t) + " is not the next token";
      if (!scored && targets[r][t] != d::kIgnoreTarget) return row + "unexpected target at " + std::to_string(t);
      if (scored && targets[r][t] == pad) return row + "padding is a target";
    }
  }
  return {};
}

}  // namespace

class TestSyntheticTasks : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void deterministicForASeed() {
    for (const auto& c : {recall(), copyTask()}) {
      const auto a = d::buildSyntheticTask(c), b = d::buildSyntheticTask(c);
      QVERIFY(same(a.train, b.train) && same(a.test, b.test) && same(a.validation, b.validation));
      auto other = c;
      other.seed = c.seed + 1;
      const auto o = d::buildSyntheticTask(other);
      QVERIFY(!o.train.ids.equal(a.train.ids));
      QVERIFY(!o.test.ids.equal(a.test.ids));
      // The test split does not depend on the size of the train split (nor the reverse).
      auto bigger = c;
      bigger.trainSamples = 500;
      bigger.testSamples = 150;
      const auto g = d::buildSyntheticTask(bigger);
      QVERIFY(g.test.ids.narrow(0, 0, 100).equal(a.test.ids));
      QVERIFY(g.train.ids.narrow(0, 0, 300).equal(a.train.ids));
      QVERIFY(!g.test.ids.narrow(0, 0, 100).equal(g.train.ids.narrow(0, 0, 100)));
      // Validation: the test split's size and layout, from a third stream (no row shared by design).
      QVERIFY(
          same(d::TaskSplit{g.validation.ids.narrow(0, 0, 100), g.validation.targets.narrow(0, 0, 100)}, a.validation));
      QCOMPARE(a.validation.ids.sizes().vec(), a.test.ids.sizes().vec());
      QVERIFY(!a.validation.ids.equal(a.test.ids) && !a.validation.ids.equal(a.train.ids.narrow(0, 0, 100)));
      QCOMPARE(a.train.ids.sizes().vec(), (std::vector<int64_t>{300, c.sequenceLength}));
      QCOMPARE(a.test.targets.sizes().vec(), (std::vector<int64_t>{100, c.sequenceLength}));
      QVERIFY(a.train.ids.scalar_type() == torch::kLong && a.train.targets.scalar_type() == torch::kLong);
    }
  }

  void associativeRecallIsConsistent() {
    const auto task = d::buildSyntheticTask(recall());
    QCOMPARE(task.vocabSize, int64_t(40));
    QCOMPARE(checkRecall(task.train, 40), std::string());
    QCOMPARE(checkRecall(task.test, 40), std::string());
    QCOMPARE(task.tokenNames.size(), size_t(40));
    QCOMPARE(task.tokenNames[3], std::string("k3"));
    QCOMPARE(task.tokenNames[20], std::string("v0"));
    QCOMPARE(task.tokenNames[39], std::string("v19"));
    // Exactly one target per row.
    QVERIFY(task.train.targets.ne(d::kIgnoreTarget).sum(1).eq(1).all().item<bool>());
    // Queries are spread over the keys, answers over the values (not a constant).
    const auto queries = task.train.ids.select(1, 126).contiguous();  // [N]
    QVERIFY(std::set<int64_t>(queries.data_ptr<int64_t>(), queries.data_ptr<int64_t>() + queries.numel()).size() > 10);
    // Small vocab, short and odd lengths.
    for (const auto& [V, T] : std::vector<std::pair<int64_t, int64_t>>{{4, 4}, {16, 32}, {16, 33}, {6, 5}}) {
      const auto small = d::buildSyntheticTask(recall(V, T));
      QCOMPARE(checkRecall(small.train, V), std::string());
      QCOMPARE(checkRecall(small.test, V), std::string());
    }
  }

  void copyRepeatsTheSymbols() {
    const auto task = d::buildSyntheticTask(copyTask());
    QCOMPARE(task.vocabSize, int64_t(12));  // default: 10 symbols, separator, padding
    QCOMPARE(checkCopy(task.train, 12), std::string());
    QCOMPARE(checkCopy(task.test, 12), std::string());
    QCOMPARE(task.tokenNames, (std::vector<std::string>{"s0", "s1", "s2", "s3", "s4", "s5", "s6", "s7", "s8", "s9", "sep", "pad"}));
    // Lengths cover [1, (T-1)/2]: both ends occur in 300 rows of T = 32 (15 lengths).
    const auto n = task.train.targets.ne(d::kIgnoreTarget).sum(1);  // [N] = copy lengths
    QCOMPARE(n.min().item<int64_t>(), int64_t(1));
    QCOMPARE(n.max().item<int64_t>(), int64_t(15));
    for (int64_t T : {4, 5, 33}) {
      auto c = copyTask(T);
      c.vocabSize = 5;
      const auto small = d::buildSyntheticTask(c);
      QCOMPARE(checkCopy(small.train, 5), std::string());
    }
  }

  void badConfigsNameTheField() {
    auto c = recall();
    c.kind = "recall";
    HH_VERIFY_THROWS_WITH(d::buildSyntheticTask(c), "\"kind\"");
    HH_VERIFY_THROWS_WITH(d::buildSyntheticTask(recall(41)), "\"vocab_size\"");
    HH_VERIFY_THROWS_WITH(d::buildSyntheticTask(recall(2)), "\"vocab_size\"");
    HH_VERIFY_THROWS_WITH(d::buildSyntheticTask(recall(40, 3)), "\"sequence_length\"");
    c = copyTask();
    c.vocabSize = 3;
    HH_VERIFY_THROWS_WITH(d::buildSyntheticTask(c), "\"vocab_size\"");
    c = copyTask();
    c.trainSamples = 0;
    HH_VERIFY_THROWS_WITH(d::buildSyntheticTask(c), "\"train_samples\"");
    c = copyTask();
    c.testSamples = -1;
    HH_VERIFY_THROWS_WITH(d::buildSyntheticTask(c), "\"test_samples\"");
    HH_VERIFY_THROWS(std::invalid_argument, d::buildSyntheticTask(recall(40, 1)));
    c = recall();
    c.supervision = "all";
    HH_VERIFY_THROWS_WITH(d::buildSyntheticTask(c), "\"supervision\"");
  }

  // "every_recall": the train split scores the query and every pair whose key appeared before in
  // the row (target = the pair's value, at the key); the ids and the test split are unchanged.
  void everyRecallScoresRepeatedKeys() {
    for (int64_t T : {128, 33}) {
      auto c = recall(40, T);
      const auto plain = d::buildSyntheticTask(c);
      c.supervision = "every_recall";
      const auto dense = d::buildSyntheticTask(c);
      QVERIFY(dense.train.ids.equal(plain.train.ids));
      QVERIFY(same(dense.test, plain.test));
      const auto ids = dense.train.ids.accessor<int64_t, 2>();
      const auto targets = dense.train.targets.accessor<int64_t, 2>();
      int64_t scored = 0;
      for (int64_t n = 0; n < ids.size(0); ++n)
        for (int64_t t = 0; t < T; ++t) {
          int64_t expected = d::kIgnoreTarget;
          if (t == T - 2) expected = ids[n][T - 1];
          const bool pairKey = t >= T % 2 && t < T - 2 && (t - T % 2) % 2 == 0;
          if (pairKey)
            for (int64_t u = T % 2; u < t; u += 2)
              if (ids[n][u] == ids[n][t]) expected = ids[n][t + 1];
          QCOMPARE(targets[n][t], expected);
          scored += expected != d::kIgnoreTarget;
        }
      // 63 pairs over 20 keys: most pairs repeat a key (at least 43 of 63 per row at T = 128).
      if (T == 128) QVERIFY(scored >= ids.size(0) * 44);
    }
  }
};

HH_TEST_SUITE(TestSyntheticTasks, "engine.data.synthetic_tasks", &TestSyntheticTasks::deterministicForASeed,
              &TestSyntheticTasks::associativeRecallIsConsistent, &TestSyntheticTasks::copyRepeatsTheSymbols,
              &TestSyntheticTasks::badConfigsNameTheField, &TestSyntheticTasks::everyRecallScoresRepeatedKeys)

}  // namespace test_synthetic_tasks

#if HH_HAVE_QTEST
#include "test_synthetic_tasks.moc"
#endif
