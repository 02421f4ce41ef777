// app.cli.progress_jsonl: `hedgehog --progress jsonl` as a program reads it (app/cli/progress_format.h):
//   - distill: every stdout line is one JSON object with an "event"; the run file is announced
//     first (it exists, total_steps 6), progress counts 1..6 of 6 with a null eta only at first,
//     scalars carry the loss, the "end" event says completed after 6 steps with the adapters file
//     that exists, and only "memory" follows it; the option works after the command's name too;
//   - convert: the end event carries the evaluation (both perplexities finite), each stage's run
//     file and the exported folder; every stage's run file was announced before the end, and the
//     first progress event after it has no eta (a stage's estimate is its own); the peak-memory
//     event follows the end, as after distill;
//   - SIGINT while distilling: exit 130, an end event "cancelled", stdout still only JSON, one
//     stderr line "hedgehog: cancelled: ...";
//   - SIGUSR1 as an evaluation starts: a "paused" event, no end for 1.5 s, SIGUSR2 and it
//     completes, its log saying how long it waited;
//   - experiment --jobs 2: the launcher's lines are log events, its end event lists the variants;
//   - an unknown format is one error line naming the option, exit 1, and nothing on stdout.
#include <signal.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include "tests/engine/jobs/experiment_test_support.h"
#include "tests/engine/jobs/jobs_test_support.h"
#include "tests/support/child_process.h"

namespace test_progress_jsonl {

namespace {

namespace fs = std::filesystem;
namespace c = hh::test::crash;
using nlohmann::json;

const std::string kModel = std::string(HH_FIXTURES_DIR) + "/tiny-random-gpt2";

bool haveCli() { return std::string(HH_CLI_BINARY).size() > 0 && fs::exists(HH_CLI_BINARY); }

// Every line of `text` as JSON; a line that is not an object with a string "event" is returned
// in `bad`.
std::vector<json> events(const std::string& text, std::string& bad) {
  std::vector<json> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    const json e = json::parse(line, nullptr, false);
    if (e.is_discarded() || !e.is_object() || !e.contains("event") || !e["event"].is_string()) bad += line + "\n";
    else out.push_back(e);
  }
  return out;
}

std::vector<json> ofKind(const std::vector<json>& all, const std::string& kind) {
  std::vector<json> out;
  for (const auto& e : all)
    if (e["event"] == kind) out.push_back(e);
  return out;
}

std::vector<std::string> distillArgs(const std::string& runDir, const std::string& corpus, int64_t steps) {
  return {HH_CLI_BINARY, "--progress", "jsonl", "distill", kModel, "--run-dir", runDir, "--corpus", corpus,
          "--steps", std::to_string(steps), "--eval-every", "3", "--batch-size", "4", "--seq-len", "32",
          "--max-train", "48"};
}

}  // namespace

class TestProgressJsonl : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void distillEvents() {
    if (!haveCli()) QSKIP("the hedgehog CLI is not built");
    hh::test::TempDir dir("jsonl_distill");
    const auto corpus = hh::test::writeWordCorpus(dir);
    const auto out = dir.file("out.jsonl"), err = dir.file("err.txt");
    QCOMPARE(c::waitFor(c::spawnLogged(distillArgs(dir.file("run"), corpus, 6), out, err), 300), 0);
    std::string bad;
    const auto all = events(c::readAll(out), bad);
    QVERIFY2(bad.empty(), ("not JSON events:\n" + bad).c_str());
    QVERIFY(!all.empty());

    QCOMPARE(all.front()["event"].get<std::string>(), std::string("run_file"));
    QVERIFY(fs::exists(all.front()["path"].get<std::string>()));
    QCOMPARE(all.front()["total_steps"].get<int64_t>(), int64_t(6));

    int64_t last = 0;
    int unknownEta = 0;
    for (const auto& p : ofKind(all, "progress")) {
      if (p["phase"] != "distilling") continue;
      QVERIFY(p["step"].get<int64_t>() >= last);
      last = p["step"].get<int64_t>();
      QCOMPARE(p["total"].get<int64_t>(), int64_t(6));
      QVERIFY(p["elapsed_s"].get<double>() >= 0);
      unknownEta += p["eta_s"].is_null() ? 1 : 0;
    }
    QCOMPARE(last, int64_t(6));
    QVERIFY2(unknownEta <= 1, "eta_s stays null after the first step");

