// app.cli.bad_inputs: every entry of the bad-input catalogue (tests/support/bad_inputs.h) run
// through the `hedgehog` CLI as a user would, in a child process:
//   - it exits normally (never a signal) with status 1;
//   - stderr is exactly one non-empty line that starts "hedgehog: error:" and contains the
//     absolute path of the entry's `file` (the rule: the full path, as the user gave it or as the
//     engine built it from what the user gave, so the user can tell which file to fix);
//   - every `preserved` file is byte-identical afterwards (a failed export keeps the previous one);
//   - "full disk" entries run under RLIMIT_FSIZE, permission entries (as root) under uid 65534.
// All entries run, then the suite fails once with the list of those that broke a rule. Each
// entry's error line is printed (QINFO, paths under the temporary folder shortened to <tmp>) for
// the table in docs/reliability.md. Also: `hedgehog run-info` on a good run file (and its
// --series CSV of a resumed run), `train
// --resume` with another attention plan (refused) or of a completed run (nothing to resume, exit
// 0), `hedgehog bench` on a named shape in bf16, and bad flag values of the job verbs.
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <sstream>
#include <thread>

#include "engine/io/safetensors.h"
#include "engine/models/model_io.h"
#include "engine/models/tensor_file.h"
#include "engine/runs/run_writer.h"
#include "tests/support/bad_inputs.h"
#include "tests/support/hh_test.h"
#include "tests/support/temp_dir.h"

