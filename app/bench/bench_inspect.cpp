// hh_bench_inspect: the workbench inspector's work on a model folder and a text, timed and with
// the process's memory, as the inspector does it (ModelSession on one worker thread):
//   load       the model and tokenizer (resident after it = the weights and the allocator's share)
//   inspect    tokenize, one forward pass capturing q, k, per head a thumbnail and the measures
//              (the layer x head grid); peak resident during it, and the peak's excess over the
//              resident size before it
//   head       one head's full T x T maps (softmax, scores, linear for converted layers), as a
//              click on the grid asks
//   released   resident after the session is destroyed
// The bound the inspector is held to: peak <= weights + 2 x the attention maps shown (one head's
// maps in float32: softmax, scores, and linear when converted, plus the thumbnails).
//
//   hh_bench_inspect MODEL_FOLDER TEXT_FILE [--max-tokens N] [--repeat R]
#include <QFile>
#include <QString>

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>

#include "app/bench/bench_args.h"
#include "app/gui/inspector/model_session.h"
#include "engine/core/process_memory.h"

namespace {

double mb(int64_t bytes) { return double(bytes) / (1024.0 * 1024.0); }

double secondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

int benchMain(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s MODEL_FOLDER TEXT_FILE [--max-tokens N] [--repeat R]\n", argv[0]);
    return 2;
  }
  const QString folder = QString::fromLocal8Bit(argv[1]);
  QFile file(QString::fromLocal8Bit(argv[2]));
  if (!file.open(QIODevice::ReadOnly)) {
    std::fprintf(stderr, "%s: cannot read\n", argv[2]);
    return 2;
  }
  const QString text = QString::fromUtf8(file.readAll());
  int maxTokens = 1024, repeat = 3;
  // The options after the two positional arguments (argv + 2: parseOptions starts at its [1]).
  hh::bench::parseOptions(argc - 2, argv + 2, [&](const std::string& key, const std::string& value) {
    if (key == "--max-tokens")
      maxTokens = static_cast<int>(hh::bench::parseCount(key, value, 1, 1 << 20));
    else if (key == "--repeat")
      repeat = static_cast<int>(hh::bench::parseCount(key, value, 1, 10000));
    else
      return false;
    return true;
  });

  const int64_t base = hh::residentBytes();
  hh::resetPeakResident();
  auto session = std::make_unique<hh::gui::ModelSession>();
  auto start = std::chrono::steady_clock::now();
  QString error;
  const auto summary = session->load(folder, &error);
  if (summary.folder.isEmpty()) {
    std::fprintf(stderr, "%s\n", qPrintable(error));
    return 1;
  }
  const int64_t loaded = hh::residentBytes(), loadPeak = hh::peakResidentBytes();
  std::printf("model: %s (%lld parameters)\n", qPrintable(summary.description), (long long)summary.parameters);
  std::printf("load: %.2f s, resident %.0f MB (%.0f MB above the process before it), peak %.0f MB\n", secondsSince(start),
              mb(loaded), mb(loaded - base), mb(loadPeak));

  for (int r = 0; r < repeat; ++r) {
    const int64_t before = hh::residentBytes();
    hh::resetPeakResident();
    start = std::chrono::steady_clock::now();
    const auto result = session->inspect(text, maxTokens);
    const double seconds = secondsSince(start);
    if (!result.error.isEmpty()) {
      std::fprintf(stderr, "inspect: %s\n", qPrintable(result.error));
      return 1;
    }
    const int64_t peak = hh::peakResidentBytes();
    std::printf("inspect %d: %d tokens, %d x %d heads: %.2f s (forward %.2f s); peak %.0f MB, %.0f MB above before; "
                "resident after %.0f MB\n",
                r + 1, result.length, result.layers, result.heads, seconds, result.forwardMilliseconds / 1000, mb(peak),
                mb(peak - before), mb(hh::residentBytes()));
  }

  const int64_t before = hh::residentBytes();
  hh::resetPeakResident();
  start = std::chrono::steady_clock::now();
  const auto maps = session->headMaps(summary.layers - 1, 0);
  const double headSeconds = secondsSince(start);
  if (!maps.error.isEmpty()) {
    std::fprintf(stderr, "head: %s\n", qPrintable(maps.error));
    return 1;
  }
  const size_t cells = maps.softmax->size() + maps.scores.size() + (maps.linear ? maps.linear->size() : 0);
  const double shown = mb(int64_t(cells) * 4);
  std::printf("head maps (layer %d, head 0): %.2f s; %.0f MB of maps shown; peak %.0f MB above before\n", summary.layers - 1,
              headSeconds, shown, mb(hh::peakResidentBytes() - before));
  session.reset();
  std::printf("released: resident %.0f MB after the session is gone (%.0f MB before loading)\n", mb(hh::residentBytes()),
              mb(base));
  return 0;
}

int main(int argc, char** argv) {
  return hh::bench::reportErrors(
      "hh_bench_inspect", [&] { return benchMain(argc, argv); },
      "MODEL_FOLDER TEXT_FILE [--max-tokens N] [--repeat R]");
}
