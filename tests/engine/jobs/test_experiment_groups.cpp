// engine.jobs.experiment_groups: an experiment's "repeats" and the spreads over them.
//   - each declared variant runs once per repeat, as "<variant>.<repeat>", with the repeat's patch
//     applied after the variant's (it overrides the variant's keys, and its null deletes one the
//     variant set); toJson gives back the declared form; bad repeats are refused, naming them;
//   - variantGroups: per declared variant, the mean, sample sd, min, max and n of each metric over
//     its completed repeats (a failed repeat listed, not counted; a NaN not counted; sd NaN for one
//     value), in summary.json's "groups" and summary_groups.csv, to the digit;
//   - "baseline": each other variant minus the baseline, paired by repeat (paired_comparison.h),
//     over the repeats both completed with finite values, in "against_baseline" and the CSV's
//     diff columns, to the digit; a baseline that is no variant, or without repeats, refused;
//   - the tiny distillation experiment with two data seeds writes those groups, the two seeds'
//     runs differing (the repeat's patch reaches the job).
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "engine/jobs/experiment_groups.h"
#include "engine/jobs/experiment_job.h"
#include "tests/engine/jobs/experiment_test_support.h"
#include "tests/support/hh_test.h"
#include "tests/support/temp_dir.h"

namespace test_experiment_groups {

namespace {

namespace j = hh::jobs;
using hh::test::tinyExperiment;
using nlohmann::json;

// The tiny experiment with repeats s1 and s2 (data seeds 1 and 2).
json withSeeds(const hh::test::TempDir& dir) {
  json e = tinyExperiment(dir);
  e["repeats"] = json::array(
      {{{"name", "s1"}, {"set", {{"data", {{"seed", 1}}}}}}, {{"name", "s2"}, {"set", {{"data", {{"seed", 2}}}}}}});
  return e;
}

j::VariantResult result(const std::string& name, j::JobStatus status, std::map<std::string, double> metrics) {
  j::VariantResult v;
  v.name = name;
  v.status = status;
  v.metrics = std::move(metrics);
  return v;
}

}  // namespace

class TestExperimentGroups : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void initTestCase() { setenv("HH_NUM_THREADS", "1", 0); }

  void repeatsMultiplyTheVariants() {
    hh::test::TempDir dir("experiment_repeats");
    json e = withSeeds(dir);
    e["variants"][1]["set"]["lr"] = 0.02;
    e["variants"][1]["set"]["snapshot_every"] = 2;
    e["repeats"][1]["set"]["lr"] = 0.03;                 // overrides the variant's
    e["repeats"][1]["set"]["snapshot_every"] = nullptr;  // deletes the variant's (and the base's)
    const auto c = j::experimentConfigFromJson(e);
    std::vector<std::string> names;
    for (const auto& v : c.variants) names.push_back(v.name + "<" + v.group);
    QCOMPARE(names,
             (std::vector<std::string>{"hedgehog.s1<hedgehog", "hedgehog.s2<hedgehog", "t2r.s1<t2r", "t2r.s2<t2r"}));
    const json t2r1 = j::variantConfig(c, "t2r.s1"), t2r2 = j::variantConfig(c, "t2r.s2");
    QCOMPARE(t2r1["feature_map"].get<std::string>(), std::string("t2r"));
    QCOMPARE(t2r1["data"]["seed"].get<int>(), 1);
    QCOMPARE(t2r1["data"]["corpus"], e["base"]["data"]["corpus"]);  // merged inside "data"
    QCOMPARE(t2r1["lr"].get<double>(), 0.02);
    QCOMPARE(t2r1["snapshot_every"].get<int>(), 2);
    QCOMPARE(t2r2["data"]["seed"].get<int>(), 2);
    QCOMPARE(t2r2["lr"].get<double>(), 0.03);
    QVERIFY(!t2r2.contains("snapshot_every"));
    QCOMPARE(t2r2["run_dir"].get<std::string>(), (std::filesystem::path(dir.file("exp")) / "t2r.s2").string());
    HH_VERIFY_THROWS_WITH(j::variantConfig(c, "t2r"), "no variant named \"t2r\"");

    // toJson gives the declared form back, and it parses to the same runs.
    const json back = j::toJson(c);
    QCOMPARE(back["variants"].size(), size_t(2));
    QCOMPARE(back["repeats"], e["repeats"]);
    const auto again = j::experimentConfigFromJson(back);
    QCOMPARE(again.variants.size(), c.variants.size());
    for (const auto& v : c.variants) QCOMPARE(j::variantConfig(again, v.name), j::variantConfig(c, v.name));
  }

