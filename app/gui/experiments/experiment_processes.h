// ExperimentProcesses: runs an experiment's pending variants from the workbench several at a time,
// each in a process of its own, as `hedgehog experiment --jobs N` does on the command line
// (app/cli/variant_processes.h): a ProcessJobRunner per variant starts `hedgehog experiment
// --config FILE --only NAME --resume`, at most `parallel` at once, in the order given, each with
// HH_NUM_THREADS = max(1, cores / parallel) unless the workbench's environment sets it. Each
// variant's output (its log lines and stderr) goes to <variant run_dir>/experiment.log, as the
// CLI's children write theirs. Run files are written by one process each (HDF5 here is not
// thread-safe for writers, hence processes).
// It reports as a JobSignals for one variant at a time, the one the dashboard follows: the
// earliest started of those still running; when it ends, the next running one is followed (its
// latest run file announced again); followVariant() picks another. Progress is the followed
// variant's (its phase names it: "[2/12 name] training"). Every start and end is a log line
// ("[name] started, log ...", "[name] completed after 12.3 s"), and variantsChanged() fires on
// each (the status bar's count).
// When the last child has ended, childrenEnded() gives the variants that ran, why each of those
// that failed did (its record's message, else the process's error line or how it ended), and
// whether the user cancelled; the caller then writes the summary from their records
// (runExperiment with summaryOnly, as the CLI's launcher does). finished() is never emitted: the
// summary's job emits it.
//
// pause(): every running variant waits at its next step and no other starts, until resume().
// cancel(): no new variant starts and every running one is cancelled (SIGTERM: it stops within a
// step and records itself cancelled, its checkpoint saved, so a later start resumes it). A second
// cancel force-stops: each process still running kForceStopMs later is killed. The destructor
// cancels what runs and waits for it; on Linux each child also gets SIGTERM if the workbench dies.
#pragma once
#include <QElapsedTimer>
#include <QFile>
#include <QMap>
#include <QObject>
#include <QString>
#include <QStringList>

#include <memory>
#include <vector>

#include "app/gui/conversion/job_signals.h"
#include "engine/config/experiment_config.h"

namespace hh::gui {

class ProcessJobRunner;

class ExperimentProcesses : public JobSignals {
  Q_OBJECT

 public:
  static constexpr int kForceStopMs = 2000;

  explicit ExperimentProcesses(QObject* parent = nullptr);
  ~ExperimentProcesses() override;

  // The CLI to start (tests point it at the built one); default ProcessJobRunner::defaultBinary().
  void setBinary(const QString& path) { binary_ = path; }
  // How many variants the workbench offers to run at once by default on this machine: half its
  // cores (at least 1), at most `pending`.
  static int defaultParallel(int pending);

  // From start() until childrenEnded(): also while paused with no variant running.
  bool running() const { return active_; }
  // Starts the variants `names` of the experiment file `projectPath` (parsed into `config`),
  // `parallel` (>= 1) at a time. Returns an empty string, or why nothing started (a run already
  // going, nothing to run, the CLI missing or not starting).
  QString start(const QString& projectPath, const jobs::ExperimentConfig& config, const QStringList& names,
                int parallel);
  void cancel();
  bool cancelRequested() const { return cancelled_; }
  // JobSignals' pause: every running variant's process waits at its next step (SIGUSR1,
  // ProcessJobRunner::pause) and no waiting variant starts; resume() lets them go on and starts
  // the rest as slots free.
  void pause() override;
  void resume() override;
  bool paused() const override { return paused_; }
  // Blocks until every child has ended (tests); true if they did within `ms` (-1: no limit).
  bool wait(int ms);

  int parallel() const { return parallel_; }
  QStringList runningVariants() const;
  int variantsEnded() const { return static_cast<int>(ran_.size()); }
  QStringList endedVariants() const { return ran_; }  // in the order they ended
  int variantsTotal() const { return static_cast<int>(queue_.size()); }
  // The variant the signals above follow ("" when none runs).
  QString followedVariant() const;
  // Follows the running variant `name` instead (its latest run file announced at once); false
  // when no such variant runs.
  bool followVariant(const QString& name);

 Q_SIGNALS:
  void variantsChanged();
  // ran: every variant whose process started (or failed to), in the order they ended; failures:
  // name -> why, for those that failed (not those cancelled).
  void childrenEnded(const QStringList& ran, const QMap<QString, QString>& failures, bool cancelled);

 private:
  struct Child {
    QString name, runDir;
    ProcessJobRunner* runner = nullptr;
    std::unique_ptr<QFile> log;
    QString runFile;  // the latest it announced
    QElapsedTimer clock;
  };

  void launchMore();
  void launch(const QString& name);
  void childEnded(Child* child, const QString& status, const QString& message);
  void follow(Child* child);
  void writeLog(Child* child, const QString& line);

  QString binary_;
  QString projectPath_;
  jobs::ExperimentConfig config_;
  QStringList queue_;
  int next_ = 0, parallel_ = 1, threads_ = 1;
  bool cancelled_ = false, paused_ = false, active_ = false;
  std::vector<std::unique_ptr<Child>> children_;  // running, in the order they started
  Child* followed_ = nullptr;
  QStringList ran_;
  QMap<QString, QString> failures_;
};

}  // namespace hh::gui
