// An experiment's variants on several processes of the CLI (see experiment_processes.h).
#include "app/gui/experiments/experiment_processes.h"

#include <QCoreApplication>
#include <QDir>
#include <QFileInfo>
#include <QThread>

#include <algorithm>

#include "app/gui/conversion/process_job_runner.h"
#include "engine/jobs/experiment_job.h"

namespace hh::gui {
namespace {

// Why variant `name` failed as its record says (the job's own message); `otherwise` when it has
// no record of a failure (its process failed before its job ran, or was killed).
QString recordedFailure(const jobs::ExperimentConfig& config, const QString& name, const QString& otherwise) {
  jobs::VariantResult record;
  const bool failed = jobs::variantRecord(config, name.toStdString(), record) &&
                      record.status == jobs::JobStatus::Failed && !record.message.empty();
  return failed ? QString::fromStdString(record.message) : otherwise;
}

}  // namespace

ExperimentProcesses::ExperimentProcesses(QObject* parent)
    : JobSignals(parent), binary_(ProcessJobRunner::defaultBinary()) {}

ExperimentProcesses::~ExperimentProcesses() {
  // Every child is cancelled first, then waited for (each runner's destructor waits): one saving
  // its checkpoint does not hold back the others' cancel. Nobody is told.
  for (auto& child : children_) {
    disconnect(child->runner, nullptr, this, nullptr);
    if (!child->runner->cancelRequested()) child->runner->cancel();
  }
  for (auto& child : children_) child->runner->wait(-1);
}

int ExperimentProcesses::defaultParallel(int pending) {
  return std::clamp(QThread::idealThreadCount() / 2, 1, std::max(1, pending));
}

QString ExperimentProcesses::start(const QString& projectPath, const jobs::ExperimentConfig& config,
                                   const QStringList& names, int parallel) {
  if (running()) return tr("a job is already running");
  if (names.isEmpty()) return tr("%1: no variant to run").arg(projectPath);
  if (parallel < 1) return tr("variants at once must be at least 1 (got %1)").arg(parallel);
  const QString missing = ProcessJobRunner::missingCli(binary_, QStringLiteral("hedgehog experiment --only NAME"));
  if (!missing.isEmpty()) return missing;
  projectPath_ = QFileInfo(projectPath).absoluteFilePath();
  config_ = config;
  queue_ = names;
  next_ = 0;
  parallel_ = parallel;
  threads_ = std::max(1, QThread::idealThreadCount() / parallel);
  cancelled_ = paused_ = false;
  active_ = true;
  followed_ = nullptr;
  ran_.clear();
  failures_.clear();
  Q_EMIT runningChanged(true);
  launchMore();
  return {};
}

void ExperimentProcesses::launchMore() {
  while (!cancelled_ && !paused_ && next_ < queue_.size() && static_cast<int>(children_.size()) < parallel_)
    launch(queue_[next_++]);
  Q_EMIT variantsChanged();
  if (!children_.empty() || (!cancelled_ && next_ < queue_.size())) return;  // paused: the rest wait
  active_ = false;
  if (paused_) {
    paused_ = false;
    Q_EMIT pausedChanged(false);
  }
  Q_EMIT runningChanged(false);
  Q_EMIT childrenEnded(ran_, failures_, cancelled_);
}

void ExperimentProcesses::launch(const QString& name) {
  auto child = std::make_unique<Child>();
  child->name = name;
  child->runDir =
      QString::fromStdString(jobs::variantConfig(config_, name.toStdString()).at("run_dir").get<std::string>());
  const QString& runDir = child->runDir;
  QDir().mkpath(runDir);
  child->log = std::make_unique<QFile>(QDir(runDir).filePath(QStringLiteral("experiment.log")));
  if (!child->log->open(QIODevice::WriteOnly | QIODevice::Truncate | QIODevice::Text)) child->log.reset();
  child->runner = new ProcessJobRunner(this);
  child->runner->setBinary(binary_);
  child->runner->setKillAfterMs(kForceStopMs);
  Child* c = child.get();
  connect(c->runner, &ProcessJobRunner::runFileStarted, this, [this, c](const QString& path) {
    c->runFile = path;  // the runner logs it too
    if (c == followed_) Q_EMIT runFileStarted(path);
  });
  connect(c->runner, &ProcessJobRunner::progress, this,
          [this, c](qint64 step, qint64 total, const QString& phase, double eta) {
            if (c == followed_) Q_EMIT progress(step, total, phase, eta);  // "[2/12 name] training"
          });
  connect(c->runner, &ProcessJobRunner::logLine, this, [this, c](const QString& line) { writeLog(c, line); });
  connect(c->runner, &ProcessJobRunner::finished, this,
          [this, c](const QString& status, const QString& message) { childEnded(c, status, message); });
  c->clock.start();
  const QString error = c->runner->startExperimentVariant(projectPath_, name, runDir, threads_);
  if (!error.isEmpty()) {
    writeLog(c, error);
    c->runner->deleteLater();
    ran_ << name;
    failures_[name] = error;
    Q_EMIT logLine(QStringLiteral("[%1] did not start: %2").arg(name, error));
    return;
  }
  Q_EMIT logLine(tr("[%1] started (%2 thread(s); log %3)")
                     .arg(name)
                     .arg(threads_)
                     .arg(c->log ? c->log->fileName() : tr("not writable")));
  children_.push_back(std::move(child));
  if (!followed_) follow(c);
}

void ExperimentProcesses::childEnded(Child* child, const QString& status, const QString& message) {
  const auto it = std::find_if(children_.begin(), children_.end(), [child](const auto& c) { return c.get() == child; });
  if (it == children_.end()) return;
  ran_ << child->name;
  // The process's own last word on a failed variant is the experiment's ("1 of 3 variants ...,
  // 1 failed"): the variant's record says why it failed.
  const QString why = status == QLatin1String("failed") ? recordedFailure(config_, child->name, message) : message;
  if (status == QLatin1String("failed")) failures_[child->name] = why;
  Q_EMIT logLine(tr("[%1] %2 after %3 s%4")
                     .arg(child->name, status)
                     .arg(child->clock.elapsed() / 1000.0, 0, 'f', 1)
                     .arg(why.isEmpty() ? QString() : QStringLiteral(": ") + why));
  child->runner->deleteLater();  // it is inside its own signal
  const bool wasFollowed = child == followed_;
  std::unique_ptr<Child> ended = std::move(*it);
  children_.erase(it);
  if (wasFollowed) follow(children_.empty() ? nullptr : children_.front().get());
  launchMore();  // also says when the last one has ended
}

void ExperimentProcesses::follow(Child* child) {
  followed_ = child;
  if (child && !child->runFile.isEmpty()) Q_EMIT runFileStarted(child->runFile);
}

void ExperimentProcesses::writeLog(Child* child, const QString& line) {
  if (!child->log) return;
  child->log->write(line.toUtf8() + '\n');
  child->log->flush();
}

void ExperimentProcesses::cancel() {
  if (!running()) return;
  // No new variant starts; each running one is cancelled, or force-stopped by a second call.
  cancelled_ = true;
  for (auto& child : children_) child->runner->cancel();
  if (children_.empty()) launchMore();  // paused with none running: the experiment ends here
}

// Every running variant waits at its next step, and none of those waiting starts, until resume().
void ExperimentProcesses::pause() {
  if (!running() || paused_ || cancelled_) return;
  paused_ = true;
  for (auto& child : children_) child->runner->pause();
  Q_EMIT logLine(tr("paused: %1 running variant(s) wait at their next step; %2 waiting")
                     .arg(children_.size())
                     .arg(queue_.size() - next_));
  Q_EMIT pausedChanged(true);
}

void ExperimentProcesses::resume() {
  if (!paused_) return;
  paused_ = false;
  for (auto& child : children_) child->runner->resume();
  Q_EMIT logLine(tr("resumed"));
  Q_EMIT pausedChanged(false);
  launchMore();
}

bool ExperimentProcesses::wait(int ms) {
  QElapsedTimer clock;
  clock.start();
  while (running()) {
    const int left = ms < 0 ? -1 : ms - static_cast<int>(clock.elapsed());
    if (ms >= 0 && left <= 0) return false;
    if (children_.empty()) {  // paused between variants
      QCoreApplication::processEvents();
      QThread::msleep(5);
      continue;
    }
    const Child* front = children_.front().get();
    front->runner->wait(left);  // its end (and what follows it) is handled inside
    // Ended but not yet told: let its finished signal through.
    if (!children_.empty() && children_.front().get() == front) {
      QCoreApplication::processEvents();
      QThread::msleep(5);
    }
  }
  return true;
}

QStringList ExperimentProcesses::runningVariants() const {
  QStringList names;
  for (const auto& child : children_) names << child->name;
  return names;
}

bool ExperimentProcesses::followVariant(const QString& name) {
  for (const auto& child : children_)
    if (child->name == name) {
      follow(child.get());
      return true;
    }
  return false;
}

QString ExperimentProcesses::followedVariant() const {
  return followed_ ? followed_->name : QString();
}

}  // namespace hh::gui
