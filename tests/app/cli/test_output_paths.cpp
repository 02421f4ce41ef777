// app.cli.output_paths: what the verbs write never replaces what they read, and a failed run
// leaves an earlier output as it was. Each case was a fault of the CLI:
//   - inspect --out, generate --output and bench --save-batch inside the model folder replaced the
//     model's own files (model.safetensors, config.json); they are refused, the model intact;
//   - export onto the model folder it exports is refused (it deleted the folder's other files);
//   - generate --output and --timings were truncated before the run could fail (-n 0): now
//     written whole at the end, an earlier file kept on failure.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tests/support/child_process.h"
#include "tests/support/hh_test.h"
#include "tests/support/temp_dir.h"

namespace test_output_paths {

namespace {

namespace fs = std::filesystem;
using hh::test::crash::readAll;

struct CliRun {
  int status = -1;
  std::string err;
};

CliRun run(const hh::test::TempDir& dir, std::vector<std::string> args) {
  args.insert(args.begin(), HH_CLI_BINARY);
  const auto out = dir.file("stdout"), err = dir.file("stderr");
  fs::remove(err);
  CliRun r;
  r.status = hh::test::crash::waitFor(hh::test::crash::spawnLogged(args, out, err), 120);
  r.err = readAll(err);
  return r;
}

// A copy of a fixture model under `dir`, so that a fault could only damage the copy.
std::string modelCopy(const hh::test::TempDir& dir, const std::string& fixture) {
  const auto to = dir.file(fixture);
  fs::copy(std::string(HH_FIXTURES_DIR) + "/" + fixture, to, fs::copy_options::recursive);
  return to;
}

bool refused(const CliRun& r, const std::string& needle) {
  return r.status == 1 && r.err.rfind("hedgehog: error:", 0) == 0 && r.err.find(needle) != std::string::npos;
}

}  // namespace

class TestOutputPaths : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void initTestCase() {
    if (std::string(HH_CLI_BINARY).empty()) QSKIP("the hedgehog CLI is not built (CLI11 missing)");
  }

  void outputsInsideTheModelAreRefused() {
    hh::test::TempDir dir("output_paths_inside");
    const auto gpt2 = modelCopy(dir, "tiny-random-gpt2"), llama = modelCopy(dir, "stories260K");
    const auto weights = readAll(gpt2 + "/model.safetensors"), config = readAll(llama + "/config.json");
    auto r = run(dir, {"inspect", gpt2, "--text", "the cat sat", "--out", gpt2 + "/model.safetensors"});
    QVERIFY2(refused(r, "--out would write inside the model folder"), r.err.c_str());
    r = run(dir, {"generate", llama, "-p", "Once", "-n", "3", "--samples", "2", "-o", llama + "/config.json"});
    QVERIFY2(refused(r, "--output would write inside the model folder"), r.err.c_str());
    r = run(dir, {"bench", gpt2, "--seq-len", "16", "--save-batch", gpt2 + "/model.safetensors"});
    QVERIFY2(refused(r, "--save-batch would write inside the model folder"), r.err.c_str());
    QVERIFY(readAll(gpt2 + "/model.safetensors") == weights);
    QVERIFY(readAll(llama + "/config.json") == config);

    fs::remove(gpt2 + "/reference.safetensors");  // leave only what a saved model holds
    r = run(dir, {"export", gpt2, "-o", gpt2});
    QVERIFY2(refused(r, "is the model folder being exported"), r.err.c_str());
    QVERIFY(readAll(gpt2 + "/model.safetensors") == weights);
  }

  void failedGenerationKeepsEarlierFiles() {
    hh::test::TempDir dir("output_paths_generate");
    const std::string llama = std::string(HH_FIXTURES_DIR) + "/stories260K";
    const auto samples = dir.file("samples.jsonl"), timings = dir.file("timings.csv");
    for (const auto& path : {samples, timings}) {
      std::ofstream(path) << "an earlier run's output\n";
    }
    auto r = run(dir, {"generate", llama, "-p", "Once", "-n", "0", "--samples", "2", "-o", samples});
    QVERIFY2(refused(r, "--max-tokens must be at least 1"), r.err.c_str());
    r = run(dir, {"generate", llama, "-p", "Once", "-n", "0", "-q", "--timings", timings});
    QVERIFY2(refused(r, "--max-tokens must be at least 1"), r.err.c_str());
    QCOMPARE(readAll(samples), std::string("an earlier run's output\n"));
    QCOMPARE(readAll(timings), std::string("an earlier run's output\n"));

    r = run(dir, {"generate", llama, "-p", "Once", "-n", "3", "-q", "--timings", timings});
    QVERIFY2(r.status == 0, r.err.c_str());
    const auto csv = readAll(timings);
    QVERIFY2(csv.rfind("model,index,position,token,ms,cache_bytes,rss_bytes\n", 0) == 0 &&
                 std::count(csv.begin(), csv.end(), '\n') == 4,  // the header and three tokens
             csv.c_str());
  }
};

HH_TEST_SUITE(TestOutputPaths, "app.cli.output_paths", &TestOutputPaths::initTestCase,
              &TestOutputPaths::outputsInsideTheModelAreRefused, &TestOutputPaths::failedGenerationKeepsEarlierFiles)

}  // namespace test_output_paths

#if HH_HAVE_QTEST
#include "test_output_paths.moc"
#endif
