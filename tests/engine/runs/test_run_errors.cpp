// engine.runs.errors: what the run store refuses, and how. Bad layouts and bad appends throw
// std::invalid_argument before anything is written; an existing file is kept unless overwrite is
// asked for; missing, foreign, garbage, truncated and damaged files give a RunFileError that names
// the file (never a crash or a hang: damaged metadata fails its checksum within a bounded retry).
#include <hdf5.h>

#include <cstdio>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "engine/runs/run_reader.h"
#include "engine/runs/run_writer.h"
#include "tests/engine/runs/run_test_support.h"
#include "tests/support/hh_test.h"

namespace test_run_errors {

using namespace hh::runs;
using namespace hh::runs::testing;

namespace {

// A completed run with `steps` steps of loss, lr and kl.
void writeSampleRun(const std::string& path, int steps) {
  RunWriter w = RunWriter::create(path, sampleHeader());
  for (int s = 0; s < steps; ++s) {
    w.appendScalars(s, {{"loss", lossAt(s)}, {"lr", lrAt(s)}});
    w.appendTable(s, "kl", tableAt(s, 0));
  }
  w.setStatus(RunStatus::Completed, "done");
  w.close();
}

// Opens `path` and reads everything; throws what the reader throws.
void readEverything(const std::string& path) {
  RunReader r = RunReader::open(path);
  for (const auto& s : r.header().layout.scalars) r.scalars(s.name);
  for (const auto& t : r.header().layout.tables) r.table(t.name);
  for (int64_t i = 0; i < r.snapshotCount(); ++i) r.snapshot(i);
  for (int64_t i = 0; i < r.curveCount(); ++i) r.curves(i);
  for (const auto& w : r.header().layout.weights)
    for (int64_t i = 0; i < r.weightCount(w.name); ++i) r.weights(w.name, i);
  r.logLines();
  r.statusHistory();
  r.exportPath();
}

}  // namespace

class TestRunErrors : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void layoutValidation();
  void appendValidation();
  void missingAndForeignFilesFail();
  void truncatedAndDamagedFilesFail();
};

void TestRunErrors::layoutValidation() {
  ScratchDir tmp;
  auto createFails = [&](const std::function<void(RunLayout&)>& edit, const std::string& needle) {
    RunHeader h = sampleHeader();
    edit(h.layout);
    const std::string msg = errorOf<std::invalid_argument>([&] { RunWriter::create(tmp.file("bad.h5"), h); });
    const bool ok = has(msg, needle) && !std::filesystem::exists(tmp.file("bad.h5"));
    if (!ok) std::fprintf(stderr, "layout error '%s' lacks '%s'\n", msg.c_str(), needle.c_str());
    return ok;
  };
  QVERIFY(createFails([](RunLayout& l) { l.scalars.push_back(""); }, "empty scalar"));
  QVERIFY(createFails([](RunLayout& l) { l.scalars.push_back("loss"); }, "duplicate scalar name 'loss'"));
  QVERIFY(createFails([](RunLayout& l) { l.tables.push_back("a/b"); }, "'a/b'"));
  QVERIFY(createFails([](RunLayout& l) { l.weights.push_back({"..", {1}}); }, "'..'"));
  QVERIFY(createFails([](RunLayout& l) { l.heads = 0; }, "heads >= 1"));
  QVERIFY(createFails([](RunLayout& l) { l.snapshots.pairs.push_back({2, 0}); }, "layer 2"));
  QVERIFY(createFails([](RunLayout& l) { l.curves.pairs.push_back({0, -1}); }, "head -1"));
  QVERIFY(createFails([](RunLayout& l) { l.snapshots.size = kTokens + 1; }, "S = 11"));
  QVERIFY(createFails([](RunLayout& l) { l.snapshots.tokens.clear(); }, "probe token"));
  QVERIFY(createFails([](RunLayout& l) { l.curves.bins = 0; }, "bins >= 1"));
  QVERIFY(createFails([](RunLayout& l) { l.curves.labels.push_back("extra"); }, "one per pair (2), got 3"));
  QVERIFY(createFails([](RunLayout& l) { l.weights[0].shape = {3, 0}; }, "dimension < 1"));

  // An existing file is refused unless overwrite is asked for.
  const std::string path = tmp.file("exists.h5");
  writeBytes(path, "precious");
  QVERIFY_THROWS(RunFileError, RunWriter::create(path, sampleHeader()), "already exists");
  QCOMPARE(readBytes(path), std::string("precious"));
  RunWriter::create(path, sampleHeader(), {{}, true}).close();
  QCOMPARE(RunReader::open(path).status(), RunStatus::Running);  // closed without a final status
  // A folder that does not exist: the error names the path.
  const std::string nowhere = tmp.file("no/such/folder/run.h5");
  QVERIFY_THROWS(RunFileError, RunWriter::create(nowhere, sampleHeader()), nowhere);
}

