#include "engine/runs/run_chain.h"

#include <algorithm>
#include <filesystem>
#include <limits>
#include <stdexcept>

namespace hh::runs {

namespace fs = std::filesystem;

namespace {
constexpr char kPrefix[] = "run-resumed-";
constexpr char kSuffix[] = ".h5";
}  // namespace

int64_t resumedAfter(const std::string& file) {
  const std::string name = fs::path(file).filename().string();
  const size_t prefix = sizeof kPrefix - 1, suffix = sizeof kSuffix - 1;
  if (name.size() <= prefix + suffix || name.compare(0, prefix, kPrefix) != 0 ||
      name.compare(name.size() - suffix, suffix, kSuffix) != 0)
    return 0;
  const std::string digits = name.substr(prefix, name.size() - prefix - suffix);
  if (digits.size() > 18 || !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return 0;
  return std::stoll(digits);
}

std::vector<std::string> runChain(const std::string& dir) {
  std::vector<std::string> chain;
  std::error_code ec;
  if (fs::is_regular_file(fs::path(dir) / "run.h5", ec)) chain.push_back((fs::path(dir) / "run.h5").string());
  std::vector<std::pair<int64_t, std::string>> continuations;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string path = entry.path().string();
    if (entry.is_regular_file(ec) && resumedAfter(path) > 0) continuations.emplace_back(resumedAfter(path), path);
  }
  std::sort(continuations.begin(), continuations.end());
  for (const auto& [step, path] : continuations) chain.push_back(path);
  return chain;
}

std::vector<std::string> chainOf(const std::string& file) {
  const fs::path path(file);
  const int64_t own = resumedAfter(file);
  if (own == 0 && path.filename() != "run.h5") return {file};
  const fs::path dir = path.has_parent_path() ? path.parent_path() : fs::path(".");
  std::vector<std::string> chain;
  for (const std::string& member : runChain(dir.string()))  // run.h5 (after 0), then by S
    if (resumedAfter(member) < own) chain.push_back(member);
  chain.push_back((dir / path.filename()).string());
  for (const std::string& member : runChain(dir.string()))
    if (resumedAfter(member) > own) chain.push_back(member);
  return chain;
}

std::vector<std::string> chainFrom(const std::string& file) {
  std::vector<std::string> chain = chainOf(file);
  const int64_t own = resumedAfter(file);
  chain.erase(chain.begin(), std::find_if(chain.begin(), chain.end(),
                                          [&](const std::string& member) { return resumedAfter(member) >= own; }));
  return chain;
}

int removeContinuations(const std::string& dir, int64_t fromStep) {
  int removed = 0;
  std::error_code ec;
  for (const std::string& path : runChain(dir)) {
    const int64_t after = resumedAfter(path);
    if (after == 0 || after < fromStep) continue;
    if (!fs::remove(path, ec) && ec)
      throw std::runtime_error(path + ": cannot delete an earlier run's continuation (" + ec.message() + ")");
    ++removed;
  }
  return removed;
}

namespace {

// Appends `part`'s rows up to step `until` to `out`.
void appendUntil(const ScalarSeries& part, int64_t until, ScalarSeries& out) {
  for (size_t r = 0; r < part.steps.size(); ++r) {
    if (part.steps[r] > until) break;
    out.steps.push_back(part.steps[r]);
    out.times.push_back(part.times[r]);
    out.values.push_back(part.values[r]);
  }
}

// The step up to which file i of `files` counts: where the next one resumed, else every step.
int64_t keptUntil(const std::vector<std::string>& files, size_t i) {
  return i + 1 < files.size() ? resumedAfter(files[i + 1]) : std::numeric_limits<int64_t>::max();
}

}  // namespace

ScalarSeries chainedScalars(const std::vector<std::string>& files, const std::string& name) {
  ScalarSeries out;
  for (size_t i = 0; i < files.size(); ++i) {
    ScalarSeries part;
    try {
      part = RunReader::open(files[i]).scalars(name);
    } catch (const std::exception&) {
      continue;
    }
    appendUntil(part, keptUntil(files, i), out);
  }
  return out;
}

namespace {

// Appends every scalar of file i of `files`, open as `reader`, to `out` (chainedAllScalars).
void appendAllScalars(const RunReader& reader, const std::vector<std::string>& files, size_t i,
                      std::map<std::string, ScalarSeries>& out) {
  for (const auto& spec : reader.header().layout.scalars)
    appendUntil(reader.scalars(spec.name), keptUntil(files, i), out[spec.name]);
}

std::map<std::string, ScalarSeries> chainedAllScalarsFrom(const RunReader* first,
                                                          const std::vector<std::string>& files) {
  std::map<std::string, ScalarSeries> out;
  for (size_t i = 0; i < files.size(); ++i) {
    try {
      if (i == 0 && first)
        appendAllScalars(*first, files, i, out);
      else
        appendAllScalars(RunReader::open(files[i]), files, i, out);
    } catch (const std::exception&) {
      // An unreadable file contributes nothing, as in chainedScalars.
    }
  }
  return out;
}

}  // namespace

std::map<std::string, ScalarSeries> chainedAllScalars(const std::vector<std::string>& files) {
  return chainedAllScalarsFrom(nullptr, files);
}

std::map<std::string, ScalarSeries> chainedAllScalars(const RunReader& first, const std::vector<std::string>& files) {
  return chainedAllScalarsFrom(&first, files);
}

std::string shownStatus(const RunReader& reader) {
  return reader.interrupted() ? "interrupted" : statusName(reader.status());
}

}  // namespace hh::runs
