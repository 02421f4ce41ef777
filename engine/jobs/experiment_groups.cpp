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

namespace {

// One declared variant's completed runs, by repeat name.
using RunsByRepeat = std::map<std::string, const VariantResult*>;

// `group` minus the baseline, metric by metric, over the repeats both completed.
std::map<std::string, PairedComparison> againstBaseline(const RunsByRepeat& group, const RunsByRepeat& baseline) {
  std::map<std::string, std::vector<std::pair<double, double>>> pairs;
  for (const auto& [repeat, run] : group) {
    const auto base = baseline.find(repeat);
    if (base == baseline.end()) continue;
    for (const auto& [k, value] : run->metrics)
      if (const auto b = base->second->metrics.find(k); b != base->second->metrics.end())
        pairs[k].emplace_back(value, b->second);
  }
  std::map<std::string, PairedComparison> out;
  for (const auto& [k, list] : pairs)
    if (const auto c = pairedComparison(list); c.n > 0) out[k] = c;
  return out;
}

}  // namespace

std::vector<VariantGroup> variantGroups(const ExperimentConfig& config, const std::vector<VariantResult>& variants) {
  std::vector<VariantGroup> groups;
  if (config.repeats.empty()) return groups;
  std::map<std::string, const ExperimentVariant*> runOf;  // a run's name -> its declared variant and repeat
  for (const auto& v : config.variants) runOf[v.name] = &v;
  std::map<std::string, std::vector<std::string>> listed;  // per declared variant: its runs in the summary
  std::map<std::string, RunsByRepeat> completed;           // ... and those of them that completed
  for (const auto& v : variants) {
    const auto it = runOf.find(v.name);
    if (it == runOf.end()) continue;
    listed[it->second->group].push_back(v.name);
    if (v.status == JobStatus::Completed) completed[it->second->group][it->second->repeat] = &v;
  }
  for (const auto& declared : config.declared) {
    if (!listed.count(declared.name)) continue;
    VariantGroup g;
    g.name = declared.name;
    g.runs = listed[declared.name];
    const RunsByRepeat& done = completed[declared.name];
    g.completed = int(done.size());
    std::map<std::string, std::vector<double>> values;
    for (const auto& [repeat, run] : done)
      for (const auto& [k, value] : run->metrics)
        if (std::isfinite(value)) values[k].push_back(value);
    for (const auto& [k, list] : values) g.metrics[k] = spreadOf(list);
    if (!config.baseline.empty() && g.name != config.baseline) {
      g.baseline = config.baseline;
      g.againstBaseline = againstBaseline(done, completed[config.baseline]);
    }
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
    nlohmann::json group{{"name", g.name}, {"runs", g.runs}, {"completed", g.completed}, {"metrics", metrics}};
    if (!g.baseline.empty()) {
      nlohmann::json paired = nlohmann::json::object();
      for (const auto& [k, c] : g.againstBaseline)
        paired[k] = {{"pairs", c.n},
                     {"diff_mean", summaryValue(c.mean)},
                     {"diff_sd", summaryValue(c.sd)},
                     {"t", summaryValue(c.t)},
                     {"p", summaryValue(c.p)},
                     {"lower", c.lower},
                     {"higher", c.higher}};
      group["against_baseline"] = {{"baseline", g.baseline}, {"metrics", paired}};
    }
    list.push_back(std::move(group));
  }
  return list;
}

std::string groupsCsv(const std::vector<VariantGroup>& groups) {
  std::set<std::string> keys;
  bool paired = false;
  for (const auto& g : groups) {
    for (const auto& [k, s] : g.metrics) keys.insert(k);
    paired = paired || !g.baseline.empty();
  }
  std::ostringstream csv;
  csv << "group,runs,completed";
  for (const auto& k : keys) {
    csv << "," << k << ":mean," << k << ":sd," << k << ":min," << k << ":max," << k << ":n";
    if (paired)
      csv << "," << k << ":diff_mean," << k << ":diff_sd," << k << ":p," << k << ":lower," << k << ":higher," << k
          << ":pairs";
  }
  csv << "\n";
  for (const auto& g : groups) {
    csv << g.name << "," << g.runs.size() << "," << g.completed;
    for (const auto& k : keys) {
      if (const auto it = g.metrics.find(k); it == g.metrics.end()) {
        csv << ",,,,,0";
      } else {
        const auto& s = it->second;
        csv << "," << csvNumber(s.mean) << "," << csvNumber(s.sd) << "," << csvNumber(s.min) << "," << csvNumber(s.max)
            << "," << s.n;
      }
      if (!paired) continue;
      if (const auto it = g.againstBaseline.find(k); it == g.againstBaseline.end()) {
        csv << ",,,,,,0";  // the baseline itself, or no repeat both completed
      } else {
        const auto& c = it->second;
        csv << "," << csvNumber(c.mean) << "," << csvNumber(c.sd) << "," << csvNumber(c.p) << "," << c.lower << ","
            << c.higher << "," << c.n;
      }
    }
    csv << "\n";
  }
  return csv.str();
}

}  // namespace hh::jobs
