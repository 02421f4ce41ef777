// engine.runs.chain: a resumed job's run files read as one run (engine/runs/run_chain.h).
//   - runChain lists run.h5, then run-resumed-<S>.h5 by S as a number (10 after 9), and nothing
//     else in the folder (other .h5 files, a non-numeric S, a folder named like a run file);
//   - chainedScalars keeps each file's rows up to the step its continuation resumed from, so the
//     rows a killed run logged past its checkpoint are replaced by the continuation's;
//   - a file lacking the scalar, or not a run file at all, contributes nothing;
//   - chainedAllScalars equals chainedScalars of each name, over the union of the files' names;
//     given the first file open, it reads the same;
//   - shownStatus says "interrupted" for a file left running with no writer, else the status;
//   - chainOf puts a file in its folder's chain (also one not written yet) and leaves any other
//     name alone; chainFrom is the part from the file on;
//   - removeContinuations deletes the continuations from a step on and nothing else.
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "engine/runs/run_chain.h"
#include "engine/runs/run_writer.h"
#include "tests/engine/runs/run_test_support.h"
#include "tests/support/hh_test.h"

namespace test_run_chain {

using namespace hh::runs;
using namespace hh::runs::testing;

namespace {

// A run file with `loss` (and `lr` when `withLr`) at steps first..last, the loss tagged by `tag`
// so a reader can tell which file a row came from: tag * 1000 + step.
void writeRun(const std::string& path, int64_t first, int64_t last, double tag, bool withLr = true) {
  RunHeader h = sampleHeader();
  if (!withLr) h.layout.scalars = {{"loss", "nat"}};
  auto writer = RunWriter::create(path, h);
  for (int64_t s = first; s <= last; ++s) {
    std::map<std::string, double> row{{"loss", tag * 1000 + double(s)}};
    if (withLr) row["lr"] = lrAt(s);
    writer.appendScalars(s, row);
  }
  writer.close();
}

}  // namespace

class TestRunChain : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void listsTheContinuationsInOrder() {
    ScratchDir dir;
    for (const char* name : {"run-resumed-10.h5", "run-resumed-9.h5", "run.h5"}) std::ofstream(dir.file(name)) << "x";
    for (const char* name : {"other.h5", "run-resumed-x.h5", "run-resumed-.h5", "run-resumed-12.h5.bak"})
      std::ofstream(dir.file(name)) << "x";
    std::filesystem::create_directory(dir.file("run-resumed-11.h5"));
    const std::vector<std::string> expected{dir.file("run.h5"), dir.file("run-resumed-9.h5"), dir.file("run-resumed-10.h5")};
    QCOMPARE(runChain(dir.file("")), expected);
    QCOMPARE(resumedAfter(dir.file("run-resumed-10.h5")), int64_t(10));
    QCOMPARE(resumedAfter(dir.file("run.h5")), int64_t(0));
    QCOMPARE(resumedAfter("run-resumed-x.h5"), int64_t(0));
    QVERIFY(runChain(dir.file("missing")).empty());
  }

  void placesAFileInItsChain() {
    ScratchDir dir;
    for (const char* name : {"run.h5", "run-resumed-4.h5", "run-resumed-9.h5", "other.h5"})
      std::ofstream(dir.file(name)) << "x";
    const std::vector<std::string> all{dir.file("run.h5"), dir.file("run-resumed-4.h5"), dir.file("run-resumed-9.h5")};
    QCOMPARE(chainOf(dir.file("run.h5")), all);
    QCOMPARE(chainOf(dir.file("run-resumed-9.h5")), all);
    QCOMPARE(chainFrom(dir.file("run.h5")), all);
    QCOMPARE(chainFrom(dir.file("run-resumed-4.h5")), (std::vector<std::string>{all[1], all[2]}));
    QCOMPARE(chainFrom(dir.file("run-resumed-9.h5")), std::vector<std::string>{all[2]});
    // A continuation a job is about to write takes its place by S.
    QCOMPARE(chainOf(dir.file("run-resumed-6.h5")),
             (std::vector<std::string>{all[0], all[1], dir.file("run-resumed-6.h5"), all[2]}));
    QCOMPARE(chainOf(dir.file("other.h5")), std::vector<std::string>{dir.file("other.h5")});
    QCOMPARE(chainFrom(dir.file("other.h5")), std::vector<std::string>{dir.file("other.h5")});
    ScratchDir empty;
    QCOMPARE(chainOf(empty.file("run.h5")), std::vector<std::string>{empty.file("run.h5")});
  }

