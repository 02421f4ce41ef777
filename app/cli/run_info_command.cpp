// `hedgehog run-info RUN.h5`: what a run file holds, read with the engine's RunReader (the same
// reader as the workbench): schema version, header, the status history (the stages the run went
// through), whether a killed run was interrupted, steps written, the last value of every scalar
// series, and the record counts (tables, snapshots, curves, weights, log lines, exports). Works on
// a finished run, a live one (SWMR read) and one whose job was killed. A file of a resumed run
// (run.h5 and its run-resumed-<S>.h5 continuations) says which file it continues and which
// continue it, with their status. With --series NAMES it prints those scalar series instead, as
// CSV over the whole resumed run (this file and the continuations after it, joined at the resume
// steps as the workbench's traces CSV joins them): step, then a column per name, blank where a
// series has no row at that step.
#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>
#include <vector>

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

// The names --series asks for ("all": every scalar of the chain, in name order); an unknown name
// is refused, naming the file and the names it has.
std::vector<std::string> seriesNames(const std::string& path, const std::string& asked,
                                     const std::map<std::string, runs::ScalarSeries>& all) {
  std::vector<std::string> names;
  if (asked == "all") {
    for (const auto& [name, series] : all) names.push_back(name);
    return names;
  }
  std::stringstream list(asked);
  for (std::string name; std::getline(list, name, ',');) {
    if (name.empty()) continue;
    if (!all.count(name)) {
      std::string known;
      for (const auto& [have, series] : all) known += (known.empty() ? "" : ", ") + have;
      throw std::invalid_argument(path + ": no scalar series \"" + name +
                                  "\" (it has: " + (known.empty() ? "none" : known) + ")");
    }
    names.push_back(name);
  }
  if (names.empty()) throw std::invalid_argument("--series: name at least one scalar series, or all");
  return names;
}

// --series: step, then one column per name; a step any of them logged is a row.
void printSeriesCsv(const runs::RunReader& reader, const std::string& path, const std::string& asked) {
  const auto all = runs::chainedAllScalars(reader, runs::chainFrom(path));
  const auto names = seriesNames(path, asked, all);
  std::vector<std::map<int64_t, double>> columns;
  std::set<int64_t> steps;
  for (const auto& name : names) {
    const auto& series = all.at(name);
    auto& column = columns.emplace_back();
    for (size_t i = 0; i < series.steps.size(); ++i) column[series.steps[i]] = series.values[i];
    steps.insert(series.steps.begin(), series.steps.end());
  }
  std::printf("step");
  for (const auto& name : names) std::printf(",%s", name.c_str());
  std::printf("\n");
  for (const int64_t step : steps) {
    std::printf("%lld", (long long)step);
    for (const auto& column : columns) {
      const auto it = column.find(step);
      if (it == column.end())
        std::printf(",");
      else
        std::printf(",%.9g", it->second);
    }
    std::printf("\n");
  }
}

// The description: header, status history, steps, last metrics and record counts.
void describeRun(const runs::RunReader& reader, const std::string& path) {
  const auto& h = reader.header();
  std::printf("run file: %s (schema version %d%s)\n", path.c_str(), reader.schemaVersion(),
              reader.live() ? ", opened for live reading" : "");
  std::printf("kind: %s\nrun id: %s\n", h.kind.c_str(), h.runId.c_str());
  if (!h.startTime.empty()) std::printf("started: %s\n", h.startTime.c_str());
  if (!h.engineVersion.empty()) std::printf("engine: %s\n", h.engineVersion.c_str());
  if (!h.device.empty()) std::printf("device: %s\n", h.device.c_str());
  std::printf("status: %s%s%s\n", runs::statusName(reader.status()), reader.statusMessage().empty() ? "" : " - ",
              reader.statusMessage().c_str());
  if (reader.interrupted()) std::printf("interrupted: the status is still running but no writer has the file open\n");
  printChain(path);
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
    std::printf("table %s: %lld rows of [%d layers, %d heads]\n", spec.name.c_str(),
                (long long)reader.tableRows(spec.name), h.layout.layers, h.layout.heads);
  std::printf("snapshots: %lld\n", (long long)reader.snapshotCount());
  if (h.layout.curves.enabled()) std::printf("curve sets: %lld\n", (long long)reader.curveCount());
  for (const auto& w : h.layout.weights)
    std::printf("weight checkpoints %s: %lld\n", w.name.c_str(), (long long)reader.weightCount(w.name));
  std::printf("log lines: %lld\n", (long long)reader.logCount());
  if (!reader.exportPath().empty()) std::printf("exported: %s\n", reader.exportPath().c_str());
}

}  // namespace

void addRunInfoCommand(CLI::App& app) {
  auto path = std::make_shared<std::string>();
  auto* cmd =
      app.add_subcommand("run-info", "Describe a run file: schema, status history, steps, last metrics, snapshots");
  auto series = std::make_shared<std::string>();
  cmd->add_option("run", *path, "Run file (run.h5)")->required();
  cmd->add_option("--series", *series,
                  "Print these scalar series (comma-separated, or all) as CSV over the whole resumed run instead");
  cmd->callback([path, series] {
    const auto reader = runs::RunReader::open(*path);
    if (!series->empty()) {
      printSeriesCsv(reader, *path, *series);
      return;
    }
    describeRun(reader, *path);
  });
}

}  // namespace hh::cli
