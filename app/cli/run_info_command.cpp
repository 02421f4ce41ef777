// `hedgehog run-info RUN.h5`: what a run file holds, read with the engine's RunReader (the same
// reader as the workbench): schema version, header, the status history (the stages the run went
// through), whether a killed run was interrupted, steps written, the last value of every scalar
// series, and the record counts (tables, snapshots, curves, weights, log lines, exports). Works on
// a finished run, a live one (SWMR read) and one whose job was killed. A file of a resumed run
// (run.h5 and its run-resumed-<S>.h5 continuations) says which file it continues and which
// continue it, with their status.
#include <algorithm>
#include <cstdio>

#include "app/cli/commands.h"
#include "engine/runs/run_chain.h"
#include "engine/runs/run_reader.h"

namespace hh::cli {
namespace {

// The other files of a resumed run: the one this file continues, and those that continue it.
void printChain(const std::string& path) {
  const auto chain = runs::chainOf(path);
  const int64_t own = runs::resumedAfter(path);
  for (size_t i = 0; i < chain.size(); ++i) {
    const int64_t after = runs::resumedAfter(chain[i]);
    if (after == own) continue;
    if (after < own) {
      if (i + 1 < chain.size() && runs::resumedAfter(chain[i + 1]) == own)
        std::printf("continues: %s after step %lld\n", chain[i].c_str(), (long long)own);
      continue;
    }
    std::string status;
    try {
      const auto reader = runs::RunReader::open(chain[i]);
      status = runs::shownStatus(reader);
    } catch (const std::exception& e) {
      status = std::string("unreadable: ") + e.what();
    }
    std::printf("continued: after step %lld in %s (%s)\n", (long long)after, chain[i].c_str(), status.c_str());
  }
}

}  // namespace

void addRunInfoCommand(CLI::App& app) {
  auto path = std::make_shared<std::string>();
  auto* cmd = app.add_subcommand("run-info", "Describe a run file: schema, status history, steps, last metrics, snapshots");
  cmd->add_option("run", *path, "Run file (run.h5)")->required();
  cmd->callback([path] {
    const auto reader = runs::RunReader::open(*path);
    const auto& h = reader.header();
    std::printf("run file: %s (schema version %d%s)\n", path->c_str(), reader.schemaVersion(),
                reader.live() ? ", opened for live reading" : "");
    std::printf("kind: %s\nrun id: %s\n", h.kind.c_str(), h.runId.c_str());
    if (!h.startTime.empty()) std::printf("started: %s\n", h.startTime.c_str());
    if (!h.engineVersion.empty()) std::printf("engine: %s\n", h.engineVersion.c_str());
    if (!h.device.empty()) std::printf("device: %s\n", h.device.c_str());
    std::printf("status: %s%s%s\n", runs::statusName(reader.status()),
                reader.statusMessage().empty() ? "" : " - ", reader.statusMessage().c_str());
    if (reader.interrupted()) std::printf("interrupted: the status is still running but no writer has the file open\n");
    printChain(*path);
    std::printf("status history:\n");
    for (const auto& s : reader.statusHistory())
      std::printf("  step %lld: %s%s%s\n", (long long)s.step, runs::statusName(s.status), s.message.empty() ? "" : " - ",
                  s.message.c_str());

    // Steps written: the last step of any scalar or table series.
    int64_t lastStep = -1;
    for (const auto& spec : h.layout.scalars) {
      const auto series = reader.scalars(spec.name);
      if (!series.steps.empty()) lastStep = std::max(lastStep, series.steps.back());
    }
    for (const auto& spec : h.layout.tables) {
      const auto series = reader.table(spec.name);
      if (series.size() > 0) lastStep = std::max(lastStep, series.steps.back());
    }
    std::printf("steps written: %lld\n", (long long)std::max<int64_t>(lastStep, 0));
    if (!h.layout.scalars.empty()) {
      std::printf("last metrics:\n");
      for (const auto& spec : h.layout.scalars) {
        const auto series = reader.scalars(spec.name);
        if (series.values.empty()) {
          std::printf("  %-24s (no rows)\n", spec.name.c_str());
          continue;
        }
        std::printf("  %-24s %.6g%s%s at step %lld (%zu rows)\n", spec.name.c_str(), series.values.back(),
                    spec.units.empty() ? "" : " ", spec.units.c_str(), (long long)series.steps.back(),
                    series.values.size());
      }
    }
    for (const auto& spec : h.layout.tables)
      std::printf("table %s: %lld rows of [%d layers, %d heads]\n", spec.name.c_str(), (long long)reader.tableRows(spec.name),
                  h.layout.layers, h.layout.heads);
    std::printf("snapshots: %lld\n", (long long)reader.snapshotCount());
    if (h.layout.curves.enabled()) std::printf("curve sets: %lld\n", (long long)reader.curveCount());
    for (const auto& w : h.layout.weights)
      std::printf("weight checkpoints %s: %lld\n", w.name.c_str(), (long long)reader.weightCount(w.name));
    std::printf("log lines: %lld\n", (long long)reader.logCount());
    if (!reader.exportPath().empty()) std::printf("exported: %s\n", reader.exportPath().c_str());
  });
}

}  // namespace hh::cli
