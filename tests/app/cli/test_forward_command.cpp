// app.cli.forward: `hedgehog forward` as a user runs it, in a child process.
//   - an ids file whose attention_mask or token_type_ids does not match input_ids (shape, values)
//     is refused in one line naming that file, before the model runs (they reached the model and
//     ended in Torch's stack trace);
//   - an error raised inside Torch (BERT given more tokens than its positions) is one line
//     without the C++ stack trace;
//   - --compare: a reference holding a NaN is a mismatch (exit 2; it printed MISMATCH and exited
//     0), and an empty batch compares equal instead of failing in max().
#include <torch/torch.h>

#include <limits>
#include <string>
#include <vector>

#include "engine/models/tensor_file.h"
#include "tests/support/child_process.h"
#include "tests/support/hh_test.h"
#include "tests/support/temp_dir.h"

namespace test_forward_command {

namespace {

using hh::test::crash::readAll;

struct CliRun {
  int status = -1;
  std::string out, err;
};

CliRun runForward(const hh::test::TempDir& dir, const std::vector<std::string>& args) {
  std::vector<std::string> argv{HH_CLI_BINARY, "forward"};
  argv.insert(argv.end(), args.begin(), args.end());
  const auto out = dir.file("stdout"), err = dir.file("stderr");
  std::remove(out.c_str());
  std::remove(err.c_str());
  CliRun r;
  r.status = hh::test::crash::waitFor(hh::test::crash::spawnLogged(argv, out, err), 120);
  r.out = readAll(out);
  r.err = readAll(err);
  return r;
}

// An ids file with `tensors` (input_ids first).
std::string idsFile(const hh::test::TempDir& dir, const std::string& name,
                    const std::vector<std::pair<std::string, torch::Tensor>>& tensors) {
  const auto path = dir.file(name);
  hh::models::writeTensorFile(path, tensors);
  return path;
}

bool isOneErrorLine(const std::string& err) {
  return err.rfind("hedgehog: error:", 0) == 0 && err.find('\n') == err.size() - 1 &&
         err.find("Exception raised from") == std::string::npos && err.find("frame #") == std::string::npos;
}

const std::string kLlama = std::string(HH_FIXTURES_DIR) + "/stories260K";
const std::string kBert = std::string(HH_FIXTURES_DIR) + "/bert-tiniest";

}  // namespace

class TestForwardCommand : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void initTestCase() {
    if (std::string(HH_CLI_BINARY).empty()) QSKIP("the hedgehog CLI is not built (CLI11 missing)");
  }

  void mismatchedInputsNameTheFile() {
    hh::test::TempDir dir("forward_inputs");
    const auto ids = torch::tensor({{1, 2, 3, 4}}, torch::kLong);
    const std::vector<std::tuple<std::string, std::string, std::string, torch::Tensor, std::string>> cases{
        {"mask_shape.safetensors", kLlama, "attention_mask", torch::ones({1, 3}, torch::kLong),
         "is [1, 3], not [B, T]"},
        {"mask_values.safetensors", kLlama, "attention_mask", torch::full({1, 4}, -1, torch::kLong),
         "must lie in [0, 2)"},
        {"types_shape.safetensors", kBert, "token_type_ids", torch::zeros({2, 4}, torch::kLong),
         "is [2, 4], not [B, T]"},
        {"types_values.safetensors", kBert, "token_type_ids", torch::full({1, 4}, 5, torch::kLong),
         "must lie in [0, 2)"}};
    for (const auto& [name, model, key, tensor, needle] : cases) {
      const auto path = idsFile(dir, name, {{"input_ids", ids}, {key, tensor}});
      const auto r = runForward(dir, {model, "--ids", path, "--out", dir.file("out.safetensors")});
      QVERIFY2(r.status == 1 && isOneErrorLine(r.err), (name + ": " + r.err).c_str());
      QVERIFY2(r.err.find(path) != std::string::npos && r.err.find(needle) != std::string::npos, r.err.c_str());
    }
  }

  void torchErrorsAreOneLine() {
    hh::test::TempDir dir("forward_torch_error");
    const auto path = idsFile(dir, "long.safetensors", {{"input_ids", torch::ones({1, 600}, torch::kLong)}});
    const auto r = runForward(dir, {kBert, "--ids", path, "--out", dir.file("out.safetensors")});
    QVERIFY2(r.status == 1 && isOneErrorLine(r.err), r.err.c_str());
    QVERIFY2(r.err.find("longer than max_position_embeddings = 512") != std::string::npos, r.err.c_str());
  }

  void compareCatchesNanAndTakesEmptyBatches() {
    hh::test::TempDir dir("forward_compare");
    const auto ids = idsFile(dir, "ids.safetensors", {{"input_ids", torch::tensor({{1, 2, 3, 4}}, torch::kLong)}});
    const auto out = dir.file("out.safetensors");
    const auto first = runForward(dir, {kLlama, "--ids", ids, "--out", out});
    QVERIFY2(first.status == 0, first.err.c_str());
    const auto same = runForward(dir, {kLlama, "--ids", ids, "--out", dir.file("again.safetensors"), "--compare", out});
    QVERIFY2(same.status == 0 && same.out.find("(within 1e-4)") != std::string::npos, same.out.c_str());

    auto logits = torch::zeros({1, 4, 512});
    logits[0][1][7] = std::numeric_limits<float>::quiet_NaN();
    const auto nanRef = idsFile(dir, "nan_ref.safetensors", {{"logits", logits}});
    const auto nan = runForward(dir, {kLlama, "--ids", ids, "--out", dir.file("o2.safetensors"), "--compare", nanRef});
    QVERIFY2(nan.status == 2 && nan.out.find("(MISMATCH)") != std::string::npos, nan.out.c_str());

    const auto empty = idsFile(dir, "empty.safetensors", {{"input_ids", torch::zeros({1, 0}, torch::kLong)}});
    const auto emptyOut = dir.file("empty_out.safetensors");
    QCOMPARE(runForward(dir, {kLlama, "--ids", empty, "--out", emptyOut}).status, 0);
    const auto twice =
        runForward(dir, {kLlama, "--ids", empty, "--out", dir.file("o3.safetensors"), "--compare", emptyOut});
    QVERIFY2(twice.status == 0 && twice.err.empty(), twice.err.c_str());
  }
};

HH_TEST_SUITE(TestForwardCommand, "app.cli.forward", &TestForwardCommand::initTestCase,
              &TestForwardCommand::mismatchedInputsNameTheFile, &TestForwardCommand::torchErrorsAreOneLine,
              &TestForwardCommand::compareCatchesNanAndTakesEmptyBatches)

}  // namespace test_forward_command

#if HH_HAVE_QTEST
#include "test_forward_command.moc"
#endif
