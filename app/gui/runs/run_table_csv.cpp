// The run browser's wide CSV export (see run_table_csv.h).
#include "app/gui/runs/run_table_csv.h"

#include <QSaveFile>

#include <cmath>
#include <set>

#include "engine/runs/run_chain.h"
#include "engine/runs/run_reader.h"

namespace hh::gui {
namespace {

QString csvNumber(double v) {
  if (std::isnan(v)) return QStringLiteral("nan");
  if (std::isinf(v)) return v > 0 ? QStringLiteral("inf") : QStringLiteral("-inf");
  return QString::number(v, 'g', 10);
}

QString writeText(const QString& path, const QString& text) {
  QSaveFile file(path);  // written whole or not at all
  if (!file.open(QIODevice::WriteOnly)) return QStringLiteral("%1: %2").arg(path, file.errorString());
  file.write(text.toUtf8());
  if (!file.commit()) return QStringLiteral("%1: %2").arg(path, file.errorString());
  return {};
}

QString csvLine(const QStringList& fields) {
  QStringList quoted;
  for (const QString& f : fields) quoted << csvField(f);
  return quoted.join(QLatin1Char(','));
}

}  // namespace

QString csvField(const QString& text) {
  const bool quote = text.contains(QLatin1Char(',')) || text.contains(QLatin1Char('"')) ||
                     text.contains(QLatin1Char('\n')) || text.contains(QLatin1Char('\r')) ||
                     (!text.isEmpty() && (text.front().isSpace() || text.back().isSpace()));
  if (!quote) return text;
  QString out = text;
  out.replace(QLatin1Char('"'), QStringLiteral("\"\""));
  return QLatin1Char('"') + out + QLatin1Char('"');
}

QStringList csvMetricColumns(const std::vector<RunSummary>& runs) {
  std::set<QString> names;
  for (const auto& run : runs)
    for (const auto& [name, value] : run.lastValues) names.insert(name);
  QStringList columns;
  for (const QString& headline : runBrowserMetrics())
    if (names.erase(headline)) columns << headline;
  for (const QString& name : names) columns << name;  // std::set: in name order
  return columns;
}

QString runsCsv(const std::vector<RunSummary>& runs) {
  const QStringList metrics = csvMetricColumns(runs);
  QStringList header{QStringLiteral("run_id"), QStringLiteral("file"),  QStringLiteral("kind"),
                     QStringLiteral("status"), QStringLiteral("model"), QStringLiteral("feature_map")};
  header << metrics;
  QStringList lines{csvLine(header)};
  for (const auto& run : runs) {
    QStringList fields{run.runId, run.path, run.kind, run.status, run.model, run.featureMap};
    for (const QString& metric : metrics) {
      const auto it = run.lastValues.find(metric);
      fields << (it == run.lastValues.end() ? QString() : csvNumber(it->second));
    }
    lines << csvLine(fields);
  }
  return lines.join(QStringLiteral("\r\n")) + QStringLiteral("\r\n");
}

QString writeRunsCsv(const QString& path, const std::vector<RunSummary>& runs) {
  return writeText(path, runsCsv(runs));
}

RunTraces readRunTraces(const QString& path, const QString& label) {
  RunTraces out;
  out.label = label;
  try {
    const auto reader = runs::RunReader::open(path.toStdString());  // the first file must read: its error is the row's
    // A resumed run: its files joined at the resume steps (the continuation's rows win).
    for (const auto& [name, series] : runs::chainedAllScalars(reader, runs::chainFrom(path.toStdString()))) {
      auto& trace = out.series[QString::fromStdString(name)];
      for (size_t i = 0; i < series.steps.size(); ++i) trace[series.steps[i]] = series.values[i];  // a repeated step: its last value
    }
  } catch (const std::exception& e) {
    out.error = QString::fromStdString(e.what());
  }
  return out;
}

QString tracesCsv(const std::vector<RunTraces>& runs) {
  std::set<int64_t> steps;
  QStringList header{QStringLiteral("step")};
  std::vector<const std::map<int64_t, double>*> columns;
  for (const auto& run : runs) {
    if (!run.error.isEmpty()) continue;
    for (const auto& [name, trace] : run.series) {  // std::map: in name order
      header << run.label + QLatin1Char(':') + name;
      columns.push_back(&trace);
      for (const auto& [step, value] : trace) steps.insert(step);
    }
  }
  QStringList lines{csvLine(header)};
  for (const int64_t step : steps) {
    QStringList fields{QString::number(step)};
    for (const auto* trace : columns) {
      const auto it = trace->find(step);
      fields << (it == trace->end() ? QString() : csvNumber(it->second));
    }
    lines << csvLine(fields);
  }
  return lines.join(QStringLiteral("\r\n")) + QStringLiteral("\r\n");
}

QString writeTracesCsv(const QString& path, const std::vector<RunTraces>& runs) {
  return writeText(path, tracesCsv(runs));
}

}  // namespace hh::gui
