#include "app/gui/job_runner.h"

#include <QThread>

#include <chrono>

namespace hh::gui {
namespace {

// The job's observer: forwards to the runner's signals (queued to the GUI thread by Qt, since
// they are emitted on the worker thread), throttling progress.
class SignalObserver : public jobs::JobObserver {
 public:
  SignalObserver(JobRunner* runner, std::shared_ptr<std::atomic<bool>> cancel) : runner_(runner), cancel_(std::move(cancel)) {}

  void started(const std::string& runPath, int64_t) override {
    stageStart_ = Clock::now();
    lastProgress_ = {};
    Q_EMIT runner_->runFileStarted(QString::fromStdString(runPath));
  }
  void progress(int64_t step, int64_t total, const std::string& phase) override {
    const auto now = Clock::now();
    if (step < total && now - lastProgress_ < std::chrono::milliseconds(JobRunner::kProgressMs)) return;
    lastProgress_ = now;
    if (step <= 0 || firstStep_ < 0 || step < firstStep_) {
      firstStep_ = step;
      stageStart_ = now;
    }
    const double elapsed = std::chrono::duration<double>(now - stageStart_).count();
    const double eta = step > firstStep_ && total > step ? elapsed / double(step - firstStep_) * double(total - step) : -1;
    Q_EMIT runner_->progress(step, total, QString::fromStdString(phase), eta);
  }
  void log(const std::string& line) override { Q_EMIT runner_->logLine(QString::fromStdString(line)); }
  bool cancelled() override { return cancel_->load(); }

 private:
  using Clock = std::chrono::steady_clock;
  JobRunner* runner_;
  std::shared_ptr<std::atomic<bool>> cancel_;
  Clock::time_point stageStart_ = Clock::now(), lastProgress_{};
  int64_t firstStep_ = -1;
};

}  // namespace

JobRunner::JobRunner(QObject* parent) : QObject(parent) {}

JobRunner::~JobRunner() {
  cancel();
  wait(-1);
}

bool JobRunner::running() const {
  return thread_ && thread_->isRunning();
}

bool JobRunner::startConvert(const jobs::ConvertConfig& config) {
  if (running()) return false;
  if (thread_) thread_->deleteLater();
  cancel_ = std::make_shared<std::atomic<bool>>(false);
  auto cancel = cancel_;
  thread_ = QThread::create([this, config, cancel] {
    SignalObserver observer(this, cancel);
    try {
      const auto r = jobs::runConvert(config, observer);
      Q_EMIT finished(QString::fromLatin1(jobs::toString(r.status)), QString::fromStdString(r.message),
                      QString::fromStdString(r.runFile), QString::fromStdString(r.exportPath));
    } catch (const std::exception& e) {
      Q_EMIT finished(QStringLiteral("failed"), QString::fromStdString(e.what()), QString(), QString());
    }
  });
  thread_->start();
  return true;
}

void JobRunner::cancel() {
  if (cancel_) cancel_->store(true);
}

bool JobRunner::wait(int ms) {
  if (!thread_) return true;
  return ms < 0 ? thread_->wait() : thread_->wait(QDeadlineTimer(ms));
}

}  // namespace hh::gui
