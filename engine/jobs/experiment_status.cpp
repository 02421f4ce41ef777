#include "engine/jobs/experiment_status.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <system_error>

#include "engine/jobs/experiment_job.h"
#include "engine/jobs/training_session.h"
#include "engine/runs/run_chain.h"
#include "engine/runs/run_reader.h"

namespace hh::jobs {

namespace fs = std::filesystem;

namespace {

// The newest run file under a variant's folder: the last file of each job folder's chain (the
// variant's own, then its stages' one level down), the one modified last. "" when none.
std::string newestRunFile(const fs::path& dir) {
  std::error_code ec;
  std::vector<fs::path> folders{dir};
  if (fs::is_directory(dir, ec))
    for (const auto& entry : fs::directory_iterator(dir, ec))
      if (entry.is_directory(ec)) folders.push_back(entry.path());
  std::string newest;
  fs::file_time_type newestTime{};
  for (const auto& folder : folders) {
    const auto chain = runs::runChain(folder.string());
    if (chain.empty()) continue;
    const auto time = fs::last_write_time(chain.back(), ec);
    if (!ec && (newest.empty() || time > newestTime)) newest = chain.back(), newestTime = time;
  }
  return newest;
}

// Whether the last pause line of a running job's log (the step gate's) is a pause it has not
// come out of: "paused at step N", with no "resumed ..." or "cancelled while paused ..." after it.
bool pausedNow(const runs::RunReader& reader) {
  bool paused = false;
  for (const auto& line : reader.logLines()) {
    if (line.text.rfind(kPausedAtStep, 0) == 0)
      paused = true;
    else if (line.text.rfind(kResumedAtStep, 0) == 0 || line.text.rfind(kCancelledWhilePaused, 0) == 0)
      paused = false;
  }
  return paused;
}

// What its newest run file says of a variant without a record (an unreadable file: not started,
// the message says why).
void readRunFile(VariantState& s) {
  try {
    const auto reader = runs::RunReader::open(s.runFile);
    s.kind = reader.header().kind;
    const bool running = reader.status() == runs::RunStatus::Running;
    s.state = !running ? "not started" : reader.writerActive() ? "running" : "interrupted";
    for (const auto& spec : reader.header().layout.scalars) {
      const auto series = reader.scalars(spec.name);
      if (!series.steps.empty()) s.step = std::max(s.step, series.steps.back());
    }
    const auto config = nlohmann::json::parse(reader.header().configJson, nullptr, false);
    if (config.is_object() && config.contains("steps") && config.at("steps").is_number_integer())
      s.totalSteps = config.at("steps").get<int64_t>();
    if (!running) s.message = "its run files are from an earlier config; a run starts it afresh";
    if (s.state == "interrupted") s.message = "killed while it ran; --resume continues it from its last checkpoint";
    if (s.state == "running" && pausedNow(reader)) {
      s.state = "paused";
      s.message = "waiting at its step; SIGUSR2 to its process (or its launcher) resumes it";
    }
  } catch (const std::exception& e) {
    s.state = "not started";
    s.message = std::string("its run file cannot be read: ") + e.what();
  }
}

}  // namespace

std::vector<VariantState> variantStates(const ExperimentConfig& config) {
  std::vector<VariantState> out;
  for (const auto& v : config.variants) {
    VariantState s;
    s.name = v.name;
    const fs::path dir = variantConfig(config, v.name).at("run_dir").get<std::string>();
    s.runFile = newestRunFile(dir);
    VariantResult record;
    if (variantRecord(config, v.name, record)) {
      s.state = toString(record.status);
      s.message = record.message;
      s.seconds = record.seconds;
    } else if (!s.runFile.empty()) {
      readRunFile(s);
    } else {
      s.state = "not started";
    }
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace hh::jobs
