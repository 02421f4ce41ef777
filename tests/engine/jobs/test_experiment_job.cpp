// engine.jobs.experiment: the experiment runner over distillation variants of the tiny GPT-2
// fixture (a few steps each).
//   - config errors name the key or the variant (unknown job, duplicate / unsafe names, run_dir
//     in the base, a variant whose merged config the job refuses);
//   - variant configs are RFC 7396 merge patches over the base (objects merge, null deletes);
//   - a run writes every variant's run file, variant.json and a summary (JSON and a CSV with
//     one row per variant and the final scalars as columns, equal to the run files' last rows),
//     the summary also after each variant (the second starts with the first one listed);
//   - a second run reuses completed variants (no new run file), --force and --only run again,
//     a changed config runs that variant again;
//   - a failing variant is recorded and the next one still runs; a cancel starts no other
//     variant, and the summary keeps those completed earlier;
//   - --resume runs a convert variant afresh (convert has no resume);
//   - resume continues a cancelled variant from its checkpoint (a continuation run file; the
//     summary's numbers are the continuation's) and starts one without a checkpoint afresh;
//     with --force it runs the variant --force picks again, from its start;
//   - pendingVariants lists what would run and refuses an unknown --only name; summaryOnly runs
//     nothing and lists what was recorded, failed variants included, and a variant whose child
//     process left no record (killed) as failed with the child's reason
//     (the CLI's `experiment --jobs N` is app.cli.variant_processes).
#include <algorithm>
#include <filesystem>
#include <fstream>

#include "engine/config/convert_config.h"
#include "engine/jobs/experiment_job.h"
#include "engine/runs/run_chain.h"
#include "engine/runs/run_reader.h"
#include "tests/engine/jobs/experiment_test_support.h"
#include "tests/engine/jobs/jobs_test_support.h"
#include "tests/support/hh_test.h"
#include "tests/support/temp_dir.h"

namespace test_experiment_job {

namespace {

namespace j = hh::jobs;
namespace fs = std::filesystem;
using nlohmann::json;
using hh::test::CancelAtStep;
using hh::test::tinyExperiment;

// At each run file's start, the variants summary.json lists (none when there is no summary yet).
struct SummaryAtEachStart : j::JobObserver {
  explicit SummaryAtEachStart(std::string path) : path(std::move(path)) {}
  void started(const std::string&, int64_t) override {
    std::vector<std::string> names;
    if (std::ifstream in(path); in) {
      const json summary = json::parse(in);  // kept: a loop over a temporary's member would outlive it
      for (const auto& v : summary.at("variants")) names.push_back(v.at("name").get<std::string>());
    }
    listed.push_back(names);
  }
  std::string path;
  std::vector<std::vector<std::string>> listed;
};

struct Cancelling : j::JobObserver {
  int logs = 0, cancelAfterLogs = -1;
  void log(const std::string&) override { ++logs; }
  bool cancelled() override { return cancelAfterLogs >= 0 && logs >= cancelAfterLogs; }
};

std::filesystem::file_time_type mtime(const std::string& path) { return fs::last_write_time(path); }

}  // namespace

class TestExperimentJob : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void initTestCase() { setenv("HH_NUM_THREADS", "1", 0); }

  void configErrorsNameTheProblem() {
    hh::test::TempDir dir("experiment_errors");
    const json good = tinyExperiment(dir);
    auto fails = [&](auto edit, const char* needle) {
      json bad = good;
      edit(bad);
      const std::string mismatch = hh::test::refusalMismatch(bad, needle);
      if (!mismatch.empty()) qInfo("%s", mismatch.c_str());
      return mismatch.empty();
    };
    QVERIFY(fails([](json& e) { e["job"] = "bake"; }, "\"job\" must be"));
    QVERIFY(fails([](json& e) { e["colour"] = 1; }, "unknown key \"colour\""));
    QVERIFY(fails([](json& e) { e.erase("run_dir"); }, "run_dir"));
    QVERIFY(fails([](json& e) { e["base"]["run_dir"] = "x"; }, "must not set run_dir"));
    QVERIFY(fails([](json& e) { e["variants"][1]["name"] = "hedgehog"; }, "two variants are named \"hedgehog\""));
    QVERIFY(fails([](json& e) { e["variants"][1]["name"] = "../up"; }, "must be a folder name"));
    QVERIFY(fails([](json& e) { e["variants"] = json::array(); }, "non-empty"));
    QVERIFY(fails([](json& e) { e["variants"][1]["set"]["stepz"] = 3; }, "variant \"t2r\": distill config: unknown key \"stepz\""));
    QVERIFY(fails([](json& e) { e["variants"][0]["set"]["lr"] = "fast"; }, "variant \"hedgehog\""));
  }

