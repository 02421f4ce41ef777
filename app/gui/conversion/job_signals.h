// JobSignals: what every job runner of the workbench reports (JobRunner: a conversion on a worker
// thread of this process; ProcessJobRunner: the CLI on several processes; ExperimentProcesses:
// an experiment's variants on processes), and how each is paused, so the main window wires them
// the same way, once.
#pragma once
#include <QObject>
#include <QString>

namespace hh::gui {

class JobSignals : public QObject {
  Q_OBJECT

 public:
  using QObject::QObject;

  // Pause / resume the running job (no-ops when none runs). paused(): asked for, not yet resumed;
  // the job itself waits at its next training step (a single process also in its other cancel polls).
  virtual void pause() {}
  virtual void resume() {}
  virtual bool paused() const { return false; }

 Q_SIGNALS:
  // A stage's run file exists (the dashboard follows it).
  void runFileStarted(const QString& path);
  // etaSeconds < 0: not known yet.
  void progress(qint64 step, qint64 total, const QString& phase, double etaSeconds);
  void logLine(const QString& line);
  // status: completed | failed | cancelled
  void finished(const QString& status, const QString& message, const QString& runFile, const QString& exportPath);
  // A job started (true) or ended (false).
  void runningChanged(bool running);
  // Follows pause() and resume() (and false when a paused job ends).
  void pausedChanged(bool paused);
};

}  // namespace hh::gui
