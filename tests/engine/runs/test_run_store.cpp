// engine.runs.store: the run file in one process. Round trips of every kind of data (scalars,
// tables, snapshots with and without pooling, curves, weights, log lines, status, export path,
// header and the layout reconstructed from the file), long text and a config past HDF5's 64 KiB
// attribute limit, status transitions, the flush cadence, and readers beside the writer in the
// same process (same thread and another thread).
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "engine/runs/run_reader.h"
#include "engine/runs/run_writer.h"
#include "tests/engine/runs/run_test_support.h"
#include "tests/support/hh_test.h"

namespace test_run_store {

using namespace hh::runs;
using namespace hh::runs::testing;

class TestRunStore : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void roundTripEveryKind();
  void snapshotPooling();
  void causalPoolingMasksTheFuture();
  void statusTransitions();
  void readerBesideWriter();
  void readerOnAnotherThread();
  void flushCadence();
  void largeConfigAndLongText();
};

namespace {

constexpr int kRoundTripSteps = 25;

// Every kind of row a run holds, over 25 steps, then the final path and the status.
void writeEveryKind(const std::string& path, const RunHeader& header, const std::string& exportPath) {
  const int steps = kRoundTripSteps;
  RunWriter w = RunWriter::create(path, header);
  QCOMPARE(w.status(), RunStatus::Running);
  for (int s = 0; s < steps; ++s) {
    w.appendScalars(s, {{"loss", lossAt(s)}, {"lr", lrAt(s)}});
    if (s % 5 == 4) w.appendScalar(s, "val_loss", lossAt(s) + 0.5);
    for (int t = 0; t < 4; ++t) w.appendTable(s, header.layout.tables[t].name, tableAt(s, t));
    if (s % 10 == 0) {
      w.appendSnapshot(s, mapsAt(s, 2, kTokens, 0), s == 0 ? std::vector<float>{} : mapsAt(s, 2, kTokens, 1));
      w.appendCurves(s, curvesAt(s));
      w.appendWeights(s, {{"fm.weight", weightAt(s, 48)}, {"fm.bias", weightAt(s, 12)}});
      w.log("step " + std::to_string(s), s);
    }
  }
  w.appendWeights(99, {{"fm.bias", weightAt(99, 12)}});  // a subset is fine
  w.log("no step");
  w.setFinal(exportPath, steps - 1);
  w.setStatus(RunStatus::Completed, "finished in 25 steps");
  w.close();
  QVERIFY(!w.isOpen());
}

// The header and the layout as found in the file, in declaration order.
void checkHeaderAndLayout(RunReader& r, const RunHeader& header) {
  QVERIFY(r.live());
  QCOMPARE(r.schemaVersion(), kSchemaVersion);
  const RunHeader& h = r.header();
  QCOMPARE(h.runId, std::string("rt-42"));
  QCOMPARE(h.kind, std::string("distill"));
  QCOMPARE(h.configJson, header.configJson);
  QCOMPARE(h.engineVersion, std::string("0.1.0"));
  QCOMPARE(h.device, std::string("cpu"));
  QVERIFY(h.startTime.size() == 20 && h.startTime.back() == 'Z');
  QVERIFY(std::abs(h.startTimeUnix - unixNow()) < 60.0);

  const RunLayout& l = h.layout;
  QCOMPARE(l.scalars.size(), size_t(3));
  QCOMPARE(l.scalars[0].name, std::string("loss"));
  QCOMPARE(l.scalars[0].units, std::string("nat"));
  QCOMPARE(l.scalars[2].name, std::string("val_loss"));
  QCOMPARE(l.tables.size(), size_t(4));
  QCOMPARE(l.tables[3].name, std::string("monotonicity"));
  QCOMPARE(l.layers, kLayers);
  QCOMPARE(l.heads, kHeads);
  QVERIFY(l.snapshots.pairs == header.layout.snapshots.pairs);
  QVERIFY(l.snapshots.tokens == header.layout.snapshots.tokens);
  QCOMPARE(l.snapshots.storedSize(), kTokens);
  QVERIFY(l.curves.pairs == header.layout.curves.pairs);
  QCOMPARE(l.curves.bins, kBins);
  QVERIFY(l.curves.labels == header.layout.curves.labels);
  QCOMPARE(l.weights.size(), size_t(2));
  QCOMPARE(l.weights[0].name, std::string("fm.weight"));
  QVERIFY(l.weights[0].shape == (std::vector<int64_t>{3, 4, 4}));

}

void checkScalarsAndTables(RunReader& r, const RunHeader& header) {
  const int steps = kRoundTripSteps;
  // Scalars: exact doubles, steps, times in order.
  const ScalarSeries loss = r.scalars("loss");
  QCOMPARE(loss.values.size(), size_t(steps));
  for (int s = 0; s < steps; ++s) {
    QCOMPARE(loss.steps[s], int64_t(s));
    QCOMPARE(loss.values[s], lossAt(s));
    if (s > 0) QVERIFY(loss.times[s] >= loss.times[s - 1]);
  }
  QCOMPARE(r.scalars("lr").values[7], lrAt(7));
  const ScalarSeries val = r.scalars("val_loss");
  QVERIFY(val.steps == (std::vector<int64_t>{4, 9, 14, 19, 24}));
  QCOMPARE(val.values[2], lossAt(14) + 0.5);
  const ScalarSeries tail = r.scalars("loss", 20);  // incremental read
  QCOMPARE(tail.steps.size(), size_t(5));
  QCOMPARE(tail.steps[0], int64_t(20));
  QCOMPARE(r.scalars("loss", 99).steps.size(), size_t(0));

  // Tables [N, L, H].
  for (int t = 0; t < 4; ++t) {
    const TableSeries table = r.table(header.layout.tables[t].name);
    QCOMPARE(table.size(), size_t(steps));
    QCOMPARE(table.at(17, 1, 2), tableAt(17, t)[1 * kHeads + 2]);
    QCOMPARE(table.values.size(), size_t(steps * kLayers * kHeads));
  }

}

void checkMapsAndWeights(RunReader& r) {
  // Snapshots [P, S, S]; the first had no linear maps (NaN).
  QCOMPARE(r.snapshotCount(), int64_t(3));
  QVERIFY(r.snapshotSteps() == (std::vector<int64_t>{0, 10, 20}));
  const Snapshot first = r.snapshot(0), last = r.snapshot(-1);
  QVERIFY(first.softmax == mapsAt(0, 2, kTokens, 0));
  QVERIFY(std::isnan(first.linear[0]) && std::isnan(first.linear.back()));
  QCOMPARE(last.step, int64_t(20));
  QCOMPARE(last.size, kTokens);
  QVERIFY(last.linear == mapsAt(20, 2, kTokens, 1));

  // Curves [P] x B.
  QCOMPARE(r.curveCount(), int64_t(3));
  const CurveSet c = r.curves(1);
  QCOMPARE(c.step, int64_t(10));
  const auto want = curvesAt(10);
  for (int p = 0; p < 2; ++p) {
    QVERIFY(c.curves[p].binCenters == want[p].binCenters);
    QVERIFY(c.curves[p].mean == want[p].mean);
    QVERIFY(c.curves[p].stddev == want[p].stddev);
    QVERIFY(c.curves[p].count == want[p].count);
  }

  // Weights: each tensor its own steps.
  QCOMPARE(r.weightCount("fm.weight"), int64_t(3));
  QCOMPARE(r.weightCount("fm.bias"), int64_t(4));
  QVERIFY(r.weightSteps("fm.bias") == (std::vector<int64_t>{0, 10, 20, 99}));
  const WeightCheckpoint wt = r.weights("fm.weight", 2);
  QCOMPARE(wt.step, int64_t(20));
  QVERIFY(wt.shape == (std::vector<int64_t>{3, 4, 4}));
  QVERIFY(wt.values == weightAt(20, 48));
  QVERIFY(r.weights("fm.bias", -1).values == weightAt(99, 12));

}

void checkLogStatusAndErrors(RunReader& r, const std::string& exportPath) {
  const int steps = kRoundTripSteps;
  // Log, export, status.
  const auto lines = r.logLines();
  QCOMPARE(lines.size(), size_t(4));
  QCOMPARE(lines[1].text, std::string("step 10"));
  QCOMPARE(lines[1].step, int64_t(10));
  QCOMPARE(lines[3].step, int64_t(-1));
  QCOMPARE(r.logLines(3).size(), size_t(1));
  QCOMPARE(r.exportPath(), exportPath);
  QCOMPARE(r.exports().back().step, int64_t(steps - 1));
  QCOMPARE(r.status(), RunStatus::Completed);
  QCOMPARE(r.statusMessage(), std::string("finished in 25 steps"));
  QVERIFY(!std::isnan(r.endTime()));
  QVERIFY(!r.writerActive());
  QVERIFY(!r.interrupted());
  QVERIFY(!r.refresh());  // nothing new


  // Unknown names and indices.
  QVERIFY_THROWS(std::invalid_argument, r.scalars("nope"), "nope");
  QVERIFY_THROWS(std::invalid_argument, r.table("nope"), "nope");
  QVERIFY_THROWS(std::out_of_range, r.snapshot(3), "snapshot");
  QVERIFY_THROWS(std::out_of_range, r.curves(-4), "curve");
}

}  // namespace

