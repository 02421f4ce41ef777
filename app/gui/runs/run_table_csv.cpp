// The run browser's wide CSV export (see run_table_csv.h).
#include "app/gui/runs/run_table_csv.h"

#include <QSaveFile>

#include <cmath>
#include <set>

namespace hh::gui {
namespace {

QString number(double v) {
  if (std::isnan(v)) return QStringLiteral("nan");
  if (std::isinf(v)) return v > 0 ? QStringLiteral("inf") : QStringLiteral("-inf");
  return QString::number(v, 'g', 10);
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
  QStringList lines;
  QStringList fields;
  for (const QString& h : header) fields << csvField(h);
  lines << fields.join(QLatin1Char(','));
  for (const auto& run : runs) {
    fields = QStringList{run.runId, run.path, run.kind, run.status, run.model, run.featureMap};
    for (QString& f : fields) f = csvField(f);
    for (const QString& metric : metrics) {
      const auto it = run.lastValues.find(metric);
      fields << (it == run.lastValues.end() ? QString() : number(it->second));
    }
    lines << fields.join(QLatin1Char(','));
  }
  return lines.join(QStringLiteral("\r\n")) + QStringLiteral("\r\n");
}

QString writeRunsCsv(const QString& path, const std::vector<RunSummary>& runs) {
  QSaveFile file(path);  // written whole or not at all
  if (!file.open(QIODevice::WriteOnly)) return QStringLiteral("%1: %2").arg(path, file.errorString());
  file.write(runsCsv(runs).toUtf8());
  if (!file.commit()) return QStringLiteral("%1: %2").arg(path, file.errorString());
  return {};
}

}  // namespace hh::gui