void TestRunErrors::appendValidation() {
  ScratchDir tmp;
  const std::string path = tmp.file("v.h5");
  RunWriter w = RunWriter::create(path, sampleHeader());
  QVERIFY_THROWS(std::invalid_argument, w.appendScalars(0, {{"loss", 1.0}, {"accuracy", 0.5}}), "'accuracy'");
  QVERIFY_THROWS(std::invalid_argument, w.appendTable(0, "kl", std::vector<double>(5)), "needs 6 values");
  QVERIFY_THROWS(std::invalid_argument, w.appendTable(0, "ppl", std::vector<double>(6)), "'ppl'");
  QVERIFY_THROWS(std::invalid_argument, w.appendSnapshot(0, std::vector<float>(7), {}), "[P, S, S]");
  QVERIFY_THROWS(std::invalid_argument, w.appendSnapshot(0, mapsAt(0, 2, kTokens, 0), std::vector<float>(3)), "linear");
  auto curves = curvesAt(0);
  curves[1].mean.pop_back();
  QVERIFY_THROWS(std::invalid_argument, w.appendCurves(0, curves), "4 bins");
  QVERIFY_THROWS(std::invalid_argument, w.appendCurves(0, {curvesAt(0)[0]}), "one per pair");
  QVERIFY_THROWS(std::invalid_argument,
                 w.appendWeights(0, {{"fm.bias", weightAt(0, 12)}, {"fm.weight", weightAt(0, 47)}}), "needs 48");
  QVERIFY_THROWS(std::invalid_argument, w.appendWeights(0, {{"lm_head", {1.0f}}}), "'lm_head'");
  curves = curvesAt(0);
  curves[0].count.clear();  // counts are optional
  w.appendCurves(0, curves);
  w.close();
  // Nothing of a refused append was written.
  RunReader r = RunReader::open(path);
  QCOMPARE(r.scalarRows("loss"), int64_t(0));
  QCOMPARE(r.tableRows("kl"), int64_t(0));
  QCOMPARE(r.snapshotCount(), int64_t(0));
  QCOMPARE(r.weightCount("fm.bias"), int64_t(0));
  QCOMPARE(r.curveCount(), int64_t(1));
  QVERIFY(r.curves(0).curves[0].count == std::vector<int64_t>(kBins, -1));

  // A layout with no snapshots or curves refuses them.
  RunHeader bare = sampleHeader();
  bare.layout.snapshots = {};
  bare.layout.curves = {};
  RunWriter b = RunWriter::create(tmp.file("bare.h5"), bare);
  QVERIFY_THROWS(std::invalid_argument, b.appendSnapshot(0, {}, {}), "no snapshots");
  QVERIFY_THROWS(std::invalid_argument, b.appendCurves(0, {}), "no curves");
  b.close();
  RunReader rb = RunReader::open(tmp.file("bare.h5"));
  QCOMPARE(rb.snapshotCount(), int64_t(0));
  QVERIFY(!rb.header().layout.snapshots.enabled());
}