void TestRunStore::roundTripEveryKind() {
  ScratchDir tmp;
  const std::string path = tmp.file("run.h5");
  const RunHeader header = sampleHeader("rt-42");
  writeEveryKind(path, header, tmp.file("export-folder"));
  HH_RETURN_IF_FAILED();
  RunReader r = RunReader::open(path);
  checkHeaderAndLayout(r, header);
  HH_RETURN_IF_FAILED();
  checkScalarsAndTables(r, header);
  HH_RETURN_IF_FAILED();
  checkMapsAndWeights(r);
  HH_RETURN_IF_FAILED();
  checkLogStatusAndErrors(r, tmp.file("export-folder"));
}

void TestRunStore::snapshotPooling() {
  // Edges: floor(i * T / S).
  QVERIFY(poolEdges(5, 2) == (std::vector<int>{0, 2, 5}));
  QVERIFY(poolEdges(300, 128).back() == 300);
  QVERIFY(poolEdges(7, 7) == (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
  // By hand: T = 3, S = 2, one map [[1,2,3],[4,5,6],[7,8,9]]; edges {0, 1, 3}:
  // [0,0] = 1, [0,1] = (2+3)/2, [1,0] = (4+7)/2, [1,1] = (5+6+8+9)/4.
  const auto pooled = poolMaps({1, 2, 3, 4, 5, 6, 7, 8, 9}, 1, 3, 2);
  QVERIFY(pooled == (std::vector<float>{1.0f, 2.5f, 5.5f, 7.0f}));
  QVERIFY_THROWS(std::invalid_argument, poolMaps({1, 2, 3}, 1, 3, 2), "expected 9");
  QVERIFY_THROWS(std::invalid_argument, poolEdges(3, 4), "S <= T");

  // A 300-token probe stored at the default S = 128: the writer pools [P, T, T] itself.
  ScratchDir tmp;
  RunHeader h = sampleHeader();
  h.layout.snapshots.tokens.assign(300, "x");
  QCOMPARE(h.layout.snapshots.storedSize(), 128);
  {
    RunWriter w = RunWriter::create(tmp.file("pool.h5"), h);
    std::vector<float> maps(2 * 300 * 300);
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> u(0.0f, 1.0f);
    for (auto& v : maps) v = u(rng);
    w.appendSnapshot(3, maps, maps);
    w.appendSnapshot(4, poolMaps(maps, 2, 300, 128), {});  // already [P, S, S]
    w.close();
    RunReader r = RunReader::open(tmp.file("pool.h5"));
    QCOMPARE(r.header().layout.snapshots.size, 128);
    QCOMPARE(r.header().layout.snapshots.tokenCount(), 300);
    const Snapshot s = r.snapshot(0);
    QCOMPARE(s.size, 128);
    QVERIFY(s.softmax == poolMaps(maps, 2, 300, 128));
    QVERIFY(s.linear == s.softmax);
    QVERIFY(r.snapshot(1).softmax == s.softmax);
  }
}

// A causal map (zeros above the diagonal): a block's mean is over its valid pairs only, and a
// block wholly above the diagonal is NaN. The zeros were averaged in (a diagonal block at about
// half its strength) and upper blocks stored as weight 0.
void TestRunStore::causalPoolingMasksTheFuture() {
  // T = 4, row r holds 1 / (r + 1) on keys 0..r; S = 2, edges {0, 2, 4}.
  std::vector<float> causal(16, 0.0f);
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c <= r; ++c) causal[size_t(r * 4 + c)] = 1.0f / float(r + 1);
  QVERIFY(isCausalMap(causal.data(), 4));
  const auto pooled = poolMaps(causal, 1, 4, 2);
  QCOMPARE(pooled.size(), size_t(4));
  QVERIFY(std::abs(pooled[0] - 2.0f / 3.0f) < 1e-6);            // (1 + 1/2 + 1/2) / 3
  QVERIFY(std::isnan(pooled[1]));                               // keys after every query
  QVERIFY(std::abs(pooled[2] - 7.0f / 24.0f) < 1e-6);           // (1/3 + 1/3 + 1/4 + 1/4) / 4
  QVERIFY(std::abs(pooled[3] - (1.0f / 3 + 0.5f) / 3) < 1e-6);  // (1/3 + 1/4 + 1/4) / 3
  // S = T keeps the values; the future is NaN.
  const auto same = poolMaps(causal, 1, 4, 4);
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < 4; ++c) {
      if (c <= r)
        QCOMPARE(same[size_t(r * 4 + c)], causal[size_t(r * 4 + c)]);
      else
        QVERIFY(std::isnan(same[size_t(r * 4 + c)]));
    }
  // A map with weight above the diagonal (bidirectional) is pooled over every pair, as before.
  std::vector<float> full(16, 0.25f);
  QVERIFY(!isCausalMap(full.data(), 4));
  QVERIFY(poolMaps(full, 1, 4, 2) == std::vector<float>(4, 0.25f));
}

