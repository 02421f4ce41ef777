// engine.jobs.rank: the layer-difficulty ranking (engine/jobs/rank_job.h) on the tiny GPT-2
// fixture with a corpus the test writes:
//   - hardestFirst orders by score, largest first, ties by layer, a score that is not finite (a layer
//     that overflowed or diverged) first; proposePlan keeps the first k of that order as keep_as
//     and gives the others the attention, and refuses an order that is not one of the layers;
//   - layerMeans: a head that is not finite makes its layer's mean not finite;
//   - the job completes, its tables are [L, H] and finite, the layer score is the mean of the
//     layer's output errors, and the plan keeps exactly the `keep` hardest layers;
//   - the output error it reports for a layer equals one recomputed here from a fresh forward of
//     the distilled model (sum ||y_lin - y_soft||^2 / sum ||y_soft||^2, 1e-9 relative);
//   - rank.json reads back to the same ranking; a file that is not one is refused, and so is a
//     damaged one (hardest_first not a permutation of the layers, tables of other shapes);
//   - bad configs are refused before anything runs;
//   - the window mix calibration (distillation_loss.h) on the demo teacher: with hedgehog_window(16)
//     in every layer, the calibrated mix starts the attention far closer to softmax than the
//     uncalibrated 0.5 (mean KL measured 0.127 against 0.856 on two 128-token rows of the test's text).
#include <torch/types.h>

#include <cmath>
#include <fstream>
#include <limits>

#include "engine/jobs/attention_probe.h"
#include "engine/jobs/distillation_loss.h"
#include "engine/jobs/job_support.h"
#include "engine/jobs/rank_job.h"
#include "engine/models/model_io.h"
#include "engine/tokenizers/tokenizer.h"
#include "tests/engine/jobs/jobs_test_support.h"
#include "tests/support/hh_test.h"
#include "tests/support/temp_dir.h"

namespace test_rank_job {

namespace {

namespace j = hh::jobs;
namespace m = hh::models;
const std::string kModel = std::string(HH_FIXTURES_DIR) + "/tiny-random-gpt2";

j::RankConfig smallConfig(const hh::test::TempDir& dir) {
  j::RankConfig c;
  c.modelDir = kModel;
  c.runDir = dir.file("rank");
  c.steps = 4;
  c.batchSize = 4;
  c.lr = 0.05;
  c.probeRows = 3;
  c.keep = 2;
  c.data.corpus = hh::test::writeWordCorpus(dir);
  c.data.sequenceLength = 32;
  c.data.validationFraction = 0.25;
  return c;
}

// A ranking of 5 layers x 4 heads made by hand (no job run).
j::RankResult handMadeRanking() {
  j::RankResult r;
  r.outputError = {"output_error", 5, 4, std::vector<double>(20, 0.0)};
  r.kl = {"kl", 5, 4, std::vector<double>(20, 0.0)};
  for (size_t i = 0; i < 20; ++i) r.outputError.values[i] = 0.01 * double((i * 7) % 20), r.kl.values[i] = 0.1;
  r.layerScore = j::layerMeans(r.outputError);
  r.layerKl = j::layerMeans(r.kl);
  r.hardestFirst = j::hardestFirst(r.layerScore);
  r.plan = j::proposePlan(r.hardestFirst, 2, "softmax", "hedgehog");
  return r;
}

// The relative output error of `layer`'s heads, recomputed from the distilled adapters.
std::vector<double> recomputedOutputError(const j::RankConfig& c, const std::string& adapters, int64_t layer) {
  auto model = m::loadModel(c.modelDir);
  m::loadAdaptersFile(*model, adapters);
  const auto data = j::loadLmData(c.data, *hh::tok::loadTokenizer(c.modelDir), false);
  const auto rows = data.validation.narrow(0, 0, c.probeRows);
  m::CaptureRequest capture;
  capture.layers = {layer};
  capture.outputs = true;
  capture.softmaxWeights = capture.linearWeights = false;
  m::ForwardOptions options;
  options.capture = &capture;
  options.teacher = true;
  at::NoGradGuard noGrad;
  const auto out = model->forward(rows, options).captures.at(0);
  const auto soft = out.softmaxOutput.to(torch::kDouble), lin = out.linearOutput.to(torch::kDouble);  // [B,H,T,D]
  const auto perHead = (lin - soft).pow(2).sum(at::IntArrayRef{0, 2, 3}) / soft.pow(2).sum(at::IntArrayRef{0, 2, 3});
  return std::vector<double>(perHead.data_ptr<double>(), perHead.data_ptr<double>() + perHead.numel());
}

}  // namespace

class TestRankJob : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void initTestCase() { setenv("HH_NUM_THREADS", "1", 0); }

