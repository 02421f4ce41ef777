// JobRunner: runs a conversion (engine/jobs/convert_job.h) on a worker thread for the workbench.
// The job reports through an observer whose calls come back to the GUI thread as queued signals
// (progress at most every kProgressMs, each stage's run file as it is created); cancel() sets a
// flag the job polls every step, so it stops within a step and marks its run file cancelled.
// The destructor cancels a running job and waits for it.
#pragma once
#include <QObject>
#include <QString>

#include <atomic>
#include <memory>

#include "engine/jobs/convert_job.h"

class QThread;

namespace hh::gui {

class JobRunner : public QObject {
  Q_OBJECT

 public:
  static constexpr int kProgressMs = 100;

  explicit JobRunner(QObject* parent = nullptr);
  ~JobRunner() override;

  bool running() const;
  // False (and nothing starts) when a job is already running.
  bool startConvert(const jobs::ConvertConfig& config);
  void cancel();
  // Blocks until the job has finished (tests); true if it did within `ms`.
  bool wait(int ms);

 Q_SIGNALS:
  void runFileStarted(const QString& path);
  void progress(qint64 step, qint64 total, const QString& phase, double etaSeconds);
  void logLine(const QString& line);
  // status: completed | failed | cancelled
  void finished(const QString& status, const QString& message, const QString& runFile, const QString& exportPath);

 private:
  QThread* thread_ = nullptr;
  std::shared_ptr<std::atomic<bool>> cancel_;
};

}  // namespace hh::gui