  void joinsTheScalarsAtTheResumeSteps() {
    ScratchDir dir;
    writeRun(dir.file("run.h5"), 1, 8, 1);               // killed at step 8, checkpoint at 6
    writeRun(dir.file("run-resumed-6.h5"), 7, 12, 2);    // killed at 12, checkpoint at 10
    writeRun(dir.file("run-resumed-10.h5"), 11, 15, 3);  // completed
    const auto loss = chainedScalars(runChain(dir.file("")), "loss");
    std::vector<int64_t> steps;
    std::vector<double> values;
    for (int64_t s = 1; s <= 15; ++s) {
      steps.push_back(s);
      values.push_back((s <= 6 ? 1 : s <= 10 ? 2 : 3) * 1000.0 + double(s));
    }
    QCOMPARE(loss.steps, steps);
    QCOMPARE(loss.values, values);
    QCOMPARE(loss.times.size(), steps.size());
    QVERIFY(chainedScalars(runChain(dir.file("")), "no_such_scalar").steps.empty());
    const auto all = chainedAllScalars(runChain(dir.file("")));
    for (const auto& [name, series] : all) QCOMPARE(series.values, chainedScalars(runChain(dir.file("")), name).values);
    QCOMPARE(all.at("loss").steps, steps);
    QCOMPARE(all.at("loss").values, values);
    QCOMPARE(all.at("loss").times, loss.times);
    QCOMPARE(all.at("lr").values, chainedScalars(runChain(dir.file("")), "lr").values);
    // With the first file already open: the same series.
    const auto chain = runChain(dir.file(""));
    const auto fromOpen = chainedAllScalars(RunReader::open(chain.front()), chain);
    QCOMPARE(fromOpen.size(), all.size());
    for (const auto& [name, series] : all) {
      QCOMPARE(fromOpen.at(name).steps, series.steps);
      QCOMPARE(fromOpen.at(name).values, series.values);
    }
  }

  void skipsFilesWithoutTheScalarOrUnreadable() {
    ScratchDir dir;
    writeRun(dir.file("run.h5"), 1, 4, 1);
    writeRun(dir.file("run-resumed-4.h5"), 5, 6, 2, /*withLr=*/false);
    std::ofstream(dir.file("run-resumed-6.h5")) << "not an HDF5 file";
    const auto chain = runChain(dir.file(""));
    QCOMPARE(chain.size(), size_t(3));
    QCOMPARE(chainedScalars(chain, "lr").steps, (std::vector<int64_t>{1, 2, 3, 4}));
    QCOMPARE(chainedScalars(chain, "loss").steps, (std::vector<int64_t>{1, 2, 3, 4, 5, 6}));
    const auto all = chainedAllScalars(chain);
    QCOMPARE(all.at("lr").steps, (std::vector<int64_t>{1, 2, 3, 4}));
    QCOMPARE(all.at("loss").steps, (std::vector<int64_t>{1, 2, 3, 4, 5, 6}));
  }

  void showsAKilledRunAsInterrupted() {
    ScratchDir dir;
    writeRun(dir.file("killed.h5"), 1, 2, 1);  // closed without a status: as a kill -9 leaves it
    QCOMPARE(shownStatus(RunReader::open(dir.file("killed.h5"))), std::string("interrupted"));
    auto writer = RunWriter::create(dir.file("done.h5"), sampleHeader());
    writer.setStatus(RunStatus::Cancelled);
    writer.close();
    QCOMPARE(shownStatus(RunReader::open(dir.file("done.h5"))), std::string("cancelled"));
    auto open = RunWriter::create(dir.file("live.h5"), sampleHeader());  // a writer has it open
    QCOMPARE(shownStatus(RunReader::open(dir.file("live.h5"))), std::string("running"));
  }

  void removesLaterContinuations() {
    ScratchDir dir;
    for (const char* name : {"run.h5", "run-resumed-4.h5", "run-resumed-9.h5", "run-resumed-x.h5", "other.h5"})
      std::ofstream(dir.file(name)) << "x";
    QCOMPARE(removeContinuations(dir.file(""), 5), 1);  // continued after step 4: 9 goes
    QCOMPARE(runChain(dir.file("")), (std::vector<std::string>{dir.file("run.h5"), dir.file("run-resumed-4.h5")}));
    QCOMPARE(removeContinuations(dir.file(""), 1), 1);  // afresh: every continuation goes
    QCOMPARE(runChain(dir.file("")), std::vector<std::string>{dir.file("run.h5")});
    for (const char* name : {"run.h5", "run-resumed-x.h5", "other.h5"})
      QVERIFY(std::filesystem::exists(dir.file(name)));
    QCOMPARE(removeContinuations(dir.file("missing"), 1), 0);
  }
};

HH_TEST_SUITE(TestRunChain, "engine.runs.chain", &TestRunChain::listsTheContinuationsInOrder,
              &TestRunChain::placesAFileInItsChain, &TestRunChain::joinsTheScalarsAtTheResumeSteps,
              &TestRunChain::skipsFilesWithoutTheScalarOrUnreadable, &TestRunChain::removesLaterContinuations,
              &TestRunChain::showsAKilledRunAsInterrupted)

}  // namespace test_run_chain

#if HH_HAVE_QTEST
#include "test_run_chain.moc"
#endif
