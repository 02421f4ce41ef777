#include "engine/jobs/experiment_groups.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>
#include <sstream>

namespace hh::jobs {

namespace {

MetricSpread spreadOf(const std::vector<double>& values) {
  MetricSpread s;
  s.n = int(values.size());
  if (values.empty()) {
    s.mean = s.sd = s.min = s.max = std::nan("");
    return s;
  }
  double sum = 0;
  for (double v : values) sum += v;
  s.mean = sum / double(s.n);
  double squares = 0;
  for (double v : values) squares += (v - s.mean) * (v - s.mean);
  s.sd = s.n > 1 ? std::sqrt(squares / double(s.n - 1)) : std::nan("");
  s.min = *std::min_element(values.begin(), values.end());
  s.max = *std::max_element(values.begin(), values.end());
  return s;
}

nlohmann::json summaryValue(double v) {
  return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(csvNumber(v));
}

}  // namespace

std::string csvNumber(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.9g", v);
  return buffer;
}

std::vector<VariantGroup> variantGroups(const ExperimentConfig& config, const std::vector<VariantResult>& variants) {
  std::vector<VariantGroup> groups;
  if (config.repeats.empty()) return groups;
  std::map<std::string, std::string> groupOf;
  for (const auto& v : config.variants) groupOf[v.name] = v.group;
  for (const auto& declared : config.declared) {
    VariantGroup g;
    g.name = declared.name;
    std::map<std::string, std::vector<double>> values;
    for (const auto& v : variants) {
      const auto it = groupOf.find(v.name);
      if (it == groupOf.end() || it->second != g.name) continue;
      g.runs.push_back(v.name);
      if (v.status != JobStatus::Completed) continue;
      ++g.completed;
      for (const auto& [k, value] : v.metrics)
        if (std::isfinite(value)) values[k].push_back(value);
    }
    if (g.runs.empty()) continue;
    for (const auto& [k, list] : values) g.metrics[k] = spreadOf(list);
    groups.push_back(std::move(g));
  }
  return groups;
}

nlohmann::json groupsJson(const std::vector<VariantGroup>& groups) {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& g : groups) {
    nlohmann::json metrics = nlohmann::json::object();
    for (const auto& [k, s] : g.metrics)
      metrics[k] = {{"n", s.n},
                    {"mean", summaryValue(s.mean)},
                    {"sd", summaryValue(s.sd)},
                    {"min", summaryValue(s.min)},
                    {"max", summaryValue(s.max)}};
    list.push_back({{"name", g.name}, {"runs", g.runs}, {"completed", g.completed}, {"metrics", metrics}});
  }
  return list;
}

std::string groupsCsv(const std::vector<VariantGroup>& groups) {
  std::set<std::string> keys;
  for (const auto& g : groups)
    for (const auto& [k, s] : g.metrics) keys.insert(k);
  std::ostringstream csv;
  csv << "group,runs,completed";
  for (const auto& k : keys) csv << "," << k << ":mean," << k << ":sd," << k << ":min," << k << ":max," << k << ":n";
  csv << "\n";
  for (const auto& g : groups) {
    csv << g.name << "," << g.runs.size() << "," << g.completed;
    for (const auto& k : keys) {
      const auto it = g.metrics.find(k);
      if (it == g.metrics.end()) {
        csv << ",,,,,0";
        continue;
      }
      const auto& s = it->second;
      csv << "," << csvNumber(s.mean) << "," << csvNumber(s.sd) << "," << csvNumber(s.min) << "," << csvNumber(s.max)
          << "," << s.n;
    }
    csv << "\n";
  }
  return csv.str();
}

}  // namespace hh::jobs