  void badRepeatsAreRefused() {
    hh::test::TempDir dir("experiment_bad_repeats");
    const json good = withSeeds(dir);
    auto refused = [&](auto edit, const char* needle) {
      json bad = good;
      edit(bad);
      const std::string mismatch = hh::test::refusalMismatch(bad, needle);
      if (!mismatch.empty()) qInfo("%s", mismatch.c_str());
      return mismatch.empty();
    };
    QVERIFY(refused([](json& e) { e["repeats"] = json::array(); }, "\"repeats\" must be a non-empty array"));
    QVERIFY(refused([](json& e) { e["repeats"] = json::object(); }, "\"repeats\" must be a non-empty array"));
    QVERIFY(refused([](json& e) { e["repeats"][1]["name"] = "s1"; }, "two repeats are named \"s1\""));
    QVERIFY(refused([](json& e) { e["repeats"][0]["name"] = "a/b"; }, "repeat name \"a/b\" must be a folder name"));
    QVERIFY(refused([](json& e) { e["repeats"][0]["set"]["run_dir"] = "x"; }, "repeat \"s1\" must not set run_dir"));
    QVERIFY(refused([](json& e) { e["repeats"][0]["seed"] = 3; }, "unknown key \"seed\""));
    QVERIFY(refused([](json& e) { e["repeats"][0]["set"]["stepz"] = 3; },
                    "variant \"hedgehog.s1\": distill config: unknown key \"stepz\""));
    QVERIFY(refused([](json& e) { e["baseline"] = "softmax"; },
                    "\"baseline\" is \"softmax\", which is not a variant (hedgehog, t2r)"));
    QVERIFY(refused([](json& e) { e["baseline"] = 3; }, "\"baseline\""));
    QVERIFY(refused(
        [](json& e) {
          e.erase("repeats");
          e["baseline"] = "hedgehog";
        },
        "\"baseline\" compares variants repeat by repeat, so it needs \"repeats\""));
    // "a.b" repeated as "c" and "a" repeated as "b.c" would share a folder.
    QVERIFY(refused(
        [](json& e) {
          e["variants"][0]["name"] = "a";
          e["variants"][1]["name"] = "a.b";
          e["repeats"][0]["name"] = "c";
          e["repeats"][1]["name"] = "b.c";
        },
        "which another pair gives too"));
  }

