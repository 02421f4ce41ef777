// ProcessJobRunner: runs the CLI for the workbench and follows it: a conversion data-parallel on
// several local processes, `hedgehog convert --config <run_dir>/project.json --nproc N` (the
// launcher starts N ranks on c10d/Gloo over loopback; app/cli/rank_processes.h), or one variant
// of an experiment (startExperimentVariant). It follows the CLI through its stdout in
// `--progress jsonl` (one JSON event per line, app/cli/progress_format.h; a launcher's stdout is
// rank 0's). It has JobRunner's signals, so the main window wires both runners the same way:
//   {"event":"run_file","path":X}  -> runFileStarted(X made absolute against the process's working
//                                     folder), one per stage as the stage creates it
//   {"event":"progress",...}       -> progress(step, total, phase, eta_s or -1 when null)
//   "log" events, "processes", and every stderr line -> logLine
//   {"event":"end",...}            -> the result: its message, the convert run file, the export
//   exit                           -> finished(status, message, runFile, exportPath): status from
//                                     the exit code (0 completed, 130 cancelled, else failed);
//                                     message from the end event or, for a failure, the stderr
//                                     line "hedgehog: error: MSG" ("hedgehog: cancelled: MSG")
// A stdout line that is not a JSON object (a library's own print) is shown as a log line.
// cancel() sends SIGTERM to the launcher, which interrupts every rank (they stop at the same step
// and mark their run files cancelled, exit 130); rank 0 then saves its checkpoint, however long
// that takes: nothing is killed. A second cancel() (the user's force-stop) sends another SIGTERM,
// which the launcher passes on as a second interrupt that ends the ranks at once; the launcher is
// killed if it still runs kKillAfterMs later.
// pause() sends SIGUSR1 to the CLI (the launcher passes it on to every rank), repeated every
// kRepeatPauseMs while paused; every rank then waits at its next training step, together (an
// evaluation under way finishes first). resume() sends SIGUSR2; a cancel while paused stops the
// job at that step (app/cli/pause_signals.h).
// The destructor cancels a running job and waits for it, as JobRunner's does. On Linux the
// launcher also gets SIGTERM if the workbench dies (PR_SET_PDEATHSIG).
// The project file: jobs::toJson(config) with run_dir (and output_dir) absolute. The CLI refuses
// an absolute output_dir in a file outside the working folder and the file's folder; such an
// output_dir is passed as `--output` instead (flags are not checked) and left empty in the file.
#pragma once
#include <QObject>
#include <QString>
#include <QStringList>

#include "app/gui/conversion/job_signals.h"
#include "engine/jobs/convert_job.h"

class QJsonObject;
class QProcess;
class QTimer;

namespace hh::gui {

class ProcessJobRunner : public JobSignals {  // JobSignals: the signals above
  Q_OBJECT

 public:
  static constexpr int kKillAfterMs = 30000;
  static constexpr int kRepeatPauseMs = 1000;

  explicit ProcessJobRunner(QObject* parent = nullptr);
  ~ProcessJobRunner() override;

  // The CLI next to the workbench: QCoreApplication::applicationDirPath() + "/hedgehog".
  static QString defaultBinary();
  // Why `binary` cannot run `command` (missing, not executable; the message names both), or "".
  static QString missingCli(const QString& binary, const QString& command);
  // The CLI to start (tests point it at the built one); default defaultBinary().
  void setBinary(const QString& path) { binary_ = path; }
  QString binary() const { return binary_; }

  bool running() const;
  int processes() const { return processes_; }
  // The project file of the last start (empty before).
  QString projectFile() const { return projectFile_; }
  // Writes <run_dir>/project.json and starts the CLI on `processes` (>= 2) ranks. Returns an
  // empty string, or why nothing started (a job already running, the CLI missing, the file not
  // writable, the process not starting).
  QString startConvert(const jobs::ConvertConfig& config, int processes);
  // Starts one variant of an experiment file, `hedgehog experiment --config FILE --only NAME
  // --resume` (app/gui/experiments/experiment_processes.h runs several so); `runDir` is the
  // variant's folder. threads > 0: the process's HH_NUM_THREADS, unless the workbench's own
  // environment sets it. Returns an empty string or why it did not start.
  QString startExperimentVariant(const QString& projectPath, const QString& variant, const QString& runDir,
                                 int threads);
  // SIGTERM to the launcher (no-op when nothing runs); a second call also kills it after
  // killAfterMs() (see above).
  void cancel();
  // How long after the second cancel a launcher still running is killed (tests shorten it).
  void setKillAfterMs(int ms) { killAfterMs_ = ms; }
  int killAfterMs() const { return killAfterMs_; }
  bool cancelRequested() const { return cancelled_; }
  void pause() override;
  void resume() override;
  bool paused() const override { return paused_; }
  // Blocks until the process has exited (tests, the destructor); true if it did within `ms`
  // (-1: no limit). Its finished() is emitted from inside.
  bool wait(int ms);

 private:
  // Starts `binary --progress jsonl ARGUMENTS` in workingDir_; false with startError_ set when it
  // did not start.
  bool startProcess(const QStringList& arguments, int processes, int threads);
  void readStdout();
  void readStderr();
  void handleLine(const QByteArray& line);
  void handleEvent(const QJsonObject& event);
  void onExited(int exitCode, bool crashed);
  void signalPause(int signal);  // to the CLI's process, when it runs

  QString binary_;
  QProcess* process_ = nullptr;
  QTimer* killTimer_ = nullptr;
  QTimer* pauseTimer_ = nullptr;
  int processes_ = 0;
  int killAfterMs_ = kKillAfterMs;
  bool cancelled_ = false, killed_ = false, paused_ = false;
  QString projectFile_, workingDir_, runDir_, startError_;
  // What the output said so far (reset per start).
  QString summaryMessage_, errorLine_, lastStderr_, resultRunFile_, exportPath_;
};

}  // namespace hh::gui