void TestRunStore::statusTransitions() {
  ScratchDir tmp;
  for (RunStatus final : {RunStatus::Completed, RunStatus::Failed, RunStatus::Cancelled}) {
    const std::string path = tmp.file(std::string(statusName(final)) + ".h5");
    RunWriter w = RunWriter::create(path, sampleHeader());
    w.appendScalar(7, "loss", 1.0);
    {
      RunReader r = RunReader::open(path);
      QCOMPARE(r.status(), RunStatus::Running);
      QVERIFY(std::isnan(r.endTime()));
      QVERIFY(r.writerActive());
      QVERIFY(!r.interrupted());
    }
    w.setStatus(final, std::string("ended as ") + statusName(final));
    QCOMPARE(w.status(), final);
    QVERIFY_THROWS(std::logic_error, w.setStatus(RunStatus::Running), "already");
    QVERIFY_THROWS(std::logic_error, w.setStatus(RunStatus::Completed), "already");
    w.close();
    w.close();  // idempotent
    QVERIFY_THROWS(std::logic_error, w.appendScalar(8, "loss", 1.0), "closed");
    QVERIFY_THROWS(std::logic_error, w.flush(), "closed");

    RunReader r = RunReader::open(path);
    const auto history = r.statusHistory();
    QCOMPARE(history.size(), size_t(2));
    QCOMPARE(history[0].status, RunStatus::Running);
    QCOMPARE(history[1].status, final);
    QCOMPARE(history[1].step, int64_t(7));  // last step appended before the change
    QCOMPARE(history[1].message, std::string("ended as ") + statusName(final));
    QVERIFY(history[1].time >= history[0].time);
    QCOMPARE(r.endTime(), history[1].time);
  }
  QCOMPARE(parseStatus("cancelled"), RunStatus::Cancelled);
  QVERIFY_THROWS(std::invalid_argument, parseStatus("paused"), "paused");
}

