#include "app/gui/conversion/job_runner.h"

#include <QThread>

#include <chrono>
#include <condition_variable>
#include <mutex>

#include "engine/core/error_text.h"
#include "engine/core/process_memory.h"
#include "engine/core/runtime.h"
#include "engine/jobs/stage_eta.h"

namespace hh::gui {

// Shared by the runner (GUI thread) and the job's observer (worker thread).
struct JobRunner::Control {
  std::mutex mutex;
  std::condition_variable wake;  // signalled on resume and cancel
  bool cancel = false, paused = false;

  // The job's cancel check: blocks while paused (sleeping on `wake`), then says whether to stop.
  bool check() {
    std::unique_lock<std::mutex> lock(mutex);
    wake.wait(lock, [this] { return cancel || !paused; });
    return cancel;
  }
  bool cancelAsked() {
    std::lock_guard<std::mutex> lock(mutex);
    return cancel;
  }
  void setCancel() { update([this] { cancel = true; }); }
  void setPaused(bool value) { update([this, value] { paused = value; }); }
  bool isPaused() {
    std::lock_guard<std::mutex> lock(mutex);
    return paused;
  }
  template <typename Change>
  void update(Change change) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      change();
    }
    wake.notify_all();
  }
};

namespace {

// The job's observer: forwards to the runner's signals (queued to the GUI thread by Qt, since
// they are emitted on the worker thread), throttling progress.
class SignalObserver : public jobs::JobObserver {
 public:
  SignalObserver(JobRunner* runner, std::shared_ptr<JobRunner::Control> control)
      : runner_(runner), control_(std::move(control)) {}

  void started(const std::string& runPath, int64_t) override {
    eta_.restart();
    lastProgress_ = {};
    Q_EMIT runner_->runFileStarted(QString::fromStdString(runPath));
  }
  void progress(int64_t step, int64_t total, const std::string& phase) override {
    const auto now = Clock::now();
    if (step < total && now - lastProgress_ < std::chrono::milliseconds(JobRunner::kProgressMs)) return;
    lastProgress_ = now;
    Q_EMIT runner_->progress(step, total, QString::fromStdString(phase), eta_.secondsLeft(step, total, now));
  }
  void log(const std::string& line) override { Q_EMIT runner_->logLine(QString::fromStdString(line)); }
  // At a training step the step gate waits (and logs the pause in the run); elsewhere the cancel
  // poll blocks while paused, the time it blocked left out of the estimate.
  bool cancelRequested() override { return control_->cancelAsked(); }
  bool pauseRequested() override { return control_->isPaused(); }
  void paused(bool paused, int64_t) override {
    if (paused)
      pausedAt_ = Clock::now();
    else
      eta_.leaveOut(Clock::now() - pausedAt_);
  }
  bool cancelled() override {
    const auto asked = Clock::now();
    const bool stop = control_->check();
    if (const auto waited = Clock::now() - asked; waited > std::chrono::milliseconds(100)) eta_.leaveOut(waited);
    return stop;
  }

 private:
  using Clock = std::chrono::steady_clock;
  JobRunner* runner_;
  std::shared_ptr<JobRunner::Control> control_;
  Clock::time_point lastProgress_{}, pausedAt_{};
  jobs::StageEta eta_;  // restarted by started(): a conversion's stages share this observer
};

}  // namespace

JobRunner::JobRunner(QObject* parent) : JobSignals(parent) {}

JobRunner::~JobRunner() {
  cancel();
  wait(-1);
}

bool JobRunner::running() const {
  return thread_ && thread_->isRunning();
}

bool JobRunner::startConvert(const jobs::ConvertConfig& config) {
  return start(QStringLiteral("convert"), [config](jobs::JobObserver& observer) {
    const auto r = jobs::runConvert(config, observer);
    return Outcome{QString::fromLatin1(jobs::toString(r.status)), QString::fromStdString(r.message),
                   QString::fromStdString(r.runFile), QString::fromStdString(r.exportPath)};
  });
}

bool JobRunner::startExperiment(const jobs::ExperimentConfig& config, const jobs::ExperimentOptions& options) {
  return start(QStringLiteral("experiment"), [config, options](jobs::JobObserver& observer) {
    const auto r = jobs::runExperiment(config, observer, options);
    return Outcome{QString::fromLatin1(jobs::toString(r.status)), QString::fromStdString(r.message),
                   QString::fromStdString(r.summaryJson), QString()};
  });
}

bool JobRunner::start(const QString& kind, std::function<Outcome(jobs::JobObserver&)> job) {
  if (running()) return false;
  if (thread_) thread_->deleteLater();
  control_ = std::make_shared<Control>();
  kind_ = kind;
  auto control = control_;
  const int threads = hh::runtimeInfo().intraOpThreads;
  thread_ = QThread::create([this, job = std::move(job), control, threads] {
    hh::applyThreadCount(threads);  // OpenMP and OpenBLAS settings do not carry over to a new thread
    SignalObserver observer(this, control);
    try {
      const Outcome r = job(observer);
      Q_EMIT finished(r.status, r.message, r.runFile, r.exportPath);
    } catch (const std::exception& e) {
      Q_EMIT finished(QStringLiteral("failed"), QString::fromStdString(hh::errorText(e)), QString(), QString());
    }
  });
  // Queued from the worker's finished(): by then the job has returned (running() is false).
  connect(thread_, &QThread::finished, this, [this, control] {
    if (control != control_) return;  // an older job's thread
    // The job's models, optimiser state and activations are gone with its thread: give the
    // allocator's free pages back, so a finished conversion does not hold them.
    hh::releaseFreeMemory();
    if (control->isPaused()) {
      control->setPaused(false);
      Q_EMIT pausedChanged(false);
    }
    Q_EMIT runningChanged(false);
  });
  thread_->start();
  Q_EMIT runningChanged(true);
  return true;
}

void JobRunner::cancel() {
  if (control_) control_->setCancel();
}

void JobRunner::pause() {
  if (!running() || !control_ || control_->isPaused()) return;
  control_->setPaused(true);
  Q_EMIT pausedChanged(true);
}

void JobRunner::resume() {
  if (!control_ || !control_->isPaused()) return;
  control_->setPaused(false);
  Q_EMIT pausedChanged(false);
}

bool JobRunner::paused() const {
  return control_ && control_->isPaused();
}

bool JobRunner::wait(int ms) {
  if (!thread_) return true;
  return ms < 0 ? thread_->wait() : thread_->wait(QDeadlineTimer(ms));
}

}  // namespace hh::gui
