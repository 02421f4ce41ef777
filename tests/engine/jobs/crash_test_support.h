// Helpers of engine.jobs.crash_safety: the real CLI as a child process (posix_spawn, output to a
// file), SIGKILL after a delay or once a line shows up in its output, and the checks a run folder
// must pass after any kill (run files open and hold contiguous finite steps that reach the
// checkpoint's step; checkpoint, adapters and model are complete or absent).
#pragma once
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "engine/io/safetensors.h"
#include "engine/models/model_io.h"
#include "engine/runs/run_reader.h"
#include "tests/support/child_process.h"

namespace hh::test::crash {

namespace fs = std::filesystem;

struct RunFileState {
  std::string path;
  int64_t first = -1, last = -1;  // loss steps held (first = -1: none)
  runs::RunStatus status = runs::RunStatus::Running;
};

struct FolderState {
  std::string problem;             // empty = every check passed
  int64_t checkpointStep = -1;     // -1: no checkpoint
  std::vector<RunFileState> runFiles;
};

// The counters a training checkpoint holds (throws when it does not open: a torn file).
inline nlohmann::json checkpointCounters(const std::string& path) {
  const auto file = io::SafetensorsFile::open(path);
  return nlohmann::json::parse(file.metadata().at("hedgehog_checkpoint"));
}

// Every check a run folder must pass after a kill at any instant. `modelDir` (finetune's output)
// and `adapters` (distill's) are checked when given: complete, or absent.
inline FolderState inspectRunFolder(const std::string& dir, const std::string& modelDir, const std::string& adapters) {
  FolderState out;
  if (!fs::exists(dir)) return out;  // killed before the job made its folder
  auto fail = [&](const std::string& p) {
    if (out.problem.empty()) out.problem = p;
  };
  const auto checkpoint = (fs::path(dir) / "checkpoint.safetensors").string();
  if (fs::exists(checkpoint)) {
    try {
      out.checkpointStep = checkpointCounters(checkpoint).at("step").get<int64_t>();
    } catch (const std::exception& e) {
      fail("torn checkpoint " + checkpoint + ": " + e.what());
    }
  }
  const auto stateCopy = (fs::path(dir) / "checkpoint.json").string();
  if (fs::exists(stateCopy)) {
    try {
      (void)nlohmann::json::parse(readAll(stateCopy)).at("step");
    } catch (const std::exception& e) {
      fail("torn " + stateCopy + ": " + e.what());
    }
  }
  if (!adapters.empty() && fs::exists(adapters)) {
    try {
      io::SafetensorsFile::open(adapters);
    } catch (const std::exception& e) {
      fail("torn adapters: " + std::string(e.what()));
    }
  }
  if (!modelDir.empty() && (fs::exists(modelDir) || fs::exists(modelDir + ".old"))) {
    try {
      models::loadModel(modelDir);
    } catch (const std::exception& e) {
      fail("model folder does not load: " + std::string(e.what()));
    }
  }
  // Run files: each opens, its loss steps are contiguous, once each, finite.
  std::vector<bool> covered;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const auto name = entry.path().filename().string();
    if (entry.path().extension() != ".h5") continue;
    RunFileState state;
    state.path = entry.path().string();
    try {
      auto reader = runs::RunReader::open(state.path);
      state.status = reader.status();
      const auto loss = reader.scalars("loss");
      for (size_t i = 0; i < loss.steps.size(); ++i) {
        if (!std::isfinite(loss.values[i])) fail(name + ": loss at step " + std::to_string(loss.steps[i]) + " is not finite");
        if (i > 0 && loss.steps[i] != loss.steps[i - 1] + 1)
          fail(name + ": loss steps jump from " + std::to_string(loss.steps[i - 1]) + " to " + std::to_string(loss.steps[i]));
      }
      if (!loss.steps.empty()) {
        state.first = loss.steps.front();
        state.last = loss.steps.back();
        if (covered.size() <= size_t(state.last)) covered.resize(size_t(state.last) + 1, false);
        for (int64_t s = state.first; s <= state.last; ++s) covered[size_t(s)] = true;
      }
      const std::string resumedPrefix = "run-resumed-";
      if (name.rfind(resumedPrefix, 0) == 0 && state.first >= 0 &&
          state.first != std::stoll(name.substr(resumedPrefix.size())) + 1)
        fail(name + ": starts at step " + std::to_string(state.first));
      if (name == "run.h5" && state.first >= 0 && state.first != 1) fail(name + ": starts at step " + std::to_string(state.first));
    } catch (const std::exception& e) {
      fail("run file " + state.path + " does not open: " + e.what());
    }
    out.runFiles.push_back(state);
  }
  // Every step up to the checkpoint's is in some run file (the continuation starts after it).
  for (int64_t s = 1; s <= out.checkpointStep; ++s)
    if (size_t(s) >= covered.size() || !covered[size_t(s)]) {
      fail("step " + std::to_string(s) + " (at or before the checkpoint's step " + std::to_string(out.checkpointStep) +
           ") is in no run file");
      break;
    }
  return out;
}

// The path after the last "run file: " in a CLI log (the file the finished job wrote).
inline std::string lastRunFile(const std::string& log) {
  const auto at = log.rfind("run file: ");
  if (at == std::string::npos) return {};
  const auto end = log.find('\n', at);
  return log.substr(at + 10, end == std::string::npos ? std::string::npos : end - at - 10);
}

}  // namespace hh::test::crash