    bool sawLoss = false;
    for (const auto& s : ofKind(all, "scalars")) sawLoss = sawLoss || s["values"].contains("loss");
    QVERIFY(sawLoss);
    QVERIFY(!ofKind(all, "log").empty());

    const auto ends = ofKind(all, "end");
    QCOMPARE(int(ends.size()), 1);
    const auto& end = ends[0];
    QCOMPARE(end["status"].get<std::string>(), std::string("completed"));
    QCOMPARE(end["steps"].get<int64_t>(), int64_t(6));
    QCOMPARE(end["run_file"].get<std::string>(), all.front()["path"].get<std::string>());
    QVERIFY(fs::exists(end["outputs"]["adapters"].get<std::string>()));
    // Only the peak-memory event follows the end.
    size_t endAt = 0;
    while (all[endAt]["event"] != "end") ++endAt;
    for (size_t i = endAt + 1; i < all.size(); ++i) QCOMPARE(all[i]["event"].get<std::string>(), std::string("memory"));
    QVERIFY(endAt + 1 < all.size());
    QVERIFY(all.back()["peak_mb"].get<double>() > 0);
  }

  void optionAfterTheCommand() {
    if (!haveCli()) QSKIP("the hedgehog CLI is not built");
    hh::test::TempDir dir("jsonl_after");
    const auto corpus = hh::test::writeWordCorpus(dir);
    auto args = distillArgs(dir.file("run"), corpus, 1);
    args.erase(args.begin() + 1, args.begin() + 3);
    args.insert(args.end(), {"--progress", "jsonl"});
    const auto out = dir.file("out.jsonl");
    QCOMPARE(c::waitFor(c::spawnLogged(args, out, dir.file("err.txt")), 300), 0);
    std::string bad;
    const auto all = events(c::readAll(out), bad);
    QVERIFY2(bad.empty(), ("not JSON events:\n" + bad).c_str());
    QCOMPARE(int(ofKind(all, "end").size()), 1);
  }

  void convertEndCarriesEvaluation() {
    if (!haveCli()) QSKIP("the hedgehog CLI is not built");
    hh::test::TempDir dir("jsonl_convert");
    auto config = hh::test::tinyConvertConfig(dir);
    config.distill.steps = 2;
    config.distill.evalEvery = 2;
    config.finetune.steps = 1;
    config.finetune.evalEvery = 1;
    config.evaluate.featureMaps = {"hedgehog"};
    config.evaluate.tableSequences = 4;
    const auto project = hh::test::writeProjectFile(dir, config);
    const auto out = dir.file("out.jsonl");
    QCOMPARE(c::waitFor(c::spawnLogged({HH_CLI_BINARY, "--progress", "jsonl", "convert", "--config", project}, out,
                                       dir.file("err.txt")),
                        600),
             0);
    std::string bad;
    const auto all = events(c::readAll(out), bad);
    QVERIFY2(bad.empty(), ("not JSON events:\n" + bad).c_str());
    const auto ends = ofKind(all, "end");
    QCOMPARE(int(ends.size()), 1);
    const auto& end = ends[0];
    QCOMPARE(end["status"].get<std::string>(), std::string("completed"));
    const auto& evaluation = end["evaluation"];
    QCOMPARE(evaluation["task"].get<std::string>(), std::string("lm"));
    QVERIFY(std::isfinite(evaluation["perplexity_original"].get<double>()));
    QVERIFY(std::isfinite(evaluation["perplexity_converted"].get<double>()));
    QCOMPARE(evaluation["feature_maps"][0]["name"].get<std::string>(), std::string("hedgehog"));
    QVERIFY(fs::exists(end["outputs"]["export"].get<std::string>()));
    std::set<std::string> announced;
    for (const auto& r : ofKind(all, "run_file")) announced.insert(r["path"].get<std::string>());
    for (const char* stage : {"distill", "finetune", "evaluate"}) {
      const auto file = end["stages"][stage]["run_file"].get<std::string>();
      QVERIFY2(announced.count(file) == 1, (std::string(stage) + " run file not announced: " + file).c_str());
    }
    QCOMPARE(end["stages"]["distill"]["steps"].get<int64_t>(), int64_t(2));
    // Each stage's estimate starts from nothing (engine/jobs/stage_eta.h): the first progress event
    // after a run file has no eta, the earlier stages' time not in it.
    int stagesStarted = 0;
    for (size_t i = 0; i < all.size(); ++i) {
      if (all[i]["event"] != "run_file") continue;
      size_t next = i + 1;
      while (next < all.size() && all[next]["event"] != "progress") ++next;
      QVERIFY2(next < all.size(), "a stage with no progress event");
      QVERIFY2(all[next]["eta_s"].is_null(), all[next].dump().c_str());
      ++stagesStarted;
    }
    QCOMPARE(stagesStarted, 3);
    // As after distill and finetune (docs/jobs.md): the end, then the peak-memory event alone.
    QCOMPARE(all.back()["event"].get<std::string>(), std::string("memory"));
    QCOMPARE(all[all.size() - 2]["event"].get<std::string>(), std::string("end"));
    QVERIFY(all.back()["peak_mb"].get<double>() > 0);
  }

  void interruptEndsCancelled() {
    if (!haveCli()) QSKIP("the hedgehog CLI is not built");
    hh::test::TempDir dir("jsonl_cancel");
    const auto corpus = hh::test::writeWordCorpus(dir);
    const auto out = dir.file("out.jsonl");
    const pid_t pid = c::spawnLogged(distillArgs(dir.file("run"), corpus, 100000), out, dir.file("err.txt"));
    QVERIFY(pid > 0);
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    while (c::readAll(out).find("\"event\":\"progress\"") == std::string::npos && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    ::kill(pid, SIGINT);
    QCOMPARE(c::waitFor(pid, 60), 130);
    std::string bad;
    const auto all = events(c::readAll(out), bad);
    QVERIFY2(bad.empty(), ("not JSON events:\n" + bad).c_str());
    const auto ends = ofKind(all, "end");
    QCOMPARE(int(ends.size()), 1);
    QCOMPARE(ends[0]["status"].get<std::string>(), std::string("cancelled"));
    const std::string errors = c::readAll(dir.file("err.txt"));
    QCOMPARE(std::count(errors.begin(), errors.end(), '\n'), std::ptrdiff_t(1));
    QVERIFY2(errors.rfind("hedgehog: cancelled: ", 0) == 0, errors.c_str());  // a cancel is not an error
  }

  // A single process paused (SIGUSR1) as its evaluation starts waits in its cancel poll: a
  // "paused" event, then nothing for 1.5 s (no end), then SIGUSR2 and it completes, saying how
  // long it waited; ETA and results as without the pause.
  void evaluationPausesInASingleProcess() {
    if (!haveCli()) QSKIP("the hedgehog CLI is not built");
    hh::test::TempDir dir("jsonl_pause");
    const auto corpus = hh::test::writeWordCorpus(dir);
    const auto out = dir.file("out.jsonl");
    const pid_t pid =
        c::spawnLogged({HH_CLI_BINARY, "--progress", "jsonl", "evaluate", kModel, "--feature-map", "hedgehog",
                        "--corpus", corpus, "--run-dir", dir.file("run"), "--batch-size", "1", "--seq-len", "32"},
                       out, dir.file("err.txt"));
    QVERIFY(pid > 0);
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    while (c::readAll(out).find("\"event\":\"run_file\"") == std::string::npos &&
           std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    ::kill(pid, SIGUSR1);
    const auto shows = [&out](const std::string& text) {
      for (int i = 0; i < 300 && c::readAll(out).find(text) == std::string::npos; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      return c::readAll(out).find(text) != std::string::npos;
    };
    QVERIFY2(shows("\"event\":\"paused\",\"paused\":true"), c::readAll(out).c_str());
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    QVERIFY2(c::readAll(out).find("\"event\":\"end\"") == std::string::npos, c::readAll(out).c_str());
    ::kill(pid, SIGUSR2);
    QCOMPARE(c::waitFor(pid, 120), 0);
    std::string bad;
    const auto all = events(c::readAll(out), bad);
    QVERIFY2(bad.empty(), ("not JSON events:\n" + bad).c_str());
    const auto pauses = ofKind(all, "paused");
    QCOMPARE(int(pauses.size()), 2);
    QCOMPARE(pauses[1]["paused"].get<bool>(), false);
    double waited = 0;
    for (const auto& e : ofKind(all, "log"))
      if (e["line"].get<std::string>().rfind("resumed after ", 0) == 0)
        waited = std::stod(e["line"].get<std::string>().substr(14));
    QVERIFY2(waited >= 1.4, c::readAll(out).c_str());
    QCOMPARE(ofKind(all, "end").at(0)["status"].get<std::string>(), std::string("completed"));
  }

  // experiment --jobs 2: the launcher's own lines are log events and its end event lists every
  // variant with its status and metrics.
  void experimentIsJsonToo() {
    if (!haveCli()) QSKIP("the hedgehog CLI is not built");
    hh::test::TempDir dir("jsonl_experiment");
    const auto file = dir.file("experiment.json");
    std::ofstream(file) << hh::test::tinyExperiment(dir).dump(2);
    const auto out = dir.file("out.jsonl"), err = dir.file("err.txt");
    const std::vector<std::string> args{HH_CLI_BINARY, "--progress", "jsonl",  "experiment",
                                        "--config",    file,         "--jobs", "2"};
    QCOMPARE(c::waitFor(c::spawnLogged(args, out, err), 300), 0);
    std::string bad;
    const auto all = events(c::readAll(out), bad);
    QVERIFY2(bad.empty(), ("not JSON events:\n" + bad).c_str());
    bool sawStarted = false;
    for (const auto& e : ofKind(all, "log"))
      sawStarted = sawStarted || e["line"].get<std::string>().find("] started") != std::string::npos;
    QVERIFY(sawStarted);
    const auto ends = ofKind(all, "end");
    QCOMPARE(int(ends.size()), 1);
    QCOMPARE(ends[0]["status"].get<std::string>(), std::string("completed"));
    QVERIFY(fs::exists(ends[0]["outputs"]["summary"].get<std::string>()));
    QCOMPARE(ends[0]["variants"].size(), size_t(2));
    QCOMPARE(ends[0]["variants"][1]["name"].get<std::string>(), std::string("t2r"));
    QVERIFY(ends[0]["variants"][1]["metrics"].contains("kl_mean"));
  }

  // rank: events only on stdout (the ranking tables are the human form), ending with the end
  // event that names rank.json and the plan.
  void rankIsJsonToo() {
    if (!haveCli()) QSKIP("the hedgehog CLI is not built");
    hh::test::TempDir dir("jsonl_rank");
    const auto corpus = hh::test::writeWordCorpus(dir);
    const auto out = dir.file("out.jsonl"), err = dir.file("err.txt");
    const std::vector<std::string> args{HH_CLI_BINARY, "--progress", "jsonl", "rank",        kModel, "--run-dir",
                                        dir.file("r"), "--corpus",   corpus,  "--steps",     "2",    "--probe-rows",
                                        "2",           "--seq-len",  "32",    "--max-train", "16"};
    QCOMPARE(c::waitFor(c::spawnLogged(args, out, err), 300), 0);
    std::string bad;
    const auto all = events(c::readAll(out), bad);
    QVERIFY2(bad.empty(), ("not JSON events:\n" + bad).c_str());
    const auto ends = ofKind(all, "end");
    QCOMPARE(int(ends.size()), 1);
    QCOMPARE(ends[0]["status"].get<std::string>(), std::string("completed"));
    QVERIFY(fs::exists(ends[0]["outputs"]["rank"].get<std::string>()));
    QCOMPARE(ends[0]["measured_rows"].get<int64_t>(), int64_t(2));
    QCOMPARE(ends[0]["plan"].size(), ends[0]["hardest_first"].size());
  }

  void unknownFormatIsOneError() {
    if (!haveCli()) QSKIP("the hedgehog CLI is not built");
    hh::test::TempDir dir("jsonl_bad");
    auto args = distillArgs(dir.file("run"), dir.file("corpus"), 1);
    args[2] = "xml";
    const auto out = dir.file("out.txt"), err = dir.file("err.txt");
    QCOMPARE(c::waitFor(c::spawnLogged(args, out, err), 60), 1);
    QVERIFY(c::readAll(out).empty());
    const std::string errors = c::readAll(err);
    QCOMPARE(std::count(errors.begin(), errors.end(), '\n'), std::ptrdiff_t(1));
    QVERIFY2(errors.find("--progress") != std::string::npos, errors.c_str());
  }
};

HH_TEST_SUITE(TestProgressJsonl, "app.cli.progress_jsonl", &TestProgressJsonl::distillEvents,
              &TestProgressJsonl::optionAfterTheCommand, &TestProgressJsonl::convertEndCarriesEvaluation,
              &TestProgressJsonl::interruptEndsCancelled, &TestProgressJsonl::evaluationPausesInASingleProcess,
              &TestProgressJsonl::experimentIsJsonToo, &TestProgressJsonl::rankIsJsonToo,
              &TestProgressJsonl::unknownFormatIsOneError)

}  // namespace test_progress_jsonl

#if HH_HAVE_QTEST
#include "test_progress_jsonl.moc"
#endif
