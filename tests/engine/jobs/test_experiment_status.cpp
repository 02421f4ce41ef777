// engine.jobs.experiment_status: where each variant of the tiny distillation experiment stands,
// read from its folder (variantStates, what `hedgehog experiment --status` prints):
//   - a completed variant: its record's state and wall time; a cancelled one: "cancelled" with the
//     record's message;
//   - a variant whose run file a writer holds open: "running", at the last step written, out of
//     the steps its config gives; "paused" while its log ends in "paused at step N"; once the writer is gone without an
//     end (a killed job): "interrupted", with how to continue it;
//   - a variant with nothing in its folder: "not started"; one whose record is of another config
//     (its config changed since): "not started", saying its files are from an earlier config.
#include <fstream>

#include "engine/jobs/experiment_job.h"
#include "engine/jobs/experiment_status.h"
#include "engine/runs/run_writer.h"
#include "tests/engine/jobs/experiment_test_support.h"
#include "tests/support/hh_test.h"
#include "tests/support/temp_dir.h"

namespace test_experiment_status {

namespace {

namespace j = hh::jobs;
namespace r = hh::runs;
using nlohmann::json;

// The tiny experiment with a third and a fourth variant (other seeds).
json fourVariants(const hh::test::TempDir& dir) {
  json e = hh::test::tinyExperiment(dir);
  e["variants"].push_back({{"name", "seed1"}, {"set", {{"seed", 1}}}});
  e["variants"].push_back({{"name", "seed2"}, {"set", {{"seed", 2}}}});
  return e;
}

const j::VariantState& stateOf(const std::vector<j::VariantState>& states, const std::string& name) {
  for (const auto& s : states)
    if (s.name == name) return s;
  throw std::runtime_error("no variant " + name);
}

// A run file for seed1 as its job would start it: kind distill, 50 steps, a loss at step 7.
r::RunWriter startRunFile(const std::string& path) {
  r::RunHeader header;
  header.runId = "seed1";
  header.kind = "distill";
  header.configJson = R"({"steps": 50})";
  header.layout.scalars = {"loss"};
  auto writer = r::RunWriter::create(path, header);
  writer.appendScalar(7, "loss", 1.0);
  writer.flush();
  return writer;
}

}  // namespace

class TestExperimentStatus : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void initTestCase() { setenv("HH_NUM_THREADS", "1", 0); }

  void eachVariantsStateFromItsFolder() {
    hh::test::TempDir dir("experiment_status");
    const auto config = j::experimentConfigFromJson(fourVariants(dir));
    j::JobObserver quiet;
    j::ExperimentOptions only;
    only.only = {"hedgehog"};
    QVERIFY(j::runExperiment(config, quiet, only).status == j::JobStatus::Completed);
    hh::test::CancelAtStep cancel;
    cancel.at = 2;
    only.only = {"t2r"};
    QVERIFY(j::runExperiment(config, cancel, only).status == j::JobStatus::Cancelled);

    std::filesystem::create_directories(dir.file("exp/seed1"));
    {
      auto writer = startRunFile(dir.file("exp/seed1/run.h5"));
      const auto states = j::variantStates(config);
      QCOMPARE(states.size(), size_t(4));
      QCOMPARE(states[0].name, std::string("hedgehog"));  // in the config's order
      QCOMPARE(stateOf(states, "hedgehog").state, std::string("completed"));
      QVERIFY(stateOf(states, "hedgehog").seconds > 0);
      QCOMPARE(stateOf(states, "t2r").state, std::string("cancelled"));
      QVERIFY2(stateOf(states, "t2r").message.find("cancelled") != std::string::npos,
               stateOf(states, "t2r").message.c_str());
      const auto& running = stateOf(states, "seed1");
      QCOMPARE(running.state, std::string("running"));
      QCOMPARE(running.step, int64_t(7));
      QCOMPARE(running.totalSteps, int64_t(50));
      QCOMPARE(running.kind, std::string("distill"));
      QCOMPARE(running.runFile, dir.file("exp/seed1/run.h5"));
      QCOMPARE(stateOf(states, "seed2").state, std::string("not started"));
      QVERIFY(stateOf(states, "seed2").runFile.empty());
      // Its log ends in a pause: "paused" at that step; once resumed, running again.
      writer.log("paused at step 7", 7);
      writer.flush();
      const auto paused = stateOf(j::variantStates(config), "seed1");
      QCOMPARE(paused.state, std::string("paused"));
      QCOMPARE(paused.step, int64_t(7));
      QVERIFY2(paused.message.find("SIGUSR2") != std::string::npos, paused.message.c_str());
      writer.log("resumed at step 7 after 3.0 s", 7);
      writer.flush();
      QCOMPARE(stateOf(j::variantStates(config), "seed1").state, std::string("running"));
    }
    // The writer gone without an end, as a killed job leaves its file.
    const auto interrupted = stateOf(j::variantStates(config), "seed1");  // a copy: the list is a temporary
    QCOMPARE(interrupted.state, std::string("interrupted"));
    QCOMPARE(interrupted.step, int64_t(7));
    QVERIFY2(interrupted.message.find("--resume") != std::string::npos, interrupted.message.c_str());

    // Hedgehog's config changed since its run: its record and files are of the earlier one.
    json changed = fourVariants(dir);
    changed["variants"][0]["set"]["lr"] = 0.5;
    const auto stale = stateOf(j::variantStates(j::experimentConfigFromJson(changed)), "hedgehog");
    QCOMPARE(stale.state, std::string("not started"));
    QVERIFY2(stale.message.find("earlier config") != std::string::npos, stale.message.c_str());
  }
};

HH_TEST_SUITE(TestExperimentStatus, "engine.jobs.experiment_status", &TestExperimentStatus::initTestCase,
              &TestExperimentStatus::eachVariantsStateFromItsFolder)

}  // namespace test_experiment_status

#if HH_HAVE_QTEST
#include "test_experiment_status.moc"
#endif
