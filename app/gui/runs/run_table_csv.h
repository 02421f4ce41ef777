// Runs as one wide CSV (the run browser's "Export CSV..."): one row per run, in the order given;
// the columns are
//   run_id, file, kind, status, model, feature_map, then one column per scalar series that any of
//   the runs has, holding that series' last value (blank where a run has no such series);
// the headline metrics (runBrowserMetrics()) come first among the metric columns, the others
// follow in name order. RFC 4180: comma-separated, CRLF line ends, a field is quoted when it holds
// a comma, a double quote (doubled inside), a line break or leading / trailing spaces. Numbers are
// written with 10 significant digits; NaN and infinities as nan, inf, -inf. Plain data in.
// The whole traces ("Export CSV > whole traces"), wide as TensorBoard users ask for: one row per
// step that any selected run logged anything at, ascending; the columns are step, then
// "<run>:<scalar>" for every scalar series of every run (runs in the order given, each run's
// series in name order), blank where that series has no value at that step (the last value when
// a step was logged twice). <run> is the name the browser shows (the file relative to the folder).
#pragma once
#include <QString>
#include <QStringList>

#include <cstdint>
#include <map>
#include <vector>

#include "app/gui/runs/run_browser.h"

namespace hh::gui {

// A field as it goes into the CSV (quoted when it must be).
QString csvField(const QString& text);
// The metric columns for these runs, in their order.
QStringList csvMetricColumns(const std::vector<RunSummary>& runs);
// The whole CSV text, header line included.
QString runsCsv(const std::vector<RunSummary>& runs);
// Writes runsCsv(runs) to `path` (UTF-8). Returns an empty string, or why it could not.
QString writeRunsCsv(const QString& path, const std::vector<RunSummary>& runs);

struct RunTraces {
  QString label;   // the run's column prefix
  QString error;   // non-empty: the file could not be read (its columns are left out)
  std::map<QString, std::map<int64_t, double>> series;  // scalar -> step -> value
};
// Every scalar series of one run: the file at `path` and the continuations written after it
// (never throws).
RunTraces readRunTraces(const QString& path, const QString& label);
// The whole-traces CSV text, header line included.
QString tracesCsv(const std::vector<RunTraces>& runs);
// Writes tracesCsv(runs) to `path`. Returns an empty string, or why it could not.
QString writeTracesCsv(const QString& path, const std::vector<RunTraces>& runs);

}  // namespace hh::gui