void TestRunErrors::missingAndForeignFilesFail() {
  ScratchDir tmp;
  QVERIFY_THROWS(RunFileError, RunReader::open(tmp.file("absent.h5")), "no such file");
  std::filesystem::create_directory(tmp.file("folder.h5"));
  QVERIFY_THROWS(RunFileError, RunReader::open(tmp.file("folder.h5")), "not a regular file");
  writeBytes(tmp.file("empty.h5"), "");
  QVERIFY_THROWS(RunFileError, RunReader::open(tmp.file("empty.h5")), "not an HDF5 file");
  writeBytes(tmp.file("text.h5"), "{\"this\": \"is json\"}\n");
  QVERIFY_THROWS(RunFileError, RunReader::open(tmp.file("text.h5")), tmp.file("text.h5"));
  std::mt19937 rng(3);
  std::string noise(100000, '\0');
  for (auto& c : noise) c = char(rng());
  writeBytes(tmp.file("noise.h5"), noise);
  QVERIFY_THROWS(RunFileError, RunReader::open(tmp.file("noise.h5")), "not an HDF5 file");
  // An HDF5 signature followed by noise.
  writeBytes(tmp.file("sig.h5"), std::string("\x89HDF\r\n\x1a\n", 8) + noise);
  QVERIFY_THROWS(RunFileError, RunReader::open(tmp.file("sig.h5")), tmp.file("sig.h5"));

  // Valid HDF5 that is not a run file; a run file from a newer schema.
  const std::string plain = tmp.file("plain.h5"), future = tmp.file("future.h5");
  for (const std::string& p : {plain, future}) {
    hid_t f = H5Fcreate(p.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    QVERIFY(f >= 0);
    if (p == future) {
      hid_t space = H5Screate(H5S_SCALAR);
      hid_t attr = H5Acreate2(f, "schema_version", H5T_STD_I64LE, space, H5P_DEFAULT, H5P_DEFAULT);
      const int64_t version = kSchemaVersion + 1;
      H5Awrite(attr, H5T_NATIVE_INT64, &version);
      H5Aclose(attr);
      H5Sclose(space);
    }
    H5Fclose(f);
  }
  QVERIFY_THROWS(RunFileError, RunReader::open(plain), "not a Hedgehog run file");
  QVERIFY_THROWS(RunFileError, RunReader::open(future), "schema version 2 is not supported");
}

void TestRunErrors::truncatedAndDamagedFilesFail() {
  ScratchDir tmp;
  const std::string good = tmp.file("good.h5");
  writeSampleRun(good, 300);
  const std::string bytes = readBytes(good);
  QVERIFY(bytes.size() > 10000);
  readEverything(good);

  // Truncated anywhere: open (or a read) throws RunFileError naming the file; never a crash.
  for (double fraction : {0.0005, 0.01, 0.1, 0.3, 0.5, 0.7, 0.9, 0.99}) {
    const std::string path = tmp.file("cut.h5");
    writeBytes(path, bytes.substr(0, size_t(double(bytes.size()) * fraction)));
    QVERIFY_THROWS(RunFileError, readEverything(path), path);
  }
  writeBytes(tmp.file("short1.h5"), bytes.substr(0, bytes.size() - 1));
  QVERIFY_THROWS(RunFileError, readEverything(tmp.file("short1.h5")), "short1.h5");

  // Bytes overwritten in the middle: metadata is checksummed, so either everything still reads
  // (only raw data was hit) or a RunFileError says what failed.
  std::mt19937 rng(11);
  int failures = 0;
  for (int trial = 0; trial < 12; ++trial) {
    std::string damaged = bytes;
    const size_t at = size_t(rng() % (damaged.size() - 64));
    for (size_t i = 0; i < 64; ++i) damaged[at + i] = char(rng());
    const std::string path =
        tmp.file("damaged-" + std::to_string(trial) + ".h5");  // HDF5 keeps some damaged files open
    writeBytes(path, damaged);
    const std::string msg = errorOf<RunFileError>([&] { readEverything(path); });
    const std::string other = errorOf<std::exception>([&] { readEverything(path); });
    QVERIFY2(other.empty() || !msg.empty(), other.c_str());  // no other exception type
    if (!msg.empty()) {
      QVERIFY2(has(msg, path), msg.c_str());
      ++failures;
    }
  }
  std::printf("damaged files: %d of 12 refused with RunFileError, the rest read\n", failures);
}

HH_TEST_SUITE(TestRunErrors, "engine.runs.errors", &TestRunErrors::layoutValidation, &TestRunErrors::appendValidation,
              &TestRunErrors::missingAndForeignFilesFail, &TestRunErrors::truncatedAndDamagedFilesFail)

}  // namespace test_run_errors

#if HH_HAVE_QTEST
#include "test_run_errors.moc"
#endif