void TestRunStore::readerBesideWriter() {
  // The workbench reads in the process that runs the job: a reader next to the open writer.
  ScratchDir tmp;
  const std::string path = tmp.file("same.h5");
  RunWriter w = RunWriter::create(path, sampleHeader(), {{0, 0.0}, false});  // flush by hand only
  RunReader r = RunReader::open(path);
  QVERIFY(r.live());
  QVERIFY(r.writerActive());
  QCOMPARE(r.scalarRows("loss"), int64_t(0));
  for (int s = 0; s < 10; ++s) w.appendScalars(s, {{"loss", lossAt(s)}});
  w.flush();
  QVERIFY(r.refresh());
  QCOMPARE(r.scalarRows("loss"), int64_t(10));
  QCOMPARE(r.scalars("loss").values[9], lossAt(9));
  // Refreshes between unflushed appends leave the writer's rows intact.
  for (int s = 10; s < 40; ++s) {
    w.appendScalars(s, {{"loss", lossAt(s)}});
    w.appendTable(s, "kl", tableAt(s, 0));
    r.refresh();
    QCOMPARE(r.scalarRows("loss"), int64_t(10));  // committed at the last flush
  }
  w.flush();
  QVERIFY(r.refresh());
  QCOMPARE(r.scalarRows("loss"), int64_t(40));
  QCOMPARE(r.tableRows("kl"), int64_t(30));
  QCOMPARE(r.table("kl").at(29, 1, 1), tableAt(39, 0)[kHeads + 1]);
  w.appendSnapshot(10, mapsAt(10, 2, kTokens, 0), mapsAt(10, 2, kTokens, 1));
  w.setStatus(RunStatus::Completed);
  w.close();
  r.refresh();
  QVERIFY(r.scalars("loss").values == RunReader::open(path).scalars("loss").values);
  QCOMPARE(r.snapshotCount(), int64_t(1));
  QCOMPARE(r.status(), RunStatus::Completed);
  QVERIFY(!r.writerActive());
}