  void spreadsAreTheRepeatsStatistics() {
    hh::test::TempDir dir("experiment_spreads");
    const auto c = j::experimentConfigFromJson(withSeeds(dir));
    const double nan = std::nan("");
    const std::vector<j::VariantResult> runs{
        result("hedgehog.s1", j::JobStatus::Completed, {{"kl", 1.0}, {"ppl", 10.0}}),
        result("hedgehog.s2", j::JobStatus::Completed, {{"kl", 3.0}, {"ppl", nan}}),
        result("t2r.s1", j::JobStatus::Failed, {{"kl", 100.0}}),
        result("t2r.s2", j::JobStatus::Completed, {{"kl", 0.5}}),
    };
    const auto groups = j::variantGroups(c, runs);
    QCOMPARE(groups.size(), size_t(2));
    const auto& hedgehog = groups[0];
    QCOMPARE(hedgehog.name, std::string("hedgehog"));
    QCOMPARE(hedgehog.runs, (std::vector<std::string>{"hedgehog.s1", "hedgehog.s2"}));
    QCOMPARE(hedgehog.completed, 2);
    QCOMPARE(hedgehog.metrics.at("kl").n, 2);
    QCOMPARE(hedgehog.metrics.at("kl").mean, 2.0);
    QCOMPARE(hedgehog.metrics.at("kl").sd, std::sqrt(2.0));  // (1 + 1) / (2 - 1)
    QCOMPARE(hedgehog.metrics.at("kl").min, 1.0);
    QCOMPARE(hedgehog.metrics.at("kl").max, 3.0);
    QCOMPARE(hedgehog.metrics.at("ppl").n, 1);  // the NaN is not a value
    QVERIFY(std::isnan(hedgehog.metrics.at("ppl").sd));
    const auto& t2r = groups[1];
    QCOMPARE(t2r.runs.size(), size_t(2));
    QCOMPARE(t2r.completed, 1);  // the failed repeat is listed, not counted
    QCOMPARE(t2r.metrics.at("kl").mean, 0.5);

    const json js = j::groupsJson(groups);
    QCOMPARE(js[0]["metrics"]["kl"]["sd"].get<double>(), std::sqrt(2.0));
    QCOMPARE(js[0]["metrics"]["ppl"]["sd"].get<std::string>(), std::string("nan"));
    QCOMPARE(j::groupsCsv(groups),
             std::string("group,runs,completed,kl:mean,kl:sd,kl:min,kl:max,kl:n,ppl:mean,ppl:sd,ppl:min,ppl:max,ppl:n\n"
                         "hedgehog,2,2,2,1.41421356,1,3,2,10,nan,10,10,1\n"
                         "t2r,2,1,0.5,nan,0.5,0.5,1,,,,,0\n"));
    // Without repeats there are no groups.
    QVERIFY(j::variantGroups(j::experimentConfigFromJson(tinyExperiment(dir)), runs).empty());
  }

  void aBaselineComparesRepeatByRepeat() {
    hh::test::TempDir dir("experiment_baseline");
    json e = withSeeds(dir);
    e["baseline"] = "hedgehog";
    const auto c = j::experimentConfigFromJson(e);
    QCOMPARE(j::toJson(c)["baseline"].get<std::string>(), std::string("hedgehog"));
    const double nan = std::nan("");
    std::vector<j::VariantResult> runs{
        result("hedgehog.s1", j::JobStatus::Completed, {{"kl", 1.0}, {"ppl", 10.0}}),
        result("hedgehog.s2", j::JobStatus::Completed, {{"kl", 3.0}, {"ppl", nan}}),
        result("t2r.s1", j::JobStatus::Completed, {{"kl", 0.5}, {"ppl", 12.0}}),
        result("t2r.s2", j::JobStatus::Completed, {{"kl", 2.0}, {"ppl", 11.0}}),
    };
    auto groups = j::variantGroups(c, runs);
    QCOMPARE(groups.size(), size_t(2));
    QVERIFY(groups[0].baseline.empty() && groups[0].againstBaseline.empty());  // the baseline itself
    QCOMPARE(groups[1].baseline, std::string("hedgehog"));
    // kl: differences -0.5 and -1: mean -0.75, sd sqrt(1/8), t -3, p (1 degree) 1 - 2 atan(3) / pi.
    const auto& kl = groups[1].againstBaseline.at("kl");
    QCOMPARE(kl.n, 2);
    QCOMPARE(kl.mean, -0.75);
    QCOMPARE(kl.sd, std::sqrt(0.125));
    QVERIFY(std::fabs(kl.t + 3) < 1e-12);
    QVERIFY(std::fabs(kl.p - (1 - 2 * std::atan(3.0) / std::acos(-1.0))) < 1e-12);
    QCOMPARE(kl.lower, 2);
    const auto& ppl = groups[1].againstBaseline.at("ppl");  // the baseline's NaN leaves one pair
    QCOMPARE(ppl.n, 1);
    QCOMPARE(ppl.mean, 2.0);
    QCOMPARE(ppl.higher, 1);

    const json js = j::groupsJson(groups);
    QVERIFY(!js[0].contains("against_baseline"));
    const auto& paired = js[1]["against_baseline"];
    QCOMPARE(paired["baseline"].get<std::string>(), std::string("hedgehog"));
    QCOMPARE(paired["metrics"]["kl"]["diff_mean"].get<double>(), -0.75);
    QCOMPARE(paired["metrics"]["kl"]["lower"].get<int>(), 2);
    QCOMPARE(paired["metrics"]["ppl"]["p"].get<std::string>(), std::string("nan"));
    QCOMPARE(j::groupsCsv(groups),
             std::string("group,runs,completed,"
                         "kl:mean,kl:sd,kl:min,kl:max,kl:n,kl:diff_mean,kl:diff_sd,kl:p,kl:lower,kl:higher,kl:pairs,"
                         "ppl:mean,ppl:sd,ppl:min,ppl:max,ppl:n,ppl:diff_mean,ppl:diff_sd,ppl:p,ppl:lower,ppl:higher,"
                         "ppl:pairs\n"
                         "hedgehog,2,2,2,1.41421356,1,3,2,,,,,,0,10,nan,10,10,1,,,,,,0\n"
                         "t2r,2,2,1.25,1.06066017,0.5,2,2,-0.75,0.353553391,0.204832765,2,0,2,"
                         "11.5,0.707106781,11,12,2,2,nan,nan,0,1,1\n"));

    // A failed repeat pairs with nothing: one kl pair left.
    runs[2].status = j::JobStatus::Failed;
    groups = j::variantGroups(c, runs);
    QCOMPARE(groups[1].againstBaseline.at("kl").n, 1);
    QCOMPARE(groups[1].againstBaseline.at("kl").mean, -1.0);
  }

