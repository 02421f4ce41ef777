// The real CLI as a child process for the suites that run it as a user would: posix_spawn with
// its output to a file, a wait with a time limit, SIGKILL after a delay or once a line shows up
// in its output (namespace hh::test::crash, where engine.jobs.crash_safety first needed them).
#pragma once
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace hh::test::crash {

inline std::string readAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Starts `args` (args[0] is the binary) with stdout appended to `logFile`, and stderr too, or to
// `errorFile` when one is given.
inline pid_t spawnLogged(const std::vector<std::string>& args, const std::string& logFile,
                         const std::string& errorFile = "") {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, logFile.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  if (errorFile.empty()) posix_spawn_file_actions_adddup2(&actions, 1, 2);
  else posix_spawn_file_actions_addopen(&actions, 2, errorFile.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  return rc == 0 ? pid : -1;
}

// Waits for `pid` (up to `seconds`, then kills it): the exit code, 128 + signal, or -1 on timeout.
inline int waitFor(pid_t pid, double seconds) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  int status = 0;
  while (true) {
    const pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) break;
    if (std::chrono::steady_clock::now() > end) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// Where to kill: after `delayMs`, or `jitterMs` after `line` first appears in this run's output
// (the jobs print their evaluation line just before they flush the run file and write the
// checkpoint).
struct KillPlan {
  int delayMs = 0;
  std::string line;
  int jitterMs = 0;
};

inline int millisecondsSince(std::chrono::steady_clock::time_point start) {
  return int(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
}

// True once `line` is in what the log holds past `offset` (what earlier runs appended is before it).
inline bool logShows(const std::string& logFile, size_t offset, const std::string& line) {
  const auto text = readAll(logFile);
  return text.size() > offset && text.find(line, offset) != std::string::npos;
}

// Runs the command and SIGKILLs it per `plan`. True when the kill landed (false: it ended first).
inline bool runAndKill(const std::vector<std::string>& args, const std::string& logFile, const KillPlan& plan) {
  const size_t offset = readAll(logFile).size();
  const pid_t pid = spawnLogged(args, logFile);
  if (pid < 0) return false;
  const auto start = std::chrono::steady_clock::now();
  bool exited = false;
  int status = 0;
  auto poll = [&] {
    if (!exited && ::waitpid(pid, &status, WNOHANG) == pid) exited = true;
    return exited;
  };
  if (plan.line.empty()) {
    while (!poll() && millisecondsSince(start) < plan.delayMs) std::this_thread::sleep_for(std::chrono::microseconds(500));
  } else {
    while (!poll() && !logShows(logFile, offset, plan.line) && millisecondsSince(start) < 60000)
      std::this_thread::sleep_for(std::chrono::microseconds(500));
    const auto seen = std::chrono::steady_clock::now();
    while (!poll() && millisecondsSince(seen) < plan.jitterMs) std::this_thread::sleep_for(std::chrono::microseconds(500));
  }
  if (exited) return false;
  ::kill(pid, SIGKILL);
  ::waitpid(pid, &status, 0);
  return WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
}

// An uninterrupted run's timeline: its exit code, its length and when `line` first showed in its
// output (-1: never), both in ms from the start.
struct RunTiming {
  int exitCode = -1, totalMs = -1, lineMs = -1;
};

inline RunTiming runTimed(const std::vector<std::string>& args, const std::string& logFile, const std::string& line,
                          double seconds) {
  RunTiming timing;
  const size_t offset = readAll(logFile).size();
  const pid_t pid = spawnLogged(args, logFile);
  if (pid < 0) return timing;
  const auto start = std::chrono::steady_clock::now();
  int status = 0;
  while (::waitpid(pid, &status, WNOHANG) != pid) {
    if (timing.lineMs < 0 && logShows(logFile, offset, line)) timing.lineMs = millisecondsSince(start);
    if (millisecondsSince(start) > seconds * 1000) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      return timing;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(500));
  }
  timing.totalMs = millisecondsSince(start);
  if (timing.lineMs < 0 && logShows(logFile, offset, line)) timing.lineMs = timing.totalMs;
  timing.exitCode = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return timing;
}

}  // namespace hh::test::crash
