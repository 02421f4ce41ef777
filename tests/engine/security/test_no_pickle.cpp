// engine.security.no_pickle: nothing the project ships loads or writes pickles. Weight files
// with pickle extensions are refused (engine.models.bad_checkpoints); here (1) no source under
// engine/ or app/ calls torch::save, torch::load, torch::jit::load or the pickle helpers (the
// jobs' checkpoints are safetensors, engine/jobs/training_checkpoint.h), and (2) a run folder
// holding only an old pickle checkpoint is refused on resume with an error naming it, never
// loaded, and a checkpoint whose tensors do not match the live parameters is refused naming the
// file and the tensor, one written with another weight decay is refused (a resume continues the
// same optimizer), and one whose metadata is bad changes nothing.

#include <torch/optim/adamw.h>
#include <torch/types.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <regex>
#include <sstream>
#include <string>

#include "engine/io/safetensors.h"
#include "engine/jobs/training_checkpoint.h"
#include "engine/models/tensor_file.h"
#include "tests/support/temp_dir.h"
#include "tests/support/hh_test.h"

namespace test_no_pickle {

namespace {

namespace fs = std::filesystem;

class TestNoPickle : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void sourcesCallNoPickleSerializer() {
    // torch::save(...), torch::load(...), torch::jit::load(...), jit::load(...), pickle_load/save.
    const std::regex call(R"((torch\s*::\s*(save|load)|jit\s*::\s*load|pickle_(load|save)|_load_for_mobile)\s*\()");
    int files = 0;
    std::string found;
    for (const char* top : {"engine", "app"}) {
      for (const auto& entry : fs::recursive_directory_iterator(fs::path(HH_SOURCE_DIR) / top)) {
        const auto ext = entry.path().extension();
        if (!entry.is_regular_file() || (ext != ".cpp" && ext != ".h" && ext != ".cu" && ext != ".hpp")) continue;
        ++files;
        std::ifstream in(entry.path());
        std::string line;
        for (int n = 1; std::getline(in, line); ++n)
          if (std::regex_search(line, call)) found += entry.path().string() + ":" + std::to_string(n) + ": " + line + "\n";
      }
    }
    QVERIFY(files > 50);  // the walk found the sources
    QVERIFY2(found.empty(), ("pickle serializer calls (use safetensors, engine/jobs/training_checkpoint.h):\n" + found).c_str());
    // The pattern does catch the calls it is there for.
    QVERIFY(std::regex_search(std::string("  torch::save(optimizer, path);"), call));
    QVERIFY(std::regex_search(std::string("auto m = torch::jit::load(p);"), call));
    QVERIFY(std::regex_search(std::string("torch::load(optimizer, checkpointFile);"), call));
  }

  void legacyPickleCheckpointIsRefused() {
    hh::test::TempDir dir("no_pickle_legacy");
    std::ofstream(dir.file("checkpoint.pt")) << "PK\x03\x04 not loaded";
    HH_VERIFY_THROWS_WITH(hh::jobs::refuseLegacyCheckpoint(dir.path(), dir.file("checkpoint.safetensors")), "checkpoint.pt");
    // With the safetensors checkpoint present the old file is ignored, not refused.
    std::ofstream(dir.file("checkpoint.safetensors")) << "x";
    hh::jobs::refuseLegacyCheckpoint(dir.path(), dir.file("checkpoint.safetensors"));
  }

