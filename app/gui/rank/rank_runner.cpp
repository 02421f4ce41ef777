// RankRunner: the rank job on a worker thread (see rank_runner.h).
#include "app/gui/rank/rank_runner.h"
#include "engine/core/error_text.h"

#include <QDeadlineTimer>
#include <QThread>

#include <chrono>
#include <thread>

#include "engine/core/process_memory.h"
#include "engine/core/runtime.h"

namespace hh::gui {
namespace {

// The job's observer: forwards to the runner's signals (queued to the GUI thread by Qt, since
// they are emitted on the worker thread), throttling progress; polls the cancel and pause flags:
// training waits at the step gate while paused, any other poll here.
class RankObserver : public jobs::JobObserver {
 public:
  RankObserver(RankRunner* runner, const std::atomic<bool>* cancel, const std::atomic<bool>* pause)
      : runner_(runner), cancel_(cancel), pause_(pause) {}

  void progress(int64_t step, int64_t total, const std::string& phase) override {
    const auto now = Clock::now();
    if (step < total && now - last_ < std::chrono::milliseconds(RankRunner::kProgressMs)) return;
    last_ = now;
    Q_EMIT runner_->progress(step, total, QString::fromStdString(phase));
  }
  void log(const std::string& line) override { Q_EMIT runner_->logLine(QString::fromStdString(line)); }
  bool cancelRequested() override { return cancel_->load(); }
  bool pauseRequested() override { return pause_->load(); }
  bool cancelled() override {
    while (pause_->load() && !cancel_->load()) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    return cancel_->load();
  }

 private:
  using Clock = std::chrono::steady_clock;
  RankRunner* runner_;
  const std::atomic<bool>*cancel_, *pause_;
  Clock::time_point last_{};
};

}  // namespace

RankRunner::RankRunner(QObject* parent) : QObject(parent) {}

RankRunner::~RankRunner() {
  cancel();
  wait(-1);
}

bool RankRunner::running() const { return thread_ && thread_->isRunning(); }

bool RankRunner::start(const jobs::RankConfig& config) {
  if (running()) return false;
  if (thread_) thread_->deleteLater();
  config_ = config;
  outcome_ = std::make_shared<Outcome>();
  auto outcome = outcome_;
  const int threads = hh::runtimeInfo().intraOpThreads;
  thread_ = QThread::create([this, config, outcome, threads] {
    hh::applyThreadCount(threads);  // OpenMP and OpenBLAS settings do not carry over to a new thread
    RankObserver observer(this, &outcome->cancel, &outcome->pause);
    try {
      outcome->result = jobs::runRank(config, observer);
    } catch (const std::exception& e) {
      outcome->result = {};
      outcome->result.status = jobs::JobStatus::Failed;
      outcome->result.message = hh::errorText(e);  // a Torch error without its stack trace
    }
  });
  thread_->setParent(this);  // deleted with the runner, after the destructor has waited for it
  // Queued from the worker thread: by then the job has returned and its result is written.
  connect(thread_, &QThread::finished, this, [this, outcome] {
    if (outcome != outcome_) return;  // an older job's thread
    hh::releaseFreeMemory();          // the job's models and activations are gone with its thread
    result_ = outcome->result;
    if (outcome->pause.exchange(false)) Q_EMIT pausedChanged(false);
    Q_EMIT runningChanged(false);
    Q_EMIT finished(QString::fromLatin1(jobs::toString(result_.status)), QString::fromStdString(result_.message));
  });
  thread_->start();
  Q_EMIT runningChanged(true);
  return true;
}

void RankRunner::cancel() {
  if (outcome_) outcome_->cancel = true;
}

void RankRunner::pause() {
  if (!running() || paused()) return;
  outcome_->pause = true;
  Q_EMIT pausedChanged(true);
}

void RankRunner::resume() {
  if (!paused()) return;
  outcome_->pause = false;
  Q_EMIT pausedChanged(false);
}

bool RankRunner::paused() const {
  return outcome_ && outcome_->pause.load();
}

bool RankRunner::wait(int ms) {
  if (!thread_) return true;
  return ms < 0 ? thread_->wait() : thread_->wait(QDeadlineTimer(ms));
}

}  // namespace hh::gui
