// Fuzz target: a run file (HDF5) opened by RunReader and everything in it read: the header and
// layout, every scalar and table series, every snapshot, curve set and weight checkpoint, the log
// and the status history. The HDF5 library parses the file's metadata; RunReader checks every
// shape against the layout before a read. Seed: HH_FUZZ_WRITE_SEED=FILE makes this program write
// a small valid run file there and exit (scripts/fuzz.sh does so before the run).
#include <cstdlib>
#include <exception>
#include <string>

#include "engine/runs/run_reader.h"
#include "engine/runs/run_writer.h"
#include "fuzz/fuzz_support.h"

namespace {

void writeSeed(const std::string& path) {
  hh::runs::RunHeader h;
  h.runId = "seed";
  h.kind = "distill";
  h.configJson = R"({"model": "m", "feature_map": "hedgehog"})";
  h.engineVersion = "0.1.0";
  h.device = "cpu";
  h.layout.scalars = {{"loss", "nats"}, {"lr"}};
  h.layout.layers = 1;
  h.layout.heads = 2;
  h.layout.tables = {{"kl", "nats"}};  // (no curves: their chunks would make the seed 0.5 MB)
  h.layout.snapshots.pairs = {{0, 1}};
  h.layout.snapshots.tokens = {"a", "b", "c"};
  h.layout.snapshots.size = 3;
  h.layout.weights = {{"w", {2}}};
  auto w = hh::runs::RunWriter::create(path, h);
  for (int s = 0; s < 3; ++s) {
    w.appendScalars(s, {{"loss", 1.0 / (s + 1)}, {"lr", 0.01}});
    w.appendTable(s, "kl", {0.1, 0.2});
    w.log("step " + std::to_string(s), s);
  }
  w.appendSnapshot(2, std::vector<float>(9, 0.5f), std::vector<float>(9, 0.25f));
  w.appendWeights(2, {{"w", {1.0f, 2.0f}}});
  w.setStatus(hh::runs::RunStatus::Completed, "done");
  w.close();
}

void readEverything(const std::string& path) {
  auto r = hh::runs::RunReader::open(path);
  const auto& layout = r.header().layout;
  for (const auto& s : layout.scalars) r.scalars(s.name);
  for (const auto& t : layout.tables) r.table(t.name);
  for (int64_t i = 0; i < r.snapshotCount(); ++i) r.snapshot(i);
  for (int64_t i = 0; i < r.curveCount(); ++i) r.curves(i);
  for (const auto& w : layout.weights)
    for (int64_t i = 0; i < r.weightCount(w.name); ++i) r.weights(w.name, i);
  r.logLines();
  r.statusHistory();
  r.exports();
  r.refresh();
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  if (const char* seed = std::getenv("HH_FUZZ_WRITE_SEED")) {
    writeSeed(seed);
    std::exit(0);
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = hh::fuzz::scratchDir("run_file") + "/run.h5";
  hh::fuzz::writeFile(path, hh::fuzz::asText(data, size));
  try {
    readEverything(path);
  } catch (const std::exception& e) {
    hh::fuzz::requireNamesFile(e, path, {"run.h5"});
  }
  return 0;
}