  void checkpointRoundTripsAndValidates() {
    hh::test::TempDir dir("no_pickle_checkpoint");
    auto a = torch::randn({3, 4}).requires_grad_(), b = torch::randn({5}).requires_grad_();
    torch::optim::AdamW optimizer({a, b}, torch::optim::AdamWOptions(0.01).weight_decay(0.1));
    for (int i = 0; i < 3; ++i) {
      optimizer.zero_grad();
      (a.pow(2).sum() + b.sin().sum()).backward();
      optimizer.step();
    }
    const auto path = dir.file("checkpoint.safetensors");
    hh::jobs::saveTrainingCheckpoint(path, optimizer, {{"step", 3}, {"best_loss", std::numeric_limits<double>::infinity()}});
    QVERIFY(fs::exists(dir.file("checkpoint.json")));
    // Into fresh tensors and a fresh optimizer: values and moments come back bit for bit, and the
    // next step is the same as the original optimizer's.
    auto a2 = torch::zeros({3, 4}).requires_grad_(), b2 = torch::zeros({5}).requires_grad_();
    torch::optim::AdamW restored({a2, b2}, torch::optim::AdamWOptions(0.5).weight_decay(0.1));
    const auto counters = hh::jobs::loadTrainingCheckpoint(path, restored);
    QCOMPARE(counters.at("step").get<int>(), 3);
    QVERIFY(std::isinf(hh::jobs::counterNumber(counters, "best_loss", std::numeric_limits<double>::infinity())));
    QVERIFY(torch::equal(a2, a) && torch::equal(b2, b));
    for (auto* opt : {&optimizer, &restored}) {
      opt->zero_grad();
      auto& p = opt->param_groups()[0].params();
      (p[0].pow(2).sum() + p[1].sin().sum()).backward();
      opt->step();
    }
    QVERIFY(torch::equal(a2, a) && torch::equal(b2, b));
    // A model whose parameters differ in shape is refused, naming the file and the tensor.
    auto c = torch::zeros({4, 3}).requires_grad_(), d = torch::zeros({5}).requires_grad_();
    // An optimizer with another weight decay is refused (a resume continues the same optimizer).
    auto a3 = torch::zeros({3, 4}).requires_grad_(), b3 = torch::zeros({5}).requires_grad_();
    torch::optim::AdamW decayChanged({a3, b3}, torch::optim::AdamWOptions(0.01));
    HH_VERIFY_THROWS_WITH(hh::jobs::loadTrainingCheckpoint(path, decayChanged), "weight_decay 0.1");
    QVERIFY(torch::equal(a3, torch::zeros({3, 4})));  // nothing was changed
    torch::optim::AdamW other({c, d}, torch::optim::AdamWOptions(0.01).weight_decay(0.1));
    HH_VERIFY_THROWS_WITH(hh::jobs::loadTrainingCheckpoint(path, other), "param.0");
    HH_VERIFY_THROWS_WITH(hh::jobs::loadTrainingCheckpoint(path, other), path);
    QVERIFY(torch::equal(c, torch::zeros({4, 3})));  // nothing was changed
    torch::optim::AdamW fewer({c}, torch::optim::AdamWOptions(0.01));
    HH_VERIFY_THROWS_WITH(hh::jobs::loadTrainingCheckpoint(path, fewer), "holds 2 parameters");
    // A plain safetensors file is not a checkpoint.
    hh::models::writeTensorFile(dir.file("plain.safetensors"), {{"param.0", torch::zeros({3, 4})}});
    HH_VERIFY_THROWS_WITH(hh::jobs::loadTrainingCheckpoint(dir.file("plain.safetensors"), restored), "not a checkpoint");
  }

  // A checkpoint whose metadata goes bad after the tensors were checked (the second parameter
  // group's settings, the counters) is refused, and neither the parameters nor the first group's
  // settings have changed.
  void badMetadataChangesNothing() {
    hh::test::TempDir dir("no_pickle_bad_metadata");
    auto a = torch::randn({3, 4}).requires_grad_(), b = torch::randn({5}).requires_grad_();
    torch::optim::AdamW optimizer({torch::optim::OptimizerParamGroup({a}), torch::optim::OptimizerParamGroup({b})},
                                  torch::optim::AdamWOptions(0.01));
    const auto good = dir.file("good.safetensors");
    hh::jobs::saveTrainingCheckpoint(good, optimizer, {{"step", 1}});
    const auto file = hh::io::SafetensorsFile::open(good);
    std::vector<std::pair<std::string, torch::Tensor>> tensors;
    for (const auto& name : file.names())
      tensors.emplace_back(name,
                           hh::models::readTensor(file, name, name == "adamw.step" ? torch::kLong : torch::kFloat));
    const auto withMetadata = [&](const std::string& name, const std::string& key, const std::string& value) {
      auto metadata = file.metadata();
      metadata[key] = value;
      hh::models::writeTensorFile(dir.file(name), tensors, metadata);
      return dir.file(name);
    };
    auto groups = nlohmann::json::parse(file.metadata().at("adamw_groups"));
    groups[0]["lr"] = 0.5;
    groups[1].erase("eps");
    const auto badGroup = withMetadata("bad_group.safetensors", "adamw_groups", groups.dump());
    const auto badCounters = withMetadata("bad_counters.safetensors", "hedgehog_checkpoint", "[1, 2]");
    auto a2 = torch::zeros({3, 4}).requires_grad_(), b2 = torch::zeros({5}).requires_grad_();
    torch::optim::AdamW fresh({torch::optim::OptimizerParamGroup({a2}), torch::optim::OptimizerParamGroup({b2})},
                              torch::optim::AdamWOptions(0.02));
    HH_VERIFY_THROWS_WITH(hh::jobs::loadTrainingCheckpoint(badGroup, fresh), "\"adamw_groups\" is malformed");
    HH_VERIFY_THROWS_WITH(hh::jobs::loadTrainingCheckpoint(badCounters, fresh), "not a JSON object");
    QCOMPARE(static_cast<const torch::optim::AdamWOptions&>(fresh.param_groups()[0].options()).lr(), 0.02);
    QVERIFY(torch::equal(a2, torch::zeros({3, 4})) && torch::equal(b2, torch::zeros({5})));
    // The same tensors with good metadata load.
    hh::jobs::loadTrainingCheckpoint(good, fresh);
    QVERIFY(torch::equal(a2, a) && torch::equal(b2, b));
  }
};

}  // namespace

HH_TEST_SUITE(TestNoPickle, "engine.security.no_pickle", &TestNoPickle::sourcesCallNoPickleSerializer,
              &TestNoPickle::legacyPickleCheckpointIsRefused, &TestNoPickle::checkpointRoundTripsAndValidates,
              &TestNoPickle::badMetadataChangesNothing)

}  // namespace test_no_pickle

#if HH_HAVE_QTEST
#include "test_no_pickle.moc"
#endif
