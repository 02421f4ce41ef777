#include "app/cli/variant_processes.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <stdexcept>
#include <thread>
#include <vector>

#include "app/cli/child_logs.h"
#include "app/cli/child_signals.h"
#include "app/cli/commands.h"
#include "app/cli/pause_signals.h"
#include "app/cli/progress_format.h"

namespace hh::cli {

namespace fs = std::filesystem;

namespace {

struct Child {
  std::string name, log;
  std::chrono::steady_clock::time_point started;
};

// fork + exec of `self experiment --config FILE --only NAME [flags]`, output to `log`.
pid_t launch(const std::string& self, const std::string& configFile, const std::string& name, const std::string& log,
             const std::vector<std::string>& flags, int threads) {
  std::vector<std::string> args{self, "experiment", "--config", configFile, "--only", name};
  args.insert(args.end(), flags.begin(), flags.end());
  const pid_t launcher = getpid();
  const std::string launcherPid = std::to_string(launcher);
  const pid_t pid = fork();
  if (pid < 0) throw std::runtime_error("experiment --jobs: fork failed");
  if (pid == 0) {  // child: only async-signal-safe calls until exec
    if (!detachChild(launcher, launcherPid.c_str())) _exit(130);
    const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      dup2(fd, STDOUT_FILENO);
      dup2(fd, STDERR_FILENO);
      close(fd);
    }
    if (std::getenv("HH_NUM_THREADS") == nullptr) setenv("HH_NUM_THREADS", std::to_string(threads).c_str(), 1);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(self.c_str(), argv.data());
    _exit(127);
  }
  return pid;
}

// Why a variant failed: the message its record (variant.json, for the variant's current config)
// holds (the job's own, e.g. the NaN it hit), else the error line of its log (a child that failed
// before its job ran), else how the child ended ("killed by signal 9": the OOM killer, a kill -9,
// which leave neither).
std::string variantFailure(const jobs::ExperimentConfig& config, const std::string& name, const std::string& log,
                           int status) {
  jobs::VariantResult record;
  if (jobs::variantRecord(config, name, record) && record.status != jobs::JobStatus::Completed &&
      !record.message.empty())
    return record.message;
  const std::string said = lastErrorLine(log);
  if (!said.empty()) return said;
  const std::string how = describeStatus(status);  // "was killed by signal 9"
  return how.rfind("was ", 0) == 0 ? how.substr(4) : "its process " + how;
}

// Prints how a child ended and counts it in `result` (the first failure keeps its name, log and error).
void reportEnd(const jobs::ExperimentConfig& config, const Child& child, int status, VariantProcessesResult& result) {
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - child.started).count();
  const bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  const bool cancelled = WIFEXITED(status) && WEXITSTATUS(status) == kExitCancelled;
  result.failed += ok ? 0 : 1;
  const std::string why = ok || cancelled ? "" : variantFailure(config, child.name, child.log, status);
  if (!why.empty()) result.failures[child.name] = why;
  if (!ok && result.firstFailed.empty()) {
    result.firstFailed = child.name;
    result.firstFailedLog = child.log;
    result.firstFailedError = cancelled ? variantFailure(config, child.name, child.log, status) : why;
  }
  char line[64];
  std::snprintf(line, sizeof line, "%s after %.1f s", ok ? "completed" : cancelled ? "cancelled" : "failed", seconds);
  sayLine("[" + child.name + "] " + line + (why.empty() ? "" : ": " + why) + " (log " + child.log + ")");
}

// Passes a pause or a resume on to the running children, and says so once per change; true while
// paused (no new child starts).
bool forwardPause(PauseForwarder& pause, const std::map<pid_t, Child>& running, bool& wasPaused, size_t waiting) {
  std::vector<pid_t> pids;
  for (const auto& [pid, child] : running) pids.push_back(pid);
  const bool paused = pause.forward(pids);
  if (paused != wasPaused) {
    const std::string rest = waiting == 0 ? "" : "; " + std::to_string(waiting) + " waiting";
    sayLine(paused ? "paused: " + std::to_string(pids.size()) + " running variant(s) wait at their next step" + rest +
                         " (kill -USR2 " + std::to_string(getpid()) + " resumes)"
                   : "resumed" + rest);
    wasPaused = paused;
  }
  return paused;
}

}  // namespace

VariantProcessesResult runVariantsInProcesses(const std::string& configFile, const jobs::ExperimentConfig& config,
                                              const std::vector<std::string>& names, int jobs,
                                              const std::vector<std::string>& flags) {
  const std::string self = fs::read_symlink("/proc/self/exe").string();
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  const int threads = std::max(1, static_cast<int>(cores) / std::max(1, jobs));
  const ForwardedSignals counting;
  VariantProcessesResult result;
  std::map<pid_t, Child> running;
  size_t next = 0;
  int forwarded = 0;
  PauseForwarder pause;
  bool wasPaused = false;
  while (next < names.size() || !running.empty()) {
    while (forwarded < counting.received()) {  // one interrupt per signal to every child still running
      ++forwarded;
      for (const auto& [pid, child] : running) kill(pid, SIGINT);
    }
    const bool paused = forwardPause(pause, running, wasPaused, names.size() - next);
    while (forwarded == 0 && !paused && next < names.size() && static_cast<int>(running.size()) < jobs) {
      const auto& name = names[next++];
      const fs::path dir = jobs::variantConfig(config, name).at("run_dir").get<std::string>();
      fs::create_directories(dir);
      const std::string log = (dir / "experiment.log").string();
      const pid_t pid = launch(self, configFile, name, log, flags, threads);
      running[pid] = {name, log, std::chrono::steady_clock::now()};
      sayLine("[" + name + "] started (process " + std::to_string(pid) + ", " + std::to_string(threads) + " thread" +
              (threads == 1 ? "" : "s") + "; log " + log + ")");
    }
    if (running.empty()) {
      if (!paused || forwarded > 0) break;                         // interrupted before the rest started
      std::this_thread::sleep_for(std::chrono::milliseconds(50));  // paused between variants
      continue;
    }
    // Polled, not blocking: a signal that lands between the check above and a blocking wait
    // would otherwise wait for a child to end before it is passed on.
    int status = 0;
    const pid_t done = waitpid(-1, &status, WNOHANG);
    if (done == 0 || (done < 0 && errno == EINTR)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      continue;
    }
    if (done < 0) break;
    const auto it = running.find(done);
    if (it == running.end()) continue;
    reportEnd(config, it->second, status, result);
    running.erase(it);
  }
  result.interrupted = forwarded > 0;
  return result;
}

}  // namespace hh::cli