  void anExperimentWithRepeatsSummarisesThem() {
    hh::test::TempDir dir("experiment_repeats_run");
    const auto c = j::experimentConfigFromJson(withSeeds(dir));
    j::JobObserver quiet;
    const auto r = j::runExperiment(c, quiet);
    QVERIFY2(r.status == j::JobStatus::Completed, r.message.c_str());
    QCOMPARE(r.variants.size(), size_t(4));
    // The seeds reach the job: another split and batch order, another loss.
    QVERIFY(r.variants[0].metrics.at("val_loss") != r.variants[1].metrics.at("val_loss"));
    const auto summary = json::parse(std::ifstream(r.summaryJson));
    QVERIFY(summary.contains("groups"));
    QCOMPARE(summary["groups"].size(), size_t(2));
    const auto& g = summary["groups"][1];
    QCOMPARE(g["name"].get<std::string>(), std::string("t2r"));
    QCOMPARE(g["completed"].get<int>(), 2);
    const double a = r.variants[2].metrics.at("kl_mean"), b = r.variants[3].metrics.at("kl_mean");
    QCOMPARE(g["metrics"]["kl_mean"]["mean"].get<double>(), (a + b) / 2);
    QCOMPARE(g["metrics"]["kl_mean"]["min"].get<double>(), std::min(a, b));
    std::ifstream csv(std::filesystem::path(r.summaryJson).parent_path() / "summary_groups.csv");
    std::string header, hedgehog, t2r;
    std::getline(csv, header);
    std::getline(csv, hedgehog);
    std::getline(csv, t2r);
    QVERIFY2(
        header.rfind("group,runs,completed,", 0) == 0 && header.find(",kl_mean:mean,kl_mean:sd,") != std::string::npos,
        header.c_str());
    QVERIFY(hedgehog.rfind("hedgehog,2,2,", 0) == 0 && t2r.rfind("t2r,2,2,", 0) == 0);
  }
};

HH_TEST_SUITE(TestExperimentGroups, "engine.jobs.experiment_groups", &TestExperimentGroups::initTestCase,
              &TestExperimentGroups::repeatsMultiplyTheVariants, &TestExperimentGroups::badRepeatsAreRefused,
              &TestExperimentGroups::spreadsAreTheRepeatsStatistics,
              &TestExperimentGroups::aBaselineComparesRepeatByRepeat,
              &TestExperimentGroups::anExperimentWithRepeatsSummarisesThem)

}  // namespace test_experiment_groups

#if HH_HAVE_QTEST
#include "test_experiment_groups.moc"
#endif
