#include "app/cli/cli_observer.h"

#include "app/cli/pause_signals.h"
#include "app/cli/progress_format.h"

#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "engine/distributed/world.h"

namespace hh::cli {
namespace {
std::atomic<int> gInterrupts{0};  // cancel requests: Ctrl-C or SIGTERM
std::atomic<int> gCtrlCs{0};      // SIGINTs alone: the second one kills
void onInterrupt(int) {
  if (gCtrlCs.fetch_add(1) >= 1) std::_Exit(130);
  gInterrupts.fetch_add(1);
}
// SIGTERM (a `kill`, or the parent-death signal of a launcher's child) cancels like a Ctrl-C and
// never kills, nor counts towards the second Ctrl-C that does: after a cancel, the job may be
// saving its checkpoint. A rank sent a SIGINT as its launcher dies gets both, in either order
// (two threads may take them): counted together they killed it before it had written its end.
// Installed for good.
void onTerminate(int) {
  int none = 0;
  gInterrupts.compare_exchange_strong(none, 1);
}
std::string formatSeconds(double s) {
  char buffer[32];
  if (s >= 3600) std::snprintf(buffer, sizeof buffer, "%dh%02dm", int(s / 3600), int(s / 60) % 60);
  else std::snprintf(buffer, sizeof buffer, "%dm%02ds", int(s / 60), int(s) % 60);
  return buffer;
}
std::string formatEta(double s) { return s < 0 ? "?" : formatSeconds(s); }  // < 0: not known yet
// Whether this process is a rank of several (a bad world is the job's to report, not this check's).
bool distributedRank() {
  try {
    return dist::worldFromEnvironment().distributed();
  } catch (const std::exception&) {
    return true;
  }
}
}  // namespace

CliObserver::CliObserver()
    : tty_(progressFormat() == ProgressFormat::Bar ||
           (progressFormat() == ProgressFormat::Auto && ::isatty(STDOUT_FILENO) != 0)),
      jsonl_(jsonlProgress()),
      waitsInPolls_(!distributedRank()),
      start_(std::chrono::steady_clock::now()),
      lastPlain_(start_) {
  if (const char* seconds = std::getenv("HH_PROGRESS_SECONDS")) {
    char* end = nullptr;
    const double value = std::strtod(seconds, &end);
    if (end != seconds && *end == '\0' && value >= 0 && value <= 3600) plainInterval_ = value;
  }
  gInterrupts = 0;
  gCtrlCs = 0;
  std::signal(SIGINT, onInterrupt);
  std::signal(SIGTERM, onTerminate);
}

CliObserver::~CliObserver() {
  if (barVisible_) std::printf("\n");
  std::signal(SIGINT, SIG_DFL);
  // SIGTERM stays a mere request: a rank whose launcher died as its job ended (the parent-death
  // signal) still prints its last lines and exits as it would have.
}

void CliObserver::started(const std::string& runPath, int64_t totalSteps) {
  eta_.restart();
  latest_.clear();  // a new stage: the last one's numbers are not this one's
  if (jsonl_) return emitEvent({{"event", "run_file"}, {"path", runPath}, {"total_steps", totalSteps}});
  std::printf("run file: %s\n", runPath.c_str());
  std::fflush(stdout);
}

void CliObserver::progress(int64_t step, int64_t total, const std::string& phase) {
  lastStep_ = step;
  lastPhase_ = phase;
  draw(step, total, phase);
}

void CliObserver::scalars(int64_t step, const std::map<std::string, double>& values) {
  if (jsonl_) emitEvent({{"event", "scalars"}, {"step", step}, {"values", values}});
  for (const auto& [k, v] : values) latest_[k] = v;
}

void CliObserver::log(const std::string& line) {
  if (jsonl_) return emitEvent({{"event", "log"}, {"line", line}});
  if (barVisible_) std::printf("\r\033[K");
  barVisible_ = false;
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
}

// A single process waits here while paused (in an evaluation, say: wherever the job polls); the
// ranks of a distributed job wait only at the step gate, together.
bool CliObserver::cancelled() {
  if (waitsInPolls_ && cli::pauseRequested() && gInterrupts.load() == 0) waitWhilePaused();
  return cancelRequested();
}

void CliObserver::waitWhilePaused() {
  const auto start = std::chrono::steady_clock::now();
  log("paused" + (lastPhase_.empty() ? std::string() : " in " + lastPhase_));
  paused(true, lastStep_);
  while (cli::pauseRequested() && gInterrupts.load() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  paused(false, lastStep_);
  char line[64];
  std::snprintf(line, sizeof line, "%s after %.1f s", gInterrupts.load() > 0 ? "cancelled while paused" : "resumed",
                std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  log(line);
}

bool CliObserver::cancelRequested() {
  if (gInterrupts.load() > 0 && barVisible_ && !jsonl_) {
    std::printf("\ncancelling (Ctrl-C again to kill)...\n");
    barVisible_ = false;
  }
  return gInterrupts.load() > 0;
}

bool CliObserver::pauseRequested() {
  return cli::pauseRequested();
}

// The job's own log line says "paused at step N" (and later "resumed ... after S s"); this adds
// how to go on, or the event for programs.
void CliObserver::paused(bool paused, int64_t step) {
  const auto now = std::chrono::steady_clock::now();
  if (paused)
    pausedAt_ = now;
  else
    eta_.leaveOut(now - pausedAt_);
  if (jsonl_) return emitEvent({{"event", "paused"}, {"paused", paused}, {"step", step}});
  if (!paused) return;
  const long target = static_cast<long>(pauseTarget());
  std::printf("  waiting: kill -USR2 %ld resumes, kill -INT %ld cancels\n", target, target);
  std::fflush(stdout);
}

void CliObserver::draw(int64_t step, int64_t total, const std::string& phase) {
  const auto now = std::chrono::steady_clock::now();
  if (!drawn_) drawn_ = true, start_ = now;
  const double elapsed = std::chrono::duration<double>(now - start_).count();  // since the first report
  const double eta = eta_.secondsLeft(step, total, now);                       // of this stage; < 0: unknown
  if (jsonl_)
    return emitEvent({{"event", "progress"}, {"step", step}, {"total", total}, {"phase", phase},
                      {"elapsed_s", elapsed}, {"eta_s", eta >= 0 ? nlohmann::json(eta) : nlohmann::json()}});
  std::string metrics;
  for (const char* key : {"loss", "val_kl", "val_loss", "kl_mean", "perplexity", "accuracy"}) {
    auto it = latest_.find(key);
    if (it == latest_.end()) continue;
    char buffer[64];
    std::snprintf(buffer, sizeof buffer, " %s %.4g", key, it->second);
    metrics += buffer;
  }
  if (tty_) {
    const int width = 28;
    const int filled = total > 0 ? int(double(width) * double(step) / double(total)) : 0;
    std::string bar(static_cast<size_t>(std::min(filled, width)), '#');
    bar.resize(width, '.');
    std::printf("\r\033[K[%s] %lld/%lld %s elapsed %s eta %s%s", bar.c_str(), (long long)step, (long long)total,
                phase.c_str(), formatSeconds(elapsed).c_str(), formatEta(eta).c_str(), metrics.c_str());
    barVisible_ = true;
  } else if (std::chrono::duration<double>(now - lastPlain_).count() >= plainInterval_ || step == total) {
    lastPlain_ = now;
    std::printf("[%s] step %lld/%lld %s eta %s%s\n", formatSeconds(elapsed).c_str(), (long long)step, (long long)total,
                phase.c_str(), formatEta(eta).c_str(), metrics.c_str());
  }
  std::fflush(stdout);
}

}  // namespace hh::cli
