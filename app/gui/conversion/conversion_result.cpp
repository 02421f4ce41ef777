// Reading a finished conversion's run files; see conversion_result.h.
#include "app/gui/conversion/conversion_result.h"

#include <QDir>
#include <QFileInfo>

#include <algorithm>
#include <exception>

#include <nlohmann/json.hpp>

#include "engine/runs/run_reader.h"

namespace hh::gui {
namespace {

// The last value of a scalar series, NaN when it has no row.
double last(const runs::RunReader& run, const std::string& name) {
  if (run.scalarRows(name) == 0) return std::nan("");
  return run.scalars(name).values.back();
}

QString existing(const QString& path) { return QFileInfo::exists(path) ? path : QString(); }

// Every map the evaluate run measured: its scalars kl_mean_<map>, entropy_mean_<map>,
// monotonicity_mean_<map>, sorted by KL (NaN last).
std::vector<MapScore> mapScores(const runs::RunReader& evaluate) {
  std::vector<MapScore> maps;
  const std::string prefix = "kl_mean_";
  for (const auto& spec : evaluate.header().layout.scalars) {
    if (spec.name.rfind(prefix, 0) != 0) continue;
    const std::string map = spec.name.substr(prefix.size());
    maps.push_back({QString::fromStdString(map), last(evaluate, spec.name), last(evaluate, "entropy_mean_" + map),
                    last(evaluate, "monotonicity_mean_" + map)});
  }
  std::stable_sort(maps.begin(), maps.end(), [](const MapScore& a, const MapScore& b) {
    return std::isnan(b.kl) ? !std::isnan(a.kl) : !std::isnan(a.kl) && a.kl < b.kl;
  });
  return maps;
}

// The converted model's per-head KL ("trained", else the converted map's own row) and its
// extremes.
void readHeads(const runs::RunReader& evaluate, const QString& featureMap, ConversionResult& r) {
  std::string name = "kl_trained";
  if (evaluate.tableRows(name) == 0) name = "kl_" + featureMap.toStdString();
  if (evaluate.tableRows(name) == 0) return;
  const auto table = evaluate.table(name);
  const size_t row = table.size() - 1;
  r.layers = table.layers;
  r.heads = table.heads;
  std::vector<HeadScore> heads;
  for (int l = 0; l < table.layers; ++l)
    for (int h = 0; h < table.heads; ++h) {
      const double kl = table.at(row, l, h);
      r.headKl.push_back(kl);
      if (!std::isnan(kl)) heads.push_back({l, h, kl});
    }
  std::sort(heads.begin(), heads.end(), [](const HeadScore& a, const HeadScore& b) { return a.kl < b.kl; });
  const size_t n = std::min<size_t>(3, heads.size());
  r.bestHeads.assign(heads.begin(), heads.begin() + std::ptrdiff_t(n));
  r.worstHeads.assign(heads.rbegin(), heads.rbegin() + std::ptrdiff_t(n));
}

}  // namespace

ConversionResult readConversionResult(const QString& path, QString* error) {
  ConversionResult r;
  try {
    const auto run = runs::RunReader::open(path.toStdString());
    if (run.header().kind != "convert")
      throw std::runtime_error("a " + run.header().kind + " run, not a conversion (kind convert)");
    r.status = QString::fromLatin1(runs::statusName(run.status()));
    r.statusMessage = QString::fromStdString(run.statusMessage());
    const auto config = nlohmann::json::parse(run.header().configJson, nullptr, false);
    if (config.is_object()) {
      r.teacher = QString::fromStdString(config.value("model", ""));
      r.featureMap = QString::fromStdString(config.value("feature_map", ""));
      r.rule = QString::fromStdString(config.value("rule", ""));
    }
    double seconds = 0;
    for (const char* stage : {"distill_seconds", "finetune_seconds", "evaluate_seconds", "export_seconds"})
      if (const double s = last(run, stage); !std::isnan(s)) seconds += s;
    r.seconds = seconds;
    r.klUntrained = last(run, "kl_untrained");
    r.klDistilled = last(run, "kl_distilled");
    const bool lm = run.scalarRows("accuracy_converted") == 0;
    r.task = lm ? QStringLiteral("lm") : QStringLiteral("classification");
    r.qualityOriginal = last(run, lm ? "perplexity_original" : "accuracy_original");
    r.qualityConverted = last(run, lm ? "perplexity_converted" : "accuracy_converted");
    r.exportPath = QString::fromStdString(run.exportPath());

    const QDir dir = QFileInfo(path).absoluteDir();
    r.distillRun = existing(dir.filePath(QStringLiteral("distill/run.h5")));
    r.finetuneRun = existing(dir.filePath(QStringLiteral("finetune/run.h5")));
    r.evaluateRun = existing(dir.filePath(QStringLiteral("evaluate/run.h5")));
    if (!r.evaluateRun.isEmpty()) {
      const auto evaluate = runs::RunReader::open(r.evaluateRun.toStdString());
      r.softmaxEntropy = last(evaluate, "entropy_softmax_mean");
      r.maps = mapScores(evaluate);
      readHeads(evaluate, r.featureMap, r);
    }
    r.runFile = path;
  } catch (const std::exception& e) {
    if (error) *error = QStringLiteral("%1: %2").arg(path, QString::fromStdString(e.what()));
    return ConversionResult{};
  }
  return r;
}

}  // namespace hh::gui