  void orderAndPlan() {
    const double nan = std::nan("");  // a layer that diverged: hardest
    QVERIFY((j::hardestFirst({0.1, 0.5, nan, 0.5, 0.3}) == std::vector<int64_t>{2, 1, 3, 4, 0}));
    QVERIFY((j::proposePlan({1, 3, 4, 0, 2}, 2, "softmax", "hedgehog") ==
             std::vector<std::string>{"hedgehog", "softmax", "hedgehog", "softmax", "hedgehog"}));
    QVERIFY((j::proposePlan({1, 0}, 0, "softmax", "t2r") == std::vector<std::string>{"t2r", "t2r"}));
    QVERIFY((j::proposePlan({1, 0}, 5, "hedgehog_window(8)", "t2r") ==
             std::vector<std::string>{"hedgehog_window(8)", "hedgehog_window(8)"}));
  }

  // A layer whose output error is not finite (its linear attention overflowed or diverged) ranks
  // hardest, so the plan keeps it: +Inf ranked as -Inf, easiest, and the plan converted it.
  void nonFiniteLayersRankHardest() {
    const double inf = std::numeric_limits<double>::infinity(), nan = std::nan("");
    QVERIFY((j::hardestFirst({0.1, inf, 0.5, nan, 0.7}) == std::vector<int64_t>{1, 3, 4, 2, 0}));
    QVERIFY((j::proposePlan(j::hardestFirst({0.2, inf, 0.1}), 1, "softmax", "hedgehog") ==
             std::vector<std::string>{"hedgehog", "softmax", "hedgehog"}));
    // The layer's mean keeps what its heads say: a head at +Inf (or NaN) is not skipped.
    const j::HeadTable table{"output_error", 3, 2, {0.1, 0.3, inf, 0.2, nan, 0.4}};
    const auto means = j::layerMeans(table);
    QVERIFY(std::abs(means[0] - 0.2) < 1e-15);
    QVERIFY(std::isinf(means[1]) && means[1] > 0);
    QVERIFY(std::isnan(means[2]));
    QVERIFY((j::hardestFirst(means) == std::vector<int64_t>{1, 2, 0}));
    // In rank.json (JSON has no Inf: written as null) it still reads back as not finite, in its place.
    hh::test::TempDir dir("rank_inf");
    auto r = handMadeRanking();
    r.layerScore[4] = inf;
    r.hardestFirst = j::hardestFirst(r.layerScore);
    QCOMPARE(r.hardestFirst.front(), int64_t(4));
    const auto back = j::rankResultFromJson(nlohmann::json::parse(j::toJson(r, smallConfig(dir)).dump()));
    QVERIFY(!std::isfinite(back.layerScore[4]));
    QVERIFY(back.hardestFirst == r.hardestFirst);
  }

  // A rank.json whose order is not a permutation of the layers, or whose tables disagree, is
  // refused in one error naming the key: [0, 900000, 1, 3, 4] or [-1] crashed the workbench.
  void damagedRankingsAreRefused() {
    hh::test::TempDir dir("rank_damaged");
    const auto good = j::toJson(handMadeRanking(), smallConfig(dir));
    QVERIFY(j::rankResultFromJson(good).hardestFirst == handMadeRanking().hardestFirst);
    using J = nlohmann::json;
    for (const auto& order :
         {J::array({0, 900000, 1, 3, 4}), J::array({-1}), J::array({0, 0, 1, 2, 3}), J::array({0, 1, 2, 3}),
          J::array({4, 3, 2, 1, 0, 5}), J::array({0, 1.5, 2, 3, 4}), J::array({0, 1, 2, 3, "4"}), J(3)}) {
      auto bad = good;
      bad["hardest_first"] = order;
      HH_VERIFY_THROWS_WITH(j::rankResultFromJson(bad), "hardest_first");
    }
    auto bad = good;
    bad["kl"]["heads"] = 2;
    bad["kl"]["values"] = std::vector<double>(10, 0.5);
    HH_VERIFY_THROWS_WITH(j::rankResultFromJson(bad), "\"kl\"");
    bad = good;
    bad["layer_kl"] = std::vector<double>(4, 0.5);
    HH_VERIFY_THROWS_WITH(j::rankResultFromJson(bad), "layer_kl");
    // proposePlan is given such an order by the workbench's budget control: it refuses it too.
    HH_VERIFY_THROWS_WITH(j::proposePlan({0, 900000}, 2, "softmax", "t2r"), "900000");
    HH_VERIFY_THROWS_WITH(j::proposePlan({-1}, 1, "softmax", "t2r"), "-1");
  }

