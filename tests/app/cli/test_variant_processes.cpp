// app.cli.variant_processes: `hedgehog experiment --jobs 2` as a user runs it, on two variants
// of distillation over the tiny GPT-2 fixture:
//   - each variant runs in its own process with its log, and the summary equals an in-process
//     run's layout; run again with --metrics, the table shows those columns (a name no variant has
//     warned about) and the summary keeps every metric; a failing variant is named on stderr in one line (its error,
//     its log) and makes the command exit non-zero while the other completes;
//   - `--status` from another process lists both variants running at their step while they run;
//   - SIGTERM to the launcher cancels both variants (variant.json "cancelled", exit 130, one
//     "hedgehog: cancelled:" line, no child left running), and --status lists both cancelled;
//   - a Ctrl-C at the terminal (SIGINT to the launcher's process group) reaches each child once,
//     through the launcher: each cancels and records it, none is killed by a second signal;
//   - a launcher killed outright (SIGKILL) leaves no child running: each cancels its variant;
//   - a child killed outright (SIGKILL, as the OOM killer does) leaves no record: its variant is
//     listed in the summary as failed, "killed by signal 9", and the experiment as failed;
//   - SIGUSR1 to the launcher pauses the running variants (their logs say where, --status says
//     paused) and holds the waiting ones, even when a slot frees; SIGUSR2 resumes them and starts
//     the rest.
#include <signal.h>
#include <spawn.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <regex>
#include <thread>

#include "engine/jobs/experiment_job.h"
#include "engine/runs/run_reader.h"
#include "tests/engine/jobs/experiment_test_support.h"
#include "tests/engine/jobs/jobs_test_support.h"
#include "tests/support/child_process.h"
#include "tests/support/hh_test.h"
#include "tests/support/temp_dir.h"

namespace test_variant_processes {

namespace {

namespace j = hh::jobs;
namespace fs = std::filesystem;
namespace c = hh::test::crash;
using nlohmann::json;
using hh::test::tinyExperiment;

bool haveCli() { return std::string(HH_CLI_BINARY).size() > 0 && fs::exists(HH_CLI_BINARY); }

// Running, and not a zombie waiting for a parent that may never reap it.
bool alive(pid_t pid) {
  if (::kill(pid, 0) != 0) return false;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  std::getline(stat, text);
  const auto close = text.rfind(')');
  return close == std::string::npos || close + 2 >= text.size() || text[close + 2] != 'Z';
}

bool waitUntil(const std::function<bool()>& done, double seconds) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < end) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return done();
}

// The pids the launcher printed ("[NAME] started (process PID, ...").
std::vector<pid_t> variantPids(const std::string& output) {
  std::vector<pid_t> pids;
  const std::regex started("started \\(process ([0-9]+)");
  for (auto it = std::sregex_iterator(output.begin(), output.end(), started); it != std::sregex_iterator(); ++it)
    pids.push_back(static_cast<pid_t>(std::stol((*it)[1].str())));
  return pids;
}

bool hasSteps(const std::string& runFile) {
  try {
    return fs::exists(runFile) && !hh::runs::RunReader::open(runFile).scalars("loss").steps.empty();
  } catch (const std::exception&) {
    return false;
  }
}

std::string variantStatus(const hh::test::TempDir& dir, const std::string& name) {
  try {
    return json::parse(std::ifstream(dir.file("exp") + "/" + name + "/variant.json")).value("status", "");
  } catch (const std::exception&) {
    return "";
  }
}

// `experiment --config FILE --jobs 2` on two long variants, in its own process group, started
// and waited for until both children have trained a step. Fills `children` with their pids.
// What `hedgehog experiment --status` prints on the experiment in `dir`.
std::string statusOf(const hh::test::TempDir& dir) {
  const std::string out = dir.file("status.out");
  const int rc = std::system((std::string(HH_CLI_BINARY) + " experiment --config " + dir.file("experiment.json") +
                              " --status > " + out + " 2>&1")
                                 .c_str());
  return (rc == 0 ? "" : "exit " + std::to_string(rc) + ": ") + c::readAll(out);
}