  void variantsAreMergePatches() {
    hh::test::TempDir dir("experiment_merge");
    json e = tinyExperiment(dir);
    e["variants"].push_back({{"name", "no_data_seed"}, {"set", {{"data", {{"sequence_length", 16}}}, {"patience", nullptr}}}});
    const auto c = j::experimentConfigFromJson(e);
    const json merged = j::variantConfig(c, "no_data_seed");
    QCOMPARE(merged["data"]["sequence_length"].get<int>(), 16);                    // replaced inside the object
    QCOMPARE(merged["data"]["corpus"], e["base"]["data"]["corpus"]);               // kept beside it
    QVERIFY(!merged.contains("patience"));                                         // null deletes
    QCOMPARE(merged["run_dir"].get<std::string>(), (fs::path(dir.file("exp")) / "no_data_seed").string());
    QCOMPARE(j::variantConfig(c, "t2r")["feature_map"].get<std::string>(), std::string("t2r"));
    HH_VERIFY_THROWS_WITH(j::variantConfig(c, "nope"), "no variant named");
  }

  void runsSummarizesAndReuses() {
    hh::test::TempDir dir("experiment_run");
    const auto c = j::experimentConfigFromJson(tinyExperiment(dir));
    SummaryAtEachStart watching(dir.file("exp/summary.json"));
    const auto r = j::runExperiment(c, watching);
    // The summary as it stood when each variant started: none, then the first variant's.
    QVERIFY(watching.listed == (std::vector<std::vector<std::string>>{{}, {"hedgehog"}}));
    j::JobObserver quiet;
    QVERIFY2(r.status == j::JobStatus::Completed, r.message.c_str());
    QCOMPARE(r.variants.size(), size_t(2));
    for (const auto& v : r.variants) {
      QVERIFY(v.status == j::JobStatus::Completed && !v.reused && v.seconds > 0);
      // The summary's numbers are the run file's last rows.
      const auto run = hh::runs::RunReader::open(v.runDir + "/run.h5");
      QCOMPARE(v.metrics.at("kl_mean"), run.scalars("kl_mean").values.back());
      QCOMPARE(v.metrics.at("loss"), run.scalars("loss").values.back());
    }
    QVERIFY(r.variants[0].metrics.at("kl_mean") != r.variants[1].metrics.at("kl_mean"));
    // summary.json and summary.csv agree with the result.
    const auto summary = json::parse(std::ifstream(r.summaryJson));
    QCOMPARE(summary["variants"][1]["name"].get<std::string>(), std::string("t2r"));
    QCOMPARE(summary["variants"][1]["metrics"]["kl_mean"].get<double>(), r.variants[1].metrics.at("kl_mean"));
    std::ifstream csv(r.summaryCsv);
    std::string headerLine, row1, row2, extra;
    std::getline(csv, headerLine);
    std::getline(csv, row1);
    std::getline(csv, row2);
    QVERIFY(!std::getline(csv, extra));
    QVERIFY(headerLine.rfind("variant,status,seconds,reused,", 0) == 0);
    QVERIFY(headerLine.find(",kl_mean,") != std::string::npos);
    QVERIFY(row1.rfind("hedgehog,completed,", 0) == 0 && row2.rfind("t2r,completed,", 0) == 0);

    // Again: both reused, nothing rewritten.
    const auto before = mtime(r.variants[1].runDir + "/run.h5");
    const auto again = j::runExperiment(c, quiet);
    QVERIFY(again.variants[0].reused && again.variants[1].reused);
    QCOMPARE(again.variants[1].seconds, r.variants[1].seconds);
    QCOMPARE(again.variants[1].metrics, r.variants[1].metrics);
    QVERIFY(mtime(r.variants[1].runDir + "/run.h5") == before);
    // --only with --force: that one again, the other reused.
    j::ExperimentOptions options;
    options.only = {"t2r"};
    options.force = true;
    const auto forced = j::runExperiment(c, quiet, options);
    QVERIFY(forced.variants[0].reused && !forced.variants[1].reused);
    QVERIFY(mtime(r.variants[1].runDir + "/run.h5") != before);
    // A changed config runs the variant again.
    json changed = tinyExperiment(dir);
    changed["variants"][0]["set"]["lr"] = 0.02;
    const auto rerun = j::runExperiment(j::experimentConfigFromJson(changed), quiet);
    QVERIFY(!rerun.variants[0].reused && rerun.variants[1].reused);
    options.only = {"nope"};
    HH_VERIFY_THROWS_WITH(j::runExperiment(c, quiet, options), "no variant named");
  }