  void ranksTheLayersOfTheFixture() {
    hh::test::TempDir dir("rank_ok");
    auto c = smallConfig(dir);
    c.keepAs = "hedgehog_window(8)";
    j::JobObserver quiet;
    const auto r = j::runRank(c, quiet);
    QVERIFY2(r.status == j::JobStatus::Completed, r.message.c_str());
    const int L = 5;
    QCOMPARE(r.outputError.layers, L);
    QCOMPARE(int(r.outputError.values.size()), L * r.outputError.heads);
    for (const double v : r.outputError.values) QVERIFY(std::isfinite(v) && v >= 0);
    for (const double v : r.kl.values) QVERIFY(std::isfinite(v) && v >= 0);
    double first = 0;
    for (int h = 0; h < r.outputError.heads; ++h) first += r.outputError.values[static_cast<size_t>(h)];
    QVERIFY(std::abs(r.layerScore[0] - first / r.outputError.heads) < 1e-12);
    QCOMPARE(r.plan.size(), size_t(L));
    for (int64_t i = 0; i < L; ++i)
      QCOMPARE(r.plan[static_cast<size_t>(r.hardestFirst[static_cast<size_t>(i)])],
               std::string(i < 2 ? "hedgehog_window(8)" : "hedgehog"));
    for (size_t i = 1; i < r.hardestFirst.size(); ++i)
      QVERIFY(r.layerScore[r.hardestFirst[i - 1]] >= r.layerScore[r.hardestFirst[i]]);

    // The reported error is the error of the distilled model's attention outputs.
    const auto recomputed = recomputedOutputError(c, dir.file("rank/distill/adapters.safetensors"), 3);
    for (size_t h = 0; h < recomputed.size(); ++h) {
      const double reported = r.outputError.values[static_cast<size_t>(3 * r.outputError.heads) + h];
      QVERIFY2(std::abs(reported - recomputed[h]) <= 1e-9 * std::max(1.0, recomputed[h]), std::to_string(h).c_str());
    }

    // rank.json reads back.
    std::ifstream in(r.rankFile);
    const auto back = j::rankResultFromJson(nlohmann::json::parse(in));
    QVERIFY(back.plan == r.plan && back.hardestFirst == r.hardestFirst && back.layerScore == r.layerScore);
    QCOMPARE(r.measuredRows, c.probeRows);  // the rows measured, recorded (the data holds more than 3)
    QCOMPARE(back.measuredRows, r.measuredRows);
    QVERIFY(back.outputError.values == r.outputError.values);
    HH_VERIFY_THROWS_WITH(j::rankResultFromJson(nlohmann::json{{"plan", {"softmax"}}}), "not a ranking");
    // A layer whose distillation diverged (NaN scores, written as null) reads back as NaN.
    auto diverged = r;
    diverged.layerScore[1] = diverged.layerKl[1] = std::numeric_limits<double>::quiet_NaN();
    diverged.outputError.values[0] = std::numeric_limits<double>::quiet_NaN();
    const auto reread = j::rankResultFromJson(nlohmann::json::parse(j::toJson(diverged, c).dump()));
    QVERIFY(std::isnan(reread.layerScore[1]) && std::isnan(reread.layerKl[1]) &&
            std::isnan(reread.outputError.values[0]));
    QCOMPARE(reread.layerScore[0], r.layerScore[0]);
  }

  void windowMixCalibrationStartsNearSoftmax() {
    hh::test::TempDir dir("rank_calibration");
    j::DataConfig data;
    data.corpus = hh::test::writeWordCorpus(dir);
    data.sequenceLength = 128;
    const std::string teacher = std::string(HH_SOURCE_DIR) + "/projects/demo/teacher";
    const auto rows = j::loadLmData(data, *hh::tok::loadTokenizer(teacher), false).validation.narrow(0, 0, 2);
    auto model = m::loadModel(teacher);
    const auto meanKl = [&] {
      j::ProbeRequest request;
      return j::probeAttention(*model, rows, {}, request).heads.meanKl();
    };
    model->setAttentionPlan(m::AttentionPlan::fromSpecs(std::vector<std::string>(4, "hedgehog_window(16)")));
    const double uncalibrated = meanKl();
    j::calibrateWindowMix(*model, rows);
    const double calibrated = meanKl();
    qInfo("mean KL to softmax: calibrated %.4f, uncalibrated %.4f", calibrated, uncalibrated);
    QVERIFY2(calibrated < 0.5 * uncalibrated,
             (std::to_string(calibrated) + " against " + std::to_string(uncalibrated)).c_str());
  }

  void badConfigsAreRefused() {
    hh::test::TempDir dir("rank_bad");
    auto json = j::toJson(smallConfig(dir));
    json["attention"] = "softmax";
    HH_VERIFY_THROWS_WITH(j::rankConfigFromJson(json), "converts nothing");
    json["attention"] = "hedgehog";
    json["keep_as"] = "hedgehog_window(0)";
    HH_VERIFY_THROWS_WITH(j::rankConfigFromJson(json), "_window(W)");
    json["keep_as"] = "softmax";
    json["steps"] = 0;
    HH_VERIFY_THROWS_WITH(j::rankConfigFromJson(json), "at least 1");
    json["steps"] = 4;
    json["probe"] = 3;
    HH_VERIFY_THROWS_WITH(j::rankConfigFromJson(json), "probe");
  }
};

HH_TEST_SUITE(TestRankJob, "engine.jobs.rank", &TestRankJob::initTestCase, &TestRankJob::orderAndPlan,
              &TestRankJob::nonFiniteLayersRankHardest, &TestRankJob::damagedRankingsAreRefused,
              &TestRankJob::ranksTheLayersOfTheFixture, &TestRankJob::windowMixCalibrationStartsNearSoftmax,
              &TestRankJob::badConfigsAreRefused)

}  // namespace test_rank_job

#if HH_HAVE_QTEST
#include "test_rank_job.moc"
#endif