pid_t startLongExperiment(const hh::test::TempDir& dir, std::vector<pid_t>& children) {
  json e = tinyExperiment(dir);
  e["base"]["steps"] = 1000000;
  e["base"]["eval_every"] = 1000000;
  e["base"]["snapshot_every"] = 1000000;
  const std::string file = dir.file("experiment.json");
  std::ofstream(file) << e.dump(2);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, dir.file("log").c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attributes, 0);  // its own group, as a shell's job: a Ctrl-C goes to all of it
  const std::vector<std::string> args{HH_CLI_BINARY, "experiment", "--config", file, "--jobs", "2"};
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = -1;
  if (posix_spawn(&pid, argv[0], &actions, &attributes, argv.data(), environ) != 0) pid = -1;
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attributes);
  if (pid > 0 && waitUntil([&] { return hasSteps(dir.file("exp") + "/hedgehog/run.h5") && hasSteps(dir.file("exp") + "/t2r/run.h5"); }, 120))
    children = variantPids(c::readAll(dir.file("log")));
  return pid;
}

// Both variants were cancelled and recorded so, and no child is left.
void verifyCancelled(const hh::test::TempDir& dir, const std::vector<pid_t>& children) {
  const auto log = c::readAll(dir.file("log"));
  for (pid_t p : children) QVERIFY2(waitUntil([&] { return !alive(p); }, 60), log.c_str());
  for (const std::string name : {"hedgehog", "t2r"}) {
    QVERIFY2(waitUntil([&] { return variantStatus(dir, name) == "cancelled"; }, 30), (name + "\n" + log).c_str());
    const auto reader = hh::runs::RunReader::open(dir.file("exp") + "/" + name + "/run.h5");
    QVERIFY(reader.status() == hh::runs::RunStatus::Cancelled);
  }
}

}  // namespace

class TestVariantProcesses : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void runsVariantsInProcesses() {
    if (!haveCli()) QSKIP("the hedgehog CLI is not built");
    hh::test::TempDir dir("experiment_jobs");
    json e = tinyExperiment(dir);
    const std::string file = dir.file("experiment.json");
    std::ofstream(file) << e.dump(2);
    const std::string cli = HH_CLI_BINARY, out = dir.file("cli.out");
    const int rc = std::system((cli + " experiment --config " + file + " --jobs 2 > " + out + " 2>&1").c_str());
    const std::string printed = c::readAll(out);
    QVERIFY2(rc == 0, printed.c_str());
    QVERIFY2(printed.find("[hedgehog] started (process") != std::string::npos, printed.c_str());
    QVERIFY2(printed.find("[t2r] completed after") != std::string::npos, printed.c_str());
    const auto config = j::experimentConfigFromJson(e);
    QVERIFY(j::pendingVariants(config).empty());
    for (const std::string name : {"hedgehog", "t2r"}) {
      QCOMPARE(variantStatus(dir, name), std::string("completed"));
      QVERIFY(fs::file_size(dir.file("exp") + "/" + name + "/experiment.log") > 0);
    }
    const auto summary = json::parse(std::ifstream(dir.file("exp") + "/summary.json"));
    QCOMPARE(summary["variants"].size(), size_t(2));
    for (const auto& variant : summary["variants"])  // run by the children just now, not reused
      QCOMPARE(variant["reused"].get<bool>(), false);
    const auto run = hh::runs::RunReader::open(dir.file("exp") + "/t2r/run.h5");
    QCOMPARE(summary["variants"][1]["metrics"]["kl_mean"].get<double>(), run.scalars("kl_mean").values.back());