namespace test_bad_inputs_cli {

namespace {

namespace fs = std::filesystem;

struct ChildResult {
  bool exited = false;
  int status = -1;  // exit status, or the signal when !exited
  bool timedOut = false;
  std::string out, err;
};

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Runs `hedgehog args...` with stdout and stderr captured in files under `scratch`.
ChildResult runCli(const std::vector<std::string>& args, const std::string& scratch, long fileSizeLimit,
                   bool unprivileged, int timeoutSeconds = 300) {
  std::vector<std::string> argv;
  if (unprivileged && ::geteuid() == 0) argv = {"/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"};
  argv.push_back(HH_CLI_BINARY);
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<char*> cargv;
  for (auto& a : argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  const std::string outPath = scratch + "/stdout", errPath = scratch + "/stderr";
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int out = ::open(outPath.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int err = ::open(errPath.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (out < 0 || err < 0) ::_exit(126);
    ::dup2(out, 1);
    ::dup2(err, 2);
    ::close(out);
    ::close(err);
    if (fileSizeLimit > 0) {
      // SIGXFSZ keeps its default action here: the CLI itself must ignore it to report the error.
      const rlimit limit{static_cast<rlim_t>(fileSizeLimit), static_cast<rlim_t>(fileSizeLimit)};
      ::setrlimit(RLIMIT_FSIZE, &limit);
    }
    ::execv(cargv[0], cargv.data());
    ::_exit(127);
  }
  ChildResult r;
  if (pid < 0) return r;
  int status = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeoutSeconds);
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      r.timedOut = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  r.exited = WIFEXITED(status);
  r.status = r.exited ? WEXITSTATUS(status) : WIFSIGNALED(status) ? WTERMSIG(status) : -1;
  r.out = slurp(outPath);
  r.err = slurp(errPath);
  return r;
}

std::string replaceAll(std::string text, const std::string& from, const std::string& to) {
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
    text.replace(at, from.size(), to);
  return text;
}

// A temporary folder that the unprivileged user (uid 65534) can enter and read.
struct Scratch {
  std::string path;
  Scratch() {
    std::string pattern = (hh::test::tempRoot() / "hh-bad-inputs-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path = pattern;
    ::chmod(path.c_str(), 0755);
  }
  ~Scratch() {
    std::error_code ec;
    // Entries made unreadable or read-only for the test: give them back to the owner first.
    const fs::recursive_directory_iterator end;
    for (auto it = fs::recursive_directory_iterator(path, ec); !ec && it != end; it.increment(ec))
      fs::permissions(it->path(), fs::perms::owner_all, fs::perm_options::add, ec);
    fs::permissions(path, fs::perms::owner_all, fs::perm_options::add, ec);
    fs::remove_all(path, ec);
  }
};

}  // namespace

class TestBadInputsCli : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void initTestCase() { setenv("HH_NUM_THREADS", "1", 0); }

  void catalogueIsWellFormed() {
    Scratch scratch;
    const auto entries = hh::test::buildBadInputs(scratch.path + "/inputs");
    QVERIFY2(entries.size() >= 32, std::to_string(entries.size()).c_str());
    std::set<std::string> ids;
    const std::set<std::string> categories{"checkpoint", "config", "tokenizer", "dataset", "project", "run", "export"};
    std::set<std::string> seen;
    for (const auto& e : entries) {
      QVERIFY2(ids.insert(e.id).second, ("duplicate id " + e.id).c_str());
      QVERIFY2(categories.count(e.category), (e.id + ": category " + e.category).c_str());
      seen.insert(e.category);
      QVERIFY2(e.id.rfind(e.category + ".", 0) == 0, e.id.c_str());
      QVERIFY2(fs::path(e.file).is_absolute(), (e.id + ": " + e.file).c_str());
      QVERIFY2(!e.cli.empty() && !e.guiPath.empty() && !e.description.empty(), e.id.c_str());
      QVERIFY2((e.gui == hh::test::GuiOpen::ExportWeights) == !e.exportTo.empty(), e.id.c_str());
      for (const auto& f : hh::test::fingerprints(e.preserved))
        QVERIFY2(f != "missing" && f != "not a regular file", (e.id + ": a preserved file does not exist").c_str());
    }
    QCOMPARE(seen.size(), categories.size());
  }

  void everyBadInputFailsWithOneLineNamingTheFile() {
    if (std::string(HH_CLI_BINARY).empty()) QSKIP("the hedgehog CLI is not built (CLI11 missing)");
    Scratch scratch;
    const std::string root = scratch.path + "/inputs";
    fs::create_directory(root);
    ::chmod(root.c_str(), 0755);
    const auto entries = hh::test::buildBadInputs(root);
    std::vector<std::string> failures;
    for (const auto& e : entries) {
      const auto before = hh::test::fingerprints(e.preserved);
      const auto r = runCli(e.cli, scratch.path, e.fileSizeLimitBytes, e.needsUnprivileged);
      const auto after = hh::test::fingerprints(e.preserved);
      std::string line = r.err;
      if (!line.empty() && line.back() == '\n') line.pop_back();
      qInfo("%s | %s", e.id.c_str(), replaceAll(line, root, "<tmp>").c_str());
      std::vector<std::string> problems;
      if (r.timedOut) problems.push_back("timed out");
      if (!r.exited)
        problems.push_back("killed by signal " + std::to_string(r.status));
      else if (r.status != 1)
        problems.push_back("exit status " + std::to_string(r.status));
      if (line.empty()) problems.push_back("nothing on stderr");
      if (line.find('\n') != std::string::npos) problems.push_back("stderr has several lines");
      if (line.rfind("hedgehog: error:", 0) != 0) problems.push_back("stderr does not start with \"hedgehog: error:\"");
      if (line.find(e.file) == std::string::npos) problems.push_back("the message does not name " + e.file);
      for (size_t i = 0; i < before.size(); ++i)
        if (before[i] != after[i])
          problems.push_back(e.preserved[i] + " changed (" + before[i] + " -> " + after[i] + ")");
      if (problems.empty()) continue;
      std::string text = e.id + ":";
      for (const auto& p : problems) text += " " + p + ";";
      failures.push_back(text + " stderr: " + replaceAll(r.err.substr(0, 600), "\n", "\\n"));
    }
    std::string report;
    for (const auto& f : failures) report += "\n  " + f;
    QVERIFY2(failures.empty(), (std::to_string(failures.size()) + " of " + std::to_string(entries.size()) +
                                " bad inputs broke a rule:" + report)
                                   .c_str());
  }

  // run-info on a good run: schema, kind, status, steps, the last metrics, no snapshots.
  void runInfoDescribesARun() {
    if (std::string(HH_CLI_BINARY).empty()) QSKIP("the hedgehog CLI is not built (CLI11 missing)");
    Scratch scratch;
    const std::string path = scratch.path + "/run.h5";
    hh::runs::RunHeader header;
    header.runId = "run-info-test";
    header.kind = "distill";
    header.configJson = "{}";
    header.layout.scalars = {{"loss"}, {"lr"}};
    {
      auto writer = hh::runs::RunWriter::create(path, header);
      for (int step = 1; step <= 12; ++step) writer.appendScalars(step, {{"loss", 1.0 / step}, {"lr", 0.5}});
      writer.setStatus(hh::runs::RunStatus::Completed, "all steps done");
    }
    const auto r = runCli({"run-info", path}, scratch.path, 0, false);
    QVERIFY2(r.exited && r.status == 0, r.err.c_str());
    QVERIFY2(r.err.empty(), r.err.c_str());
    for (const char* needle : {"schema version 1", "kind: distill", "run id: run-info-test", "status: completed",
                               "all steps done", "steps written: 12", "loss", "0.08333", "snapshots: 0"})
      QVERIFY2(r.out.find(needle) != std::string::npos, (std::string(needle) + " missing from:\n" + r.out).c_str());
    QVERIFY2(r.out.find("continue") == std::string::npos, r.out.c_str());  // a run never resumed

    // Resumed after step 6: each file names the other.
    const std::string continuation = scratch.path + "/run-resumed-6.h5";
    {
      auto writer = hh::runs::RunWriter::create(continuation, header);
      for (int step = 7; step <= 9; ++step) writer.appendScalars(step, {{"loss", 100.0 + step}});
      writer.setStatus(hh::runs::RunStatus::Completed);
    }
    const auto first = runCli({"run-info", path}, scratch.path, 0, false);
    QVERIFY2(first.out.find("continued: after step 6 in " + continuation + " (completed)") != std::string::npos,
             first.out.c_str());
    const auto second = runCli({"run-info", continuation}, scratch.path, 0, false);
    QVERIFY2(second.out.find("continues: " + path + " after step 6") != std::string::npos, second.out.c_str());

    // --series: the resumed run's series joined at step 6 (the first file's steps 7-12 were
    // redone by the continuation), blank where the continuation logged no lr.
    const auto csv = runCli({"run-info", path, "--series", "loss,lr"}, scratch.path, 0, false);
    QVERIFY2(csv.exited && csv.status == 0, csv.err.c_str());
    QCOMPARE(csv.out, std::string("step,loss,lr\n1,1,0.5\n2,0.5,0.5\n3,0.333333333,0.5\n4,0.25,0.5\n5,0.2,0.5\n"
                                  "6,0.166666667,0.5\n7,107,\n8,108,\n9,109,\n"));
    const auto unknown = runCli({"run-info", path, "--series", "loss,no_such"}, scratch.path, 0, false);
    QVERIFY2(unknown.exited && unknown.status != 0 && unknown.out.empty(), unknown.out.c_str());
    QVERIFY2(unknown.err.find(path + ": no scalar series \"no_such\" (it has: loss, lr)") != std::string::npos,
             unknown.err.c_str());
  }

  // `train --resume` continues the same run: another attention plan is refused in one error line
  // naming the run folder and both plans; a run that already completed has nothing to resume:
  // exit 0, one line that says so, and no continuation file.
  void resumeRefusesAnotherPlanAndEndedRuns() {
    if (std::string(HH_CLI_BINARY).empty()) QSKIP("the hedgehog CLI is not built (CLI11 missing)");
    Scratch scratch;
    const std::string corpus = scratch.path + "/corpus", runDir = scratch.path + "/run";
    fs::create_directories(corpus);
    for (int d = 0; d < 4; ++d)
      std::ofstream(corpus + "/doc" + std::to_string(d) + ".txt")
          << replaceAll(std::string(60, '.'), ".", d % 2 ? "the cat sat on the mat. " : "a dog ran in the park. ");
    // Paths under the scratch folder have no spaces: the arguments are split at them.
    const auto with = [&](const std::string& more) {
      std::istringstream words("train --run-dir " + runDir + " --tokenizer " + HH_FIXTURES_DIR +
                               "/tiny-random-gpt2 --n-embd 32 --n-layer 2 --n-head 4 --n-positions 32 --corpus " +
                               corpus + " --seq-len 32 --batch-size 4 --eval-every 2 --steps 4 " + more);
      return std::vector<std::string>(std::istream_iterator<std::string>(words), {});
    };
    const auto first = runCli(with("--feature-map hedgehog"), scratch.path, 0, false);
    QVERIFY2(first.exited && first.status == 0, first.err.c_str());
    const auto other = runCli(with("--feature-map t2r --resume"), scratch.path, 0, false);
    QVERIFY2(other.exited && other.status == 1, other.err.c_str());
    const std::string refusal = "hedgehog: error: train: " + runDir +
                                " was trained with attention hedgehog in all 2 layers, the resume asks for t2r";
    QVERIFY2(other.err.rfind(refusal, 0) == 0 && std::count(other.err.begin(), other.err.end(), '\n') == 1,
             other.err.c_str());
    const auto again = runCli(with("--feature-map hedgehog --resume"), scratch.path, 0, false);
    QVERIFY2(again.exited && again.status == 0, again.err.c_str());
    QVERIFY2(again.out.find(runDir + " already completed at step 4: nothing to resume") != std::string::npos,
             again.out.c_str());
    QVERIFY2(!fs::exists(runDir + "/run-resumed-4.h5"), "a continuation was written");
  }

  // bench on a named shape in bf16: random weights and ids, the header says what ran, the distill
  // step's loss is finite; an unknown shape or dtype is refused by name.
  void benchRunsAShapeInBf16() {
    if (std::string(HH_CLI_BINARY).empty()) QSKIP("the hedgehog CLI is not built (CLI11 missing)");
    Scratch scratch;
    const auto r = runCli({"bench", "--shape", "demo", "--dtype", "bfloat16", "--only", "distill", "--batch-size", "1",
                           "--seq-len", "16", "--warmup", "0", "--repeats", "1", "--json", scratch.path + "/b.json"},
                          scratch.path, 0, false);
    QVERIFY2(r.exited && r.status == 0, r.err.c_str());
    for (const char* needle : {"demo (random weights) | batch 1 x 16 tokens | cpu, bfloat16", "distill step"})
      QVERIFY2(r.out.find(needle) != std::string::npos, (std::string(needle) + " missing from:\n" + r.out).c_str());
    const auto json = nlohmann::json::parse(slurp(scratch.path + "/b.json"));
    QCOMPARE(json.at("dtype").get<std::string>(), std::string("bfloat16"));
    QVERIFY(std::isfinite(json.at("timings").at(0).at("loss").get<double>()));
    const auto bad = runCli({"bench", "--shape", "gpt3"}, scratch.path, 0, false);
    QVERIFY(bad.exited && bad.status != 0 && bad.err.find("gpt3") != std::string::npos);
  }

  // A flag's value gets the checks the same key gets in a config file: one error line, before
  // any work (--print-config would otherwise print the bad config and exit 0).
  void jobFlagsAreCheckedLikeConfigKeys() {
    if (std::string(HH_CLI_BINARY).empty()) QSKIP("the hedgehog CLI is not built (CLI11 missing)");
    Scratch scratch;
    const std::string teacher = std::string(HH_FIXTURES_DIR) + "/tiny-random-gpt2";
    const std::vector<std::pair<std::vector<std::string>, std::string>> cases{
        {{"distill", teacher, "--loss", "mse"}, "distill config: loss must be"},
        {{"distill", teacher, "--feature-map", "relu6"}, "relu6"},
        {{"distill", teacher, "--layers", "-1"}, "layer -1"},
        {{"finetune", teacher, "--mode", "half"}, "mode must be"},
        {{"train", "--feature-map", "relu6"}, "relu6"},
        {{"convert", teacher, "--feature-map", "relu6"}, "relu6"},
        // Counts of 0 or below, NaN and infinity fell back to the default silently (the flags
        // took effect only when > 0), and rule/layers without a linear map were ignored.
        {{"train", "--batch-size", "0"}, "batch_size"},
        {{"train", "--lr", "inf"}, "--lr: must be a finite number"},
        {{"train", "--max-train", "-7"}, "max_train_sequences"},
        {{"train", "--rule", "delta"}, "rule and layers apply to a linear feature_map"},
        {{"distill", teacher, "--window", "-5"}, "window"},
        {{"finetune", teacher, "--lora-rank", "0"}, "lora_rank"},
        {{"finetune", teacher, "--lora-alpha", "nan"}, "--lora-alpha: must be a finite number"},
        {{"evaluate", teacher, "--seq-len", "0"}, "sequence_length"},
        {{"convert", teacher, "--distill-steps", "-3"}, "steps"},
        {{"rank", teacher, "--probe-rows", "0"}, "probe_rows"}};
    for (const auto& [args, needle] : cases) {
      auto argv = args;
      argv.push_back("--print-config");
      const auto r = runCli(argv, scratch.path, 0, false);
      const std::string what = args[0] + " " + args[args.size() - 2] + " " + args.back() + ": ";
      QVERIFY2(r.exited && r.status == 1, (what + "exit " + std::to_string(r.status) + ", stdout " + r.out).c_str());
      QVERIFY2(r.err.rfind("hedgehog: error:", 0) == 0 && r.err.find(needle) != std::string::npos &&
                   r.err.find('\n') == r.err.size() - 1,
               (what + r.err).c_str());
    }
  }

  // The other verbs' flags: each bad value is one error line naming the flag, before any work
  // (they ended in Torch's errors naming no flag, or ran: probe --pairs 0 printed accuracy 0 over
  // no answers; an empty --run-dir wrote into the default folder; rank --keep 10 of 5 layers
  // proposed a plan converting nothing; preflight on a missing folder exited 3 with no error).
  void verbFlagsAreChecked() {
    if (std::string(HH_CLI_BINARY).empty()) QSKIP("the hedgehog CLI is not built (CLI11 missing)");
    Scratch scratch;
    const std::string gpt2 = std::string(HH_FIXTURES_DIR) + "/tiny-random-gpt2";
    const std::string llama = std::string(HH_FIXTURES_DIR) + "/stories260K";
    const std::string bert = std::string(HH_FIXTURES_DIR) + "/bert-tiniest";
    const std::string latin1 = scratch.path + "/latin1.txt";
    std::ofstream(latin1) << "caf\xe9 na\xefve r\xe9sum\xe9\n";
    const std::vector<std::pair<std::vector<std::string>, std::string>> cases{
        {{"probe", llama, "--trials", "0"}, "--trials"},
        {{"probe", llama, "--task", "mqar", "--pairs", "0"}, "--pairs"},
        {{"probe", llama, "--task", "mqar", "--needle", "3"}, "--needle and --cue are passkey's"},
        {{"parity", "--lengths", "0"}, "--lengths"},
        {{"parity", "--head-dim", "-2"}, "--head-dim"},
        {{"preflight", scratch.path + "/no_such_folder"}, "no_such_folder"},
        {{"rank", gpt2, "--keep", "10"}, "keep 10 of 5 layers"},
        {{"rank", gpt2, "--run-dir", ""}, "--run-dir: an empty value"},
        {{"distill", gpt2, "--corpus", ""}, "--corpus: an empty value"},
        {{"distill", gpt2, "--corpus", std::string(HH_FIXTURES_DIR) + "/tinystories/valid-sample.txt"},
         "is a single document"},
        {{"generate", llama, "-p", "Once", "--top-k", "5"}, "--top-k shapes sampling, but temperature 0"},
        {{"generate", llama, "-p", "Once", "--seed", "3"}, "--seed shapes sampling"},
        {{"generate", llama, "-p", "Once", "--samples", "3", "-o", scratch.path + "/s.jsonl"}, "the same greedy text"},
        {{"generate", bert, "-p", "hello world"}, "is not a causal LM"},
        {{"inspect", llama, "--text-file", latin1}, "latin1.txt:1: not UTF-8"}};
    for (const auto& [args, needle] : cases) {
      const auto r = runCli(args, scratch.path, 0, false);
      std::string what;
      for (const auto& arg : args) what += arg + " ";
      QVERIFY2(r.exited && r.status == 1, (what + ": exit " + std::to_string(r.status) + ", " + r.err).c_str());
      QVERIFY2(r.err.rfind("hedgehog: error:", 0) == 0 && r.err.find(needle) != std::string::npos &&
                   r.err.find('\n') == r.err.size() - 1,
               (what + ": " + r.err).c_str());
      QVERIFY2(r.out.empty(), (what + ": printed " + r.out).c_str());  // e.g. generate's prompt before the refusal
    }
  }

  // generate: --stop takes a vocabulary piece that the tokenizer would frame ("." under
  // SentencePiece), and a rotary model says where the text leaves its trained positions.
  // inspect: a text past the positions is cut with a note, BERT's [SEP] kept at the end.
  void generateAndInspectAtTheEdges() {
    if (std::string(HH_CLI_BINARY).empty()) QSKIP("the hedgehog CLI is not built (CLI11 missing)");
    Scratch scratch;
    const std::string llama = std::string(HH_FIXTURES_DIR) + "/stories260K";
    const std::string bert = std::string(HH_FIXTURES_DIR) + "/bert-tiniest";
    auto r =
        runCli({"generate", llama, "-p", "Once upon a time", "-n", "4", "--stop", ".", "-q"}, scratch.path, 0, false);
    QVERIFY2(r.exited && r.status == 0, r.err.c_str());
    r = runCli({"generate", llama, "-p", "Once", "-n", "600", "--ignore-eos", "-q"}, scratch.path, 0, false);
    QVERIFY2(r.exited && r.status == 0, r.err.c_str());
    QVERIFY2(r.err.find("was trained on 512 positions; tokens generated past them") != std::string::npos,
             r.err.c_str());
    const std::string text = scratch.path + "/long.txt", out = scratch.path + "/long.safetensors";
    {
      std::ofstream file(text);
      for (int i = 0; i < 400; ++i) file << "hello world ";
    }
    r = runCli({"inspect", bert, "--text-file", text, "--out", out}, scratch.path, 0, false);
    QVERIFY2(r.exited && r.status == 0, r.err.c_str());
    QVERIFY2(r.err.find("cut to the model's 512 positions") != std::string::npos, r.err.c_str());
    const auto file = hh::io::SafetensorsFile::open(out);
    const auto ids = hh::models::readTensor(file, "input_ids", torch::kLong);
    QCOMPARE(ids.size(1), int64_t(512));
    QCOMPARE(ids[0][511].item<int64_t>(), int64_t(102));  // [SEP]
    QVERIFY(file.metadata().at("text").size() < 4800);    // what ran, not the whole file
  }

  // generate --cuda-graph: a softmax model decodes step by step and says so; a Hedgehog model on
  // a machine without CUDA graphs (this CPU build) is refused with the reason, in one line.
  void generateCudaGraphSaysWhatItCannotDo() {
    if (std::string(HH_CLI_BINARY).empty()) QSKIP("the hedgehog CLI is not built (CLI11 missing)");
    Scratch scratch;
    const std::string teacher = std::string(HH_FIXTURES_DIR) + "/tiny-random-gpt2";
    const auto soft =
        runCli({"generate", teacher, "--prompt", "The cat", "--max-new-tokens", "3", "--cuda-graph", "--device", "cpu"},
               scratch.path, 0, false);
    QVERIFY2(soft.exited && soft.status == 0, soft.err.c_str());
    QVERIFY2(soft.err.find("--cuda-graph: " + teacher + " has softmax layers") != std::string::npos, soft.err.c_str());
    auto model = hh::models::loadModel(teacher);
    hh::attn::LinearAttentionConfig hedgehog;
    hedgehog.featureMap.kind = hh::attn::FeatureMapKind::Hedgehog;
    model->setAttentionPlan(hh::models::AttentionPlan::uniform(model->layerCount(), hedgehog));
    const std::string converted = scratch.path + "/hedgehog";
    hh::models::saveModel(*model, converted, teacher);
    const auto r = runCli({"generate", converted, "--prompt", "The cat", "-n", "3", "--cuda-graph", "--device", "cpu"},
                          scratch.path, 0, false);
    QVERIFY(r.exited && r.status != 0);
    QVERIFY2(r.err.find("CUDA graph needs") != std::string::npos, r.err.c_str());
  }
};

HH_TEST_SUITE(TestBadInputsCli, "app.cli.bad_inputs", &TestBadInputsCli::initTestCase,
              &TestBadInputsCli::catalogueIsWellFormed, &TestBadInputsCli::everyBadInputFailsWithOneLineNamingTheFile,
              &TestBadInputsCli::runInfoDescribesARun, &TestBadInputsCli::resumeRefusesAnotherPlanAndEndedRuns,
              &TestBadInputsCli::benchRunsAShapeInBf16, &TestBadInputsCli::jobFlagsAreCheckedLikeConfigKeys,
              &TestBadInputsCli::verbFlagsAreChecked, &TestBadInputsCli::generateCudaGraphSaysWhatItCannotDo,
              &TestBadInputsCli::generateAndInspectAtTheEdges)

}  // namespace test_bad_inputs_cli

#if HH_HAVE_QTEST
#include "test_bad_inputs_cli.moc"
#endif
