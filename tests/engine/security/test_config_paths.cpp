// engine.security.config_paths: an output folder named in a config file ("run_dir",
// "output_dir", at any depth) may not go up with ".."; the error is one line naming the file, the
// key and the value. Plain relative folders (resolved against the working folder) still read.
// The CLI prints that line for `hedgehog convert --config evil.json` and exits non-zero, while
// the same folder given as --run-dir is taken as typed.
#include <filesystem>
#include <fstream>
#include <string>

#include "engine/config/config_file.h"
#include "tests/support/child_process.h"
#include "tests/support/temp_dir.h"
#include "tests/support/hh_test.h"

namespace test_config_paths {

namespace {

namespace fs = std::filesystem;
namespace c = hh::test::crash;
using json = nlohmann::json;

std::string write(const hh::test::TempDir& dir, const std::string& name, const json& j) {
  const auto path = dir.file(name);
  std::ofstream(path) << j.dump(2);
  return path;
}

class TestConfigPaths : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void parentFoldersAreRefused() {
    hh::test::TempDir dir("config_paths");
    const auto top = write(dir, "top.json", {{"model", "m"}, {"run_dir", "../elsewhere"}});
    HH_VERIFY_THROWS_WITH(hh::jobs::readConfigFile(top, "convert"), top + ": \"run_dir\" is \"../elsewhere\"");
    const auto inner = write(dir, "inner.json", {{"run_dir", "runs/a/../../../b"}});
    HH_VERIFY_THROWS_WITH(hh::jobs::readConfigFile(inner, "distill"), "may not go up with '..'");
    // A section of a project (the key at depth), and output_dir.
    const auto nested = write(dir, "nested.json", {{"finetune", {{"output_dir", "model/../../x"}}}});
    HH_VERIFY_THROWS_WITH(hh::jobs::readConfigFile(nested, "finetune"), "\"output_dir\"");
    const auto variant = write(dir, "variants.json", json::parse(R"({"variants": [{"name": "a", "set": {"output_dir": ".."}}]})"));
    HH_VERIFY_THROWS_WITH(hh::jobs::readConfigFile(variant, ""), variant);
  }

  void plainFoldersRead() {
    hh::test::TempDir dir("config_paths_ok");
    const auto ok = write(dir, "ok.json", {{"run_dir", "runs/demo"}, {"output_dir", "runs/demo/model"}, {"note", "../not a path key"}});
    QCOMPARE(hh::jobs::readConfigFile(ok, "convert").at("run_dir").get<std::string>(), std::string("runs/demo"));
    const auto dots = write(dir, "dots.json", {{"run_dir", "runs/v1..v2"}});  // ".." inside a name is not a parent
    QCOMPARE(hh::jobs::readConfigFile(dots, "").at("run_dir").get<std::string>(), std::string("runs/v1..v2"));
  }

  // An absolute folder must lie inside the working folder or the file's own folder.
  void absoluteFoldersStayInside() {
    hh::test::TempDir dir("config_paths_abs");
    const auto own = write(dir, "own.json", {{"run_dir", dir.file("runs/a")}});
    QCOMPARE(hh::jobs::readConfigFile(own, "").at("run_dir").get<std::string>(), dir.file("runs/a"));
    const auto working = (fs::current_path() / "runs" / "x").string();
    const auto cwd = write(dir, "cwd.json", {{"output_dir", working}});
    QCOMPARE(hh::jobs::readConfigFile(cwd, "").at("output_dir").get<std::string>(), working);
    const auto outside = write(dir, "outside.json", {{"convert", {{"run_dir", "/etc/hedgehog-escape"}}}});
    HH_VERIFY_THROWS_WITH(hh::jobs::readConfigFile(outside, "convert"),
                          outside + ": \"run_dir\" is \"/etc/hedgehog-escape\": an absolute folder");
    // A sibling whose name merely starts with the file's folder name is outside it.
    const auto sibling = write(dir, "sibling.json", {{"run_dir", dir.path() + "-other/runs"}});
    HH_VERIFY_THROWS_WITH(hh::jobs::readConfigFile(sibling, ""), "must lie inside");
  }

  void cliPrintsTheRefusal() {
    if (!fs::exists(HH_CLI_BINARY)) QSKIP("the hedgehog CLI is not built");
    hh::test::TempDir dir("config_paths_cli");
    const auto evil = write(dir, "evil.json", {{"model", std::string(HH_FIXTURES_DIR) + "/tiny-random-gpt2"}, {"run_dir", "../../escape"}});
    const int rc = c::waitFor(c::spawnLogged({HH_CLI_BINARY, "convert", "--config", evil}, dir.file("log.txt")), 60);
    const auto out = c::readAll(dir.file("log.txt"));
    QVERIFY2(rc != 0, out.c_str());
    QVERIFY2(out.find(evil + ": \"run_dir\" is \"../../escape\"") != std::string::npos, out.c_str());
    QVERIFY(!fs::exists("../../escape"));  // the CLI runs in our working folder: nothing was created
  }
};

}  // namespace

HH_TEST_SUITE(TestConfigPaths, "engine.security.config_paths", &TestConfigPaths::parentFoldersAreRefused,
              &TestConfigPaths::plainFoldersRead, &TestConfigPaths::absoluteFoldersStayInside,
              &TestConfigPaths::cliPrintsTheRefusal)

}  // namespace test_config_paths

#if HH_HAVE_QTEST
#include "test_config_paths.moc"
#endif