    // Again with --metrics: both reused, the table has those columns in that order, a name no
    // variant has is warned about on stderr, and summary.csv still has every metric.
    const std::string err = dir.file("cli.err");
    const int again = std::system(
        (cli + " experiment --config " + file + " --metrics val_loss,kl_mean,bogus > " + out + " 2> " + err).c_str());
    const std::string table = c::readAll(out), warnings = c::readAll(err);
    QVERIFY2(again == 0, (table + warnings).c_str());
    QVERIFY2(std::regex_search(table, std::regex("variant +status +seconds val_loss kl_mean\n")), table.c_str());
    QVERIFY2(warnings.find("--metrics: no variant has \"bogus\"") != std::string::npos, warnings.c_str());
    QVERIFY2(c::readAll(dir.file("exp") + "/summary.csv").find(",loss") != std::string::npos, "summary.csv keeps loss");
  }

  void failingVariantIsNamed() {
    if (!haveCli()) QSKIP("the hedgehog CLI is not built");
    hh::test::TempDir dir("experiment_jobs_fail");
    json e = tinyExperiment(dir);
    e["variants"][0]["set"]["debug_nan_at_step"] = 1;
    const std::string file = dir.file("experiment.json");
    std::ofstream(file) << e.dump(2);
    const std::string cli = HH_CLI_BINARY, err = dir.file("err.txt");
    const int failed = std::system((cli + " experiment --config " + file + " --jobs 2 > " + dir.file("out") + " 2> " + err).c_str());
    QVERIFY(failed != 0);
    // One error line naming the failed variant, what it said and its log; the other completed.
    const std::string said = c::readAll(err);
    QVERIFY2(said.rfind("hedgehog: error: 1 variant failed; the first, hedgehog: ", 0) == 0 &&
                 said.find("NaN") != std::string::npos && said.find("/hedgehog/experiment.log)") != std::string::npos &&
                 std::count(said.begin(), said.end(), '\n') == 1,
             said.c_str());
    QCOMPARE(j::pendingVariants(j::experimentConfigFromJson(e)), (std::vector<std::string>{"hedgehog"}));
    QCOMPARE(variantStatus(dir, "t2r"), std::string("completed"));
    // The summary lists the failed variant as a serial run would.
    const auto summary = json::parse(std::ifstream(dir.file("exp") + "/summary.json"));
    QCOMPARE(summary["variants"].size(), size_t(2));
    QCOMPARE(summary["variants"][0]["status"].get<std::string>(), std::string("failed"));
    // An unknown --only name is refused before any child starts.
    const int unknown = std::system(
        (cli + " experiment --config " + file + " --jobs 2 --only t2r,zzz > " + dir.file("out2") + " 2> " + err)
            .c_str());
    QVERIFY(unknown != 0);
    QVERIFY2(c::readAll(err).find("no variant named \"zzz\"") != std::string::npos, c::readAll(err).c_str());
    QVERIFY2(c::readAll(dir.file("out2")).find("started") == std::string::npos, c::readAll(dir.file("out2")).c_str());
  }

  void terminateCancelsEveryVariant() {
    if (!haveCli()) QSKIP("the hedgehog CLI is not built");
    hh::test::TempDir dir("experiment_jobs_term");
    std::vector<pid_t> children;
    const pid_t launcher = startLongExperiment(dir, children);
    QVERIFY(launcher > 0);
    QVERIFY2(children.size() == 2, c::readAll(dir.file("log")).c_str());
    // --status from another process while they run: both running, at a step out of their steps.
    std::string live;
    for (int i = 0; i < 600 && !std::regex_search(live, std::regex("2 running")); ++i) {
      live = statusOf(dir);
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    QVERIFY2(std::regex_search(live, std::regex("\nt2r +running +[0-9]+ / 1000000 \\(distill\\)")), live.c_str());
    QVERIFY2(live.find("tiny of 2 variants: 2 running\n") != std::string::npos, live.c_str());
    const auto t0 = std::chrono::steady_clock::now();
    ::kill(launcher, SIGTERM);
    const int status = c::waitFor(launcher, 120);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    qInfo("SIGTERM to the launcher: exit %d after %.2f s", status, seconds);
    const auto log = c::readAll(dir.file("log"));
    QVERIFY2(status == 130, log.c_str());
    QVERIFY2(log.find("[hedgehog] cancelled after") != std::string::npos && log.find("[t2r] cancelled after") != std::string::npos,
             log.c_str());
    QVERIFY2(log.find("hedgehog: cancelled: interrupted") != std::string::npos, log.c_str());
    verifyCancelled(dir, children);
    // The launcher summarised what its children recorded before it exited.
    const auto summary = json::parse(std::ifstream(dir.file("exp") + "/summary.json"));
    QCOMPARE(summary["variants"].size(), size_t(2));
    for (const auto& v : summary["variants"]) QCOMPARE(v["status"].get<std::string>(), std::string("cancelled"));
    const std::string after = statusOf(dir);
    QVERIFY2(after.find("tiny of 2 variants: 2 cancelled\n") != std::string::npos, after.c_str());
  }

  void ctrlCReachesEachChildOnce() {
    if (!haveCli()) QSKIP("the hedgehog CLI is not built");
    hh::test::TempDir dir("experiment_jobs_int");
    std::vector<pid_t> children;
    const pid_t launcher = startLongExperiment(dir, children);
    QVERIFY(launcher > 0);
    QVERIFY2(children.size() == 2, c::readAll(dir.file("log")).c_str());
    ::kill(-launcher, SIGINT);  // what the terminal does on Ctrl-C: the whole foreground group
    const int status = c::waitFor(launcher, 120);
    QVERIFY2(status == 130, c::readAll(dir.file("log")).c_str());
    verifyCancelled(dir, children);
  }

  void killedLauncherLeavesNoChild() {
    if (!haveCli()) QSKIP("the hedgehog CLI is not built");
    hh::test::TempDir dir("experiment_jobs_kill");
    std::vector<pid_t> children;
    const pid_t launcher = startLongExperiment(dir, children);
    QVERIFY(launcher > 0);
    QVERIFY2(children.size() == 2, c::readAll(dir.file("log")).c_str());
    ::kill(launcher, SIGKILL);
    QCOMPARE(c::waitFor(launcher, 30), 128 + SIGKILL);
    verifyCancelled(dir, children);
  }

  // SIGUSR1 to the launcher pauses every running variant at its next step and starts no waiting
  // one, even when a slot frees (here a child killed outright); SIGUSR2 resumes the running ones
  // and starts the rest.
  void pauseHoldsRunningAndWaitingVariants() {
    if (!haveCli()) QSKIP("the hedgehog CLI is not built");
    hh::test::TempDir dir("experiment_jobs_pause");
    json e = tinyExperiment(dir);
    const json longRun = {{"steps", 1000000}, {"eval_every", 1000000}, {"snapshot_every", 1000000}};
    e["variants"][0]["set"] = longRun;
    e["variants"][1]["set"] = longRun;
    e["variants"][1]["set"]["feature_map"] = "t2r";
    e["variants"].push_back({{"name", "third"}, {"set", json::object()}});
    const std::string file = dir.file("experiment.json");
    std::ofstream(file) << e.dump(2);
    const std::vector<std::string> args{HH_CLI_BINARY, "experiment", "--config", file, "--jobs", "2"};
    const pid_t launcher = c::spawnLogged(args, dir.file("log"), dir.file("err"));
    QVERIFY(launcher > 0);
    // On a failed check the launcher is killed, and its children cancel (their parent-death signal).
    const std::unique_ptr<void, std::function<void(void*)>> stop(reinterpret_cast<void*>(1), [launcher](void*) {
      if (::kill(launcher, 0) == 0) ::kill(launcher, SIGKILL), c::waitFor(launcher, 30);
    });
    const std::string exp = dir.file("exp");
    QVERIFY2(waitUntil([&] { return hasSteps(exp + "/hedgehog/run.h5") && hasSteps(exp + "/t2r/run.h5"); }, 120),
             c::readAll(dir.file("log")).c_str());
    const auto children = variantPids(c::readAll(dir.file("log")));
    QCOMPARE(children.size(), size_t(2));
    ::kill(launcher, SIGUSR1);
    const auto shows = [](const std::string& file, const std::string& text) {
      return waitUntil([&] { return c::readAll(file).find(text) != std::string::npos; }, 60);
    };
    QVERIFY2(shows(dir.file("log"), "paused: 2 running variant(s) wait at their next step; 1 waiting (kill -USR2 " +
                                        std::to_string(launcher) + " resumes)"),
             c::readAll(dir.file("log")).c_str());
    for (const std::string name : {"hedgehog", "t2r"})
      QVERIFY2(shows(exp + "/" + name + "/experiment.log", "paused at step"), name.c_str());
    const std::string status = statusOf(dir);  // --status from another process reads their logs
    QVERIFY2(status.find("tiny of 3 variants: 2 paused, 1 not started\n") != std::string::npos, status.c_str());
    ::kill(children[1], SIGKILL);  // a slot frees while paused: the third must not start
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    QVERIFY2(c::readAll(dir.file("log")).find("[third] started") == std::string::npos,
             c::readAll(dir.file("log")).c_str());
    ::kill(launcher, SIGUSR2);
    QVERIFY2(shows(dir.file("log"), "[third] started"), c::readAll(dir.file("log")).c_str());
    QVERIFY(shows(exp + "/hedgehog/experiment.log", "resumed at step"));
    ::kill(launcher, SIGTERM);
    QCOMPARE(c::waitFor(launcher, 120), 130);
    QVERIFY(!alive(children[0]));
  }

  void killedChildIsListedAsFailed() {
    if (!haveCli()) QSKIP("the hedgehog CLI is not built");
    hh::test::TempDir dir("experiment_jobs_child_killed");
    json e = tinyExperiment(dir);
    e["variants"][0]["set"] = {{"steps", 1000000}, {"eval_every", 1000000}, {"snapshot_every", 1000000}};
    const std::string file = dir.file("experiment.json");
    std::ofstream(file) << e.dump(2);
    const std::vector<std::string> args{HH_CLI_BINARY, "experiment", "--config", file, "--jobs", "2"};
    const pid_t launcher = c::spawnLogged(args, dir.file("log"), dir.file("err"));
    QVERIFY(launcher > 0);
    QVERIFY2(waitUntil([&] { return hasSteps(dir.file("exp") + "/hedgehog/run.h5"); }, 120),
             c::readAll(dir.file("log")).c_str());
    const auto children = variantPids(c::readAll(dir.file("log")));
    QVERIFY2(!children.empty(), c::readAll(dir.file("log")).c_str());
    ::kill(children[0], SIGKILL);  // the long variant, started first
    const int status = c::waitFor(launcher, 120);
    const auto log = c::readAll(dir.file("log")), err = c::readAll(dir.file("err"));
    QVERIFY2(status == 1, (log + err).c_str());
    QVERIFY2(log.find("[hedgehog] failed after") != std::string::npos &&
                 log.find(": killed by signal 9 (log") != std::string::npos,
             log.c_str());
    QVERIFY2(err.find("the first, hedgehog: killed by signal 9 (log ") != std::string::npos, err.c_str());
    QVERIFY2(log.find("\nfailed (") != std::string::npos, log.c_str());  // the experiment, not "completed"
    const auto summary = json::parse(std::ifstream(dir.file("exp") + "/summary.json"));
    QCOMPARE(summary["variants"].size(), size_t(2));
    QCOMPARE(summary["variants"][0]["name"].get<std::string>(), std::string("hedgehog"));
    QCOMPARE(summary["variants"][0]["status"].get<std::string>(), std::string("failed"));
    QCOMPARE(summary["variants"][0]["message"].get<std::string>(), std::string("killed by signal 9"));
    QCOMPARE(summary["variants"][1]["status"].get<std::string>(), std::string("completed"));
  }
};

HH_TEST_SUITE(TestVariantProcesses, "app.cli.variant_processes", &TestVariantProcesses::runsVariantsInProcesses,
              &TestVariantProcesses::failingVariantIsNamed, &TestVariantProcesses::terminateCancelsEveryVariant,
              &TestVariantProcesses::ctrlCReachesEachChildOnce, &TestVariantProcesses::killedLauncherLeavesNoChild,
              &TestVariantProcesses::killedChildIsListedAsFailed,
              &TestVariantProcesses::pauseHoldsRunningAndWaitingVariants)

}  // namespace test_variant_processes

#if HH_HAVE_QTEST
#include "test_variant_processes.moc"
#endif
