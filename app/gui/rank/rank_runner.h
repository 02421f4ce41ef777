// RankRunner: runs the rank job (engine/jobs/rank_job.h) on a worker thread for the workbench's
// Layer ranking tab, as JobRunner runs a conversion: the job's observer turns its calls into
// signals queued to the GUI thread (progress at most every kProgressMs), and cancel() sets a flag
// the job polls every step, so it stops within a step and ends Cancelled; pause() makes it wait at
// its next step (or its next cancel poll outside training) until resume() or cancel(). finished() comes once
// the worker thread has ended; result() then holds what the job returned (or a Failed result
// carrying the exception's message). The destructor cancels a running job and waits for it.
#pragma once
#include <QObject>
#include <QString>

#include <atomic>
#include <memory>

#include "engine/config/rank_config.h"
#include "engine/jobs/rank_job.h"

class QThread;

namespace hh::gui {

class RankRunner : public QObject {
  Q_OBJECT

 public:
  static constexpr int kProgressMs = 100;

  explicit RankRunner(QObject* parent = nullptr);
  ~RankRunner() override;

  bool running() const;
  // False (and nothing starts) when a job is already running.
  bool start(const jobs::RankConfig& config);
  void cancel();
  void pause();
  void resume();
  bool paused() const;  // asked for, not resumed
  // Blocks until the job has finished (tests); true if it did within `ms` (< 0: forever).
  bool wait(int ms);
  // The last job's result and config (valid after finished()).
  const jobs::RankResult& result() const { return result_; }
  const jobs::RankConfig& config() const { return config_; }

 Q_SIGNALS:
  void progress(qint64 step, qint64 total, const QString& phase);
  void logLine(const QString& line);
  // status: completed | failed | cancelled. Emitted on the GUI thread after the worker ended.
  void finished(const QString& status, const QString& message);
  void runningChanged(bool running);
  void pausedChanged(bool paused);  // follows pause() and resume(), and false when a paused job ends

 private:
  // What the worker thread fills in (read on the GUI thread once the thread has finished).
  struct Outcome {
    jobs::RankResult result;
    std::atomic<bool> cancel{false}, pause{false};
  };

  QThread* thread_ = nullptr;
  std::shared_ptr<Outcome> outcome_;
  jobs::RankResult result_;
  jobs::RankConfig config_;
};

}  // namespace hh::gui