  void failureIsRecordedAndCancelStops() {
    hh::test::TempDir dir("experiment_fail");
    json e = tinyExperiment(dir);
    e["variants"][0]["set"]["debug_nan_at_step"] = 1;
    const auto c = j::experimentConfigFromJson(e);
    j::JobObserver quiet;
    const auto r = j::runExperiment(c, quiet);
    QVERIFY(r.status == j::JobStatus::Failed);
    QVERIFY(r.variants[0].status == j::JobStatus::Failed);
    QVERIFY2(r.variants[0].message.find("NaN") != std::string::npos, r.variants[0].message.c_str());
    QVERIFY(r.variants[1].status == j::JobStatus::Completed);  // the next one still ran
    // A failed variant is not reused.
    const auto again = j::runExperiment(c, quiet);
    QVERIFY(!again.variants[0].reused && again.variants[1].reused);

    // A cancel starts no other variant, and the summary keeps those completed earlier.
    hh::test::TempDir dir2("experiment_cancel");
    json three = tinyExperiment(dir2);
    three["variants"].push_back({{"name", "elu"}, {"set", {{"feature_map", "elu"}}}});
    const auto c2 = j::experimentConfigFromJson(three);
    j::ExperimentOptions onlyT2r;
    onlyT2r.only = {"t2r"};
    QVERIFY(j::runExperiment(c2, quiet, onlyT2r).status == j::JobStatus::Completed);
    Cancelling cancelling;
    cancelling.cancelAfterLogs = 3;  // during the first variant
    const auto cancelled = j::runExperiment(c2, cancelling);
    QVERIFY(cancelled.status == j::JobStatus::Cancelled);
    QCOMPARE(cancelled.variants.size(), size_t(2));
    QVERIFY(cancelled.variants[0].status == j::JobStatus::Cancelled);
    QVERIFY(cancelled.variants[1].name == "t2r" && cancelled.variants[1].reused);
    QVERIFY(!fs::exists(dir2.file("exp") + "/elu"));
    const auto summary = json::parse(std::ifstream(cancelled.summaryJson));
    QCOMPARE(summary["variants"].size(), size_t(2));
    QCOMPARE(summary["variants"][1]["status"].get<std::string>(), std::string("completed"));
  }

  // --resume asks nothing of a convert variant (its job has no resume): it runs afresh.
  void resumeRunsAConvertVariantAfresh() {
    hh::test::TempDir dir("experiment_convert");
    auto convert = hh::test::tinyConvertConfig(dir);
    convert.distill.steps = 2;
    convert.finetune.steps = 0;
    convert.evaluate.featureMaps = {"hedgehog"};
    json base = j::toJson(convert);
    base.erase("run_dir");
    const json e = {{"name", "convert"},
                    {"job", "convert"},
                    {"run_dir", dir.file("exp")},
                    {"base", base},
                    {"variants", json::array({{{"name", "a"}, {"set", json::object()}}})}};
    j::ExperimentOptions resume;
    resume.resume = true;
    j::JobObserver quiet;
    const auto r = j::runExperiment(j::experimentConfigFromJson(e), quiet, resume);
    QVERIFY2(r.status == j::JobStatus::Completed,
             r.variants.empty() ? r.message.c_str() : r.variants[0].message.c_str());
  }

  void resumeContinuesAnInterruptedVariant() {
    hh::test::TempDir dir("experiment_resume");
    const auto c = j::experimentConfigFromJson(tinyExperiment(dir));  // 4 steps of distillation
    CancelAtStep cancel;
    cancel.at = 3;
    QVERIFY(j::runExperiment(c, cancel).status == j::JobStatus::Cancelled);
    const std::string first = dir.file("exp") + "/hedgehog";
    QVERIFY(fs::exists(first + "/checkpoint.safetensors"));
    QCOMPARE(hh::runs::RunReader::open(first + "/run.h5").scalars("loss").steps.back(), int64_t(3));
    j::ExperimentOptions resume;
    resume.resume = true;
    j::JobObserver quiet;
    const auto r = j::runExperiment(c, quiet, resume);
    QVERIFY2(r.status == j::JobStatus::Completed, r.message.c_str());
    // A cancel saves a checkpoint at the step it stopped at; the continuation starts after it and
    // the summary reads the whole chain.
    const auto continuation = hh::runs::RunReader::open(first + "/run-resumed-3.h5");
    QCOMPARE(continuation.scalars("loss").steps, (std::vector<int64_t>{4}));
    QCOMPARE(r.variants[0].metrics.at("loss"), continuation.scalars("loss").values.back());
    QCOMPARE(hh::runs::chainedScalars(hh::runs::runChain(first), "loss").steps, (std::vector<int64_t>{1, 2, 3, 4}));
    // The other variant had no checkpoint: it ran from the start. Both are now reused as done.
    QVERIFY(!fs::exists(dir.file("exp") + "/t2r/run-resumed-0.h5"));
    QCOMPARE(hh::runs::RunReader::open(dir.file("exp") + "/t2r/run.h5").scalars("loss").steps.front(), int64_t(1));
    QVERIFY(j::pendingVariants(c).empty());
    // --force with --resume runs the variant it picks again, from its start: not "nothing to resume".
    resume.force = true;
    resume.only = {"t2r"};
    const auto forced = j::runExperiment(c, quiet, resume);
    QVERIFY2(forced.status == j::JobStatus::Completed, forced.message.c_str());
    const auto again = hh::runs::RunReader::open(dir.file("exp") + "/t2r/run.h5");
    QCOMPARE(again.scalars("loss").steps, (std::vector<int64_t>{1, 2, 3, 4}));
    for (const auto& v : forced.variants)
      QVERIFY2(v.message.find("nothing to resume") == std::string::npos, v.message.c_str());
  }