void TestRunStore::readerOnAnotherThread() {
  // The workbench: the job writes on a worker thread while the GUI thread refreshes and reads.
  ScratchDir tmp;
  const std::string path = tmp.file("threads.h5");
  RunWriter w = RunWriter::create(path, sampleHeader(), {{50, 0.0}, false});
  RunReader r = RunReader::open(path);
  const int steps = 3000;
  std::thread job([&] {
    for (int s = 0; s < steps; ++s) {
      w.appendScalars(s, {{"loss", lossAt(s)}, {"lr", lrAt(s)}});
      if (s % 3 == 0) w.appendTable(s / 3, "kl", tableAt(s / 3, 0));
    }
    w.setStatus(RunStatus::Completed);
  });
  int64_t last = 0, reads = 0;
  std::string problem;
  while (problem.empty() && (r.status() == RunStatus::Running || reads == 0)) {
    r.refresh();
    const ScalarSeries loss = r.scalars("loss", last);  // only the new rows
    for (size_t i = 0; i < loss.steps.size(); ++i)
      if (loss.steps[i] != last + int64_t(i) || loss.values[i] != lossAt(loss.steps[i])) problem = "bad loss row";
    last += int64_t(loss.steps.size());
    const TableSeries kl = r.table("kl");
    if (kl.size() > 0 && kl.at(kl.size() - 1, 1, 2) != tableAt(int64_t(kl.size()) - 1, 0)[kHeads + 2])
      problem = "bad kl row";
    ++reads;
  }
  job.join();
  QVERIFY2(problem.empty(), problem.c_str());
  r.refresh();
  QCOMPARE(r.scalarRows("loss"), int64_t(steps));
  QCOMPARE(r.tableRows("kl"), int64_t(steps / 3));
  QVERIFY(reads > 1);
}

void TestRunStore::flushCadence() {
  ScratchDir tmp;
  {
    RunWriter w = RunWriter::create(tmp.file("count.h5"), sampleHeader(), {{10, 0.0}, false});
    const int64_t atStart = w.flushCount();  // create flushes once
    for (int s = 0; s < 25; ++s) w.appendScalar(s, "loss", lossAt(s));
    QCOMPARE(w.flushCount() - atStart, int64_t(2));
    RunReader r = RunReader::open(tmp.file("count.h5"));
    QCOMPARE(r.scalarRows("loss"), int64_t(20));  // rows since the last flush are not committed yet
    w.setStatus(RunStatus::Completed);            // a status change flushes
    r.refresh();
    QCOMPARE(r.scalarRows("loss"), int64_t(25));
  }
  {
    RunWriter w = RunWriter::create(tmp.file("time.h5"), sampleHeader(), {{0, 0.05}, false});
    const int64_t atStart = w.flushCount();
    w.appendScalar(0, "loss", 1.0);
    QCOMPARE(w.flushCount(), atStart);
    std::this_thread::sleep_for(std::chrono::milliseconds(80));
    w.appendScalar(1, "loss", 1.0);
    QCOMPARE(w.flushCount(), atStart + 1);
  }
}

void TestRunStore::largeConfigAndLongText() {
  ScratchDir tmp;
  RunHeader h = sampleHeader();
  h.configJson = "{\"blob\": \"" + std::string(200000, 'x') + "\"}";  // past the 64 KiB object-header limit
  const std::string longLine = std::string(kLogLineBytes - 1, 'a') + "\xC3\xA9" + "tail";  // é straddles the cut
  const std::string path = tmp.file("big.h5");
  {
    RunWriter w = RunWriter::create(path, h);
    w.log(longLine);
    w.log("caf\xC3\xA9 \xE2\x9C\x93");
    w.setStatus(RunStatus::Failed, std::string(5000, 'm'));
    w.close();
  }
  RunReader r = RunReader::open(path);
  QCOMPARE(r.header().configJson, h.configJson);
  const auto lines = r.logLines();
  QCOMPARE(lines[0].text, std::string(kLogLineBytes - 1, 'a'));  // cut before the 2-byte sequence
  QCOMPARE(lines[1].text, std::string("caf\xC3\xA9 \xE2\x9C\x93"));
  QCOMPARE(r.statusMessage().size(), size_t(kMessageBytes));
  QCOMPARE(r.header().layout.snapshots.tokens[3], std::string(" caf\xC3\xA9"));
}

HH_TEST_SUITE(TestRunStore, "engine.runs.store", &TestRunStore::roundTripEveryKind, &TestRunStore::snapshotPooling,
              &TestRunStore::causalPoolingMasksTheFuture, &TestRunStore::statusTransitions,
              &TestRunStore::readerBesideWriter, &TestRunStore::readerOnAnotherThread, &TestRunStore::flushCadence,
              &TestRunStore::largeConfigAndLongText)

}  // namespace test_run_store

#if HH_HAVE_QTEST
#include "test_run_store.moc"
#endif
