// JobRunner: runs a conversion (engine/jobs/convert_job.h) or an experiment (experiment_job.h:
// its variants one after another) on a worker thread for the workbench.
// The job reports through an observer whose calls come back to the GUI thread as queued signals
// (progress at most every kProgressMs, each stage's run file as it is created); cancel() sets a
// flag the job polls every step, so it stops within a step and marks its run file cancelled.
// pause() makes a training job wait at its next step (the step gate, engine/distributed/
// step_gate.h: the run's log says when and for how long, the run file is flushed, the job's wall
// time leaves the pause out) and any other poll block (on a condition variable: no CPU while it
// waits) until resume() or cancel(); the run file stays "running", and a cancel while paused
// ends it as cancelled.
// The destructor cancels a running job and waits for it.
#pragma once
#include <QObject>
#include <QString>

#include <functional>
#include <memory>

#include "app/gui/conversion/job_signals.h"
#include "engine/jobs/convert_job.h"
#include "engine/jobs/experiment_job.h"

class QThread;

namespace hh::gui {

class JobRunner : public JobSignals {
  Q_OBJECT

 public:
  static constexpr int kProgressMs = 100;

  explicit JobRunner(QObject* parent = nullptr);
  ~JobRunner() override;

  bool running() const;
  // False (and nothing starts) when a job is already running.
  bool startConvert(const jobs::ConvertConfig& config);
  // The experiment's pending variants, each variant's run file reported as it starts; finished()
  // carries summary.json as its run file (written also after a cancel, listing what finished).
  bool startExperiment(const jobs::ExperimentConfig& config, const jobs::ExperimentOptions& options);
  // What the last start ran: "convert" or "experiment" ("" before any).
  QString kind() const { return kind_; }
  void cancel();
  // JobSignals' pause: the job waits at its next training step, or blocks in another cancel poll.
  void pause() override;
  void resume() override;
  bool paused() const override;
  // Blocks until the job has finished (tests); true if it did within `ms`.
  bool wait(int ms);

  struct Control;  // the cancel / pause state shared with the job's observer (job_runner.cpp)
  // What a job hands back to finished(): status, message, run file, export path.
  struct Outcome {
    QString status, message, runFile, exportPath;
  };

 private:
  bool start(const QString& kind, std::function<Outcome(jobs::JobObserver&)> job);

  QThread* thread_ = nullptr;
  std::shared_ptr<Control> control_;
  QString kind_;
};

}  // namespace hh::gui