  void pendingAndSummaryOnly() {
    hh::test::TempDir dir("experiment_pending");
    const auto c = j::experimentConfigFromJson(tinyExperiment(dir));
    QCOMPARE(j::pendingVariants(c), (std::vector<std::string>{"hedgehog", "t2r"}));
    j::ExperimentOptions summaryOnly;
    summaryOnly.summaryOnly = true;
    j::JobObserver quiet;
    QCOMPARE(j::runExperiment(c, quiet, summaryOnly).variants.size(), size_t(0));
    QVERIFY(!fs::exists(dir.file("exp") + "/hedgehog/run.h5"));
    j::ExperimentOptions only;
    only.only = {"t2r"};
    j::runExperiment(c, quiet, only);
    QCOMPARE(j::pendingVariants(c), (std::vector<std::string>{"hedgehog"}));
    only.force = true;
    QCOMPARE(j::pendingVariants(c, only), (std::vector<std::string>{"t2r"}));
    const auto summary = j::runExperiment(c, quiet, summaryOnly);
    QCOMPARE(summary.variants.size(), size_t(1));
    QVERIFY(summary.variants[0].reused && summary.variants[0].name == "t2r");
    // What another process recorded as failed is listed too (experiment --jobs N summarises so).
    json failing = tinyExperiment(dir);
    failing["variants"][0]["set"]["debug_nan_at_step"] = 1;
    const auto cf = j::experimentConfigFromJson(failing);
    j::ExperimentOptions onlyFirst;
    onlyFirst.only = {"hedgehog"};
    QVERIFY(j::runExperiment(cf, quiet, onlyFirst).status == j::JobStatus::Failed);
    const auto withFailure = j::runExperiment(cf, quiet, summaryOnly);
    QCOMPARE(withFailure.variants.size(), size_t(2));
    QVERIFY(withFailure.variants[0].status == j::JobStatus::Failed);
    QVERIFY(withFailure.status == j::JobStatus::Failed);
    // An unknown --only name is refused before anything runs.
    onlyFirst.only = {"nope"};
    HH_VERIFY_THROWS_WITH(j::pendingVariants(c, onlyFirst), "no variant named");
  }

  // A child of `experiment --jobs` killed while its job ran (kill -9, the OOM killer) left no
  // record: the summary lists its variant as failed with the child's reason, and the experiment
  // failed (it was left out, and the experiment "completed").
  void childWithoutRecordIsFailed() {
    hh::test::TempDir dir("experiment_child_killed");
    const auto c = j::experimentConfigFromJson(tinyExperiment(dir));
    j::ExperimentOptions options;
    options.summaryOnly = true;
    options.ranInChildren = {"hedgehog"};
    options.childFailures = {{"hedgehog", "killed by signal 9"}};
    j::JobObserver quiet;
    const auto r = j::runExperiment(c, quiet, options);
    QCOMPARE(r.variants.size(), size_t(1));
    QCOMPARE(r.variants[0].name, std::string("hedgehog"));
    QVERIFY(r.variants[0].status == j::JobStatus::Failed);
    QCOMPARE(r.variants[0].message, std::string("killed by signal 9"));
    QVERIFY(r.status == j::JobStatus::Failed);
    QVERIFY2(r.message.find("1 failed") != std::string::npos, r.message.c_str());
  }
};

HH_TEST_SUITE(TestExperimentJob, "engine.jobs.experiment", &TestExperimentJob::initTestCase,
              &TestExperimentJob::configErrorsNameTheProblem, &TestExperimentJob::variantsAreMergePatches,
              &TestExperimentJob::runsSummarizesAndReuses, &TestExperimentJob::failureIsRecordedAndCancelStops,
              &TestExperimentJob::resumeContinuesAnInterruptedVariant,
              &TestExperimentJob::resumeRunsAConvertVariantAfresh, &TestExperimentJob::pendingAndSummaryOnly,
              &TestExperimentJob::childWithoutRecordIsFailed)

}  // namespace test_experiment_job

#if HH_HAVE_QTEST
#include "test_experiment_job.moc"
#endif
