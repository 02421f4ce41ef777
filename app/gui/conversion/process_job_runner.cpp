// Multi-process conversions through the CLI (see process_job_runner.h).
#include "app/gui/conversion/process_job_runner.h"

#include <QCoreApplication>
#include <QDir>
#include <QFileInfo>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QSaveFile>
#include <QTimer>

#include <csignal>

#ifdef __linux__
#include <sys/prctl.h>
#endif

namespace hh::gui {
namespace {

constexpr int kExitCancelled = 130;  // the CLI's status for a cancelled job

// The message of the CLI's last stderr line, "hedgehog: error: MSG" or (exit 130)
// "hedgehog: cancelled: MSG"; empty for any other line.
QString cliMessage(const QString& line) {
  for (const auto& prefix : {QStringLiteral("hedgehog: error: "), QStringLiteral("hedgehog: cancelled: ")})
    if (line.startsWith(prefix)) return line.mid(prefix.size());
  return {};
}

// Whether `path` is `folder` or inside it (both absolute and clean).
bool inside(const QString& path, const QString& folder) {
  return path == folder || path.startsWith(folder.endsWith(QLatin1Char('/')) ? folder : folder + QLatin1Char('/'));
}

QString absoluteIn(const QString& workingDir, const std::string& path) {
  return QDir::cleanPath(QDir(workingDir).absoluteFilePath(QString::fromStdString(path)));
}

}  // namespace

ProcessJobRunner::ProcessJobRunner(QObject* parent) : JobSignals(parent), binary_(defaultBinary()) {
  killTimer_ = new QTimer(this);
  killTimer_->setSingleShot(true);
  connect(killTimer_, &QTimer::timeout, this, [this] {
    if (!running()) return;
    killed_ = true;
    process_->kill();
  });
  pauseTimer_ = new QTimer(this);
  pauseTimer_->setInterval(kRepeatPauseMs);
  connect(pauseTimer_, &QTimer::timeout, this, [this] { signalPause(SIGUSR1); });
}

ProcessJobRunner::~ProcessJobRunner() {
  if (!running()) return;
  blockSignals(true);  // like JobRunner's destructor: the job ends, nobody is told
  if (!cancelled_) cancel();  // once only: a second cancel is a force-stop
  // No kill: rank 0 may be saving its checkpoint, and a JobRunner's job is waited for too.
  process_->waitForFinished(-1);
}

QString ProcessJobRunner::defaultBinary() {
  return QCoreApplication::applicationDirPath() + QStringLiteral("/hedgehog");
}

QString ProcessJobRunner::missingCli(const QString& binary, const QString& command) {
  const QFileInfo cli(binary);
  if (cli.isFile() && cli.isExecutable()) return {};
  return tr("%1: the command-line tool is missing or not executable; this runs `%2`, which must lie next to "
            "hedgehog-workbench")
      .arg(binary, command);
}

bool ProcessJobRunner::running() const {
  return process_ && process_->state() != QProcess::NotRunning;
}

QString ProcessJobRunner::startConvert(const jobs::ConvertConfig& config, int processes) {
  if (running()) return tr("a job is already running");
  if (processes < 1) return tr("processes must be at least 1 (got %1)").arg(processes);
  if (const QString missing = missingCli(binary_, QStringLiteral("hedgehog convert --nproc N")); !missing.isEmpty())
    return missing;

  // The project file, under the run folder, with the run and output folders absolute.
  workingDir_ = QDir::currentPath();
  jobs::ConvertConfig c = config;
  runDir_ = absoluteIn(workingDir_, c.runDir.empty() ? std::string("runs/convert") : c.runDir);
  c.runDir = runDir_.toStdString();
  QString outputFlag;
  if (!c.outputDir.empty()) {
    const QString output = absoluteIn(workingDir_, c.outputDir);
    // The CLI's check on output folders named in a file (engine/jobs/config_file.cpp).
    if (inside(output, runDir_) || inside(output, QDir::cleanPath(workingDir_))) {
      c.outputDir = output.toStdString();
    } else {
      outputFlag = output;
      c.outputDir.clear();
    }
  }
  if (!QDir().mkpath(runDir_)) return tr("%1: cannot create the run folder").arg(runDir_);
  const QString project = runDir_ + QStringLiteral("/project.json");
  projectFile_ = project;
  QSaveFile file(project);
  const QByteArray text = QByteArray::fromStdString(jobs::toJson(c).dump(2) + "\n");
  if (!file.open(QIODevice::WriteOnly) || file.write(text) != text.size() || !file.commit())
    return tr("%1: cannot write the project file: %2").arg(project, file.errorString());

  QStringList arguments{QStringLiteral("convert"), QStringLiteral("--config"), project, QStringLiteral("--nproc"),
                        QString::number(processes)};
  if (!outputFlag.isEmpty()) arguments << QStringLiteral("--output") << outputFlag;
  return startProcess(arguments, processes, 0) ? QString() : startError_;
}

QString ProcessJobRunner::startExperimentVariant(const QString& projectPath, const QString& variant,
                                                 const QString& runDir, int threads) {
  if (running()) return tr("a job is already running");
  if (const QString missing = missingCli(binary_, QStringLiteral("hedgehog experiment --only NAME"));
      !missing.isEmpty())
    return missing;
  workingDir_ = QDir::currentPath();
  runDir_ = QDir::cleanPath(QDir(workingDir_).absoluteFilePath(runDir));
  projectFile_ = projectPath;
  const QStringList arguments{
      QStringLiteral("experiment"), QStringLiteral("--config"), projectPath, QStringLiteral("--only"), variant,
      QStringLiteral("--resume")};
  return startProcess(arguments, 1, threads) ? QString() : startError_;
}

bool ProcessJobRunner::startProcess(const QStringList& arguments, int processes, int threads) {
  if (process_) process_->deleteLater();
  process_ = new QProcess(this);
  process_->setWorkingDirectory(workingDir_);
  process_->setProgram(binary_);
  process_->setArguments(QStringList{QStringLiteral("--progress"), QStringLiteral("jsonl")} + arguments);
  if (threads > 0 && !qEnvironmentVariableIsSet("HH_NUM_THREADS")) {
    QProcessEnvironment environment = QProcessEnvironment::systemEnvironment();
    environment.insert(QStringLiteral("HH_NUM_THREADS"), QString::number(threads));
    process_->setProcessEnvironment(environment);
  }
  // The CLI cancels on SIGTERM (a launcher passes it on to every rank): a workbench that dies
  // does not leave it running (Linux). The pause signals are ignored until the CLI's main()
  // installs its handlers: by default they would end it.
  process_->setChildProcessModifier([] {
#ifdef __linux__
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
#endif
    ::signal(SIGUSR1, SIG_IGN);
    ::signal(SIGUSR2, SIG_IGN);
  });
  connect(process_, &QProcess::readyReadStandardOutput, this, &ProcessJobRunner::readStdout);
  connect(process_, &QProcess::readyReadStandardError, this, &ProcessJobRunner::readStderr);
  QProcess* started = process_;
  connect(process_, &QProcess::finished, this, [this, started](int code, QProcess::ExitStatus status) {
    if (started == process_) onExited(code, status == QProcess::CrashExit);
  });
  processes_ = processes;
  cancelled_ = killed_ = paused_ = false;
  summaryMessage_.clear();
  errorLine_.clear();
  lastStderr_.clear();
  resultRunFile_.clear();
  exportPath_.clear();
  process_->start();
  if (!process_->waitForStarted(10000)) {
    startError_ = tr("%1: could not start: %2").arg(binary_, process_->errorString());
    process_->deleteLater();
    process_ = nullptr;
    return false;
  }
  Q_EMIT runningChanged(true);
  return true;
}

void ProcessJobRunner::cancel() {
  if (!running()) return;
  // The first cancel: every rank stops at the same step, then rank 0 saves its checkpoint and
  // closes the run file, which may take long; killing the launcher then cut that save short. A
  // second cancel is the user's force-stop: the launcher passes a second interrupt, which ends
  // the ranks at once, and is killed itself if it has not ended killAfterMs_ later.
  const bool again = cancelled_;
  cancelled_ = true;
  process_->terminate();
  if (again && !killTimer_->isActive()) killTimer_->start(killAfterMs_);
}

// SIGUSR1: the CLI (every rank, through the launcher) waits at its next training step; repeated
// every kRepeatPauseMs while paused, for a CLI that had not installed its handlers when asked.
void ProcessJobRunner::pause() {
  if (!running() || paused_) return;
  paused_ = true;
  signalPause(SIGUSR1);
  pauseTimer_->start();
  Q_EMIT pausedChanged(true);
}

void ProcessJobRunner::resume() {
  if (!paused_) return;
  paused_ = false;
  pauseTimer_->stop();
  signalPause(SIGUSR2);
  Q_EMIT pausedChanged(false);
}

void ProcessJobRunner::signalPause(int signal) {
  if (running() && process_->processId() > 0) ::kill(static_cast<pid_t>(process_->processId()), signal);
}

bool ProcessJobRunner::wait(int ms) {
  if (!running()) return true;
  return process_->waitForFinished(ms) || !running();
}

void ProcessJobRunner::readStdout() {
  process_->setReadChannel(QProcess::StandardOutput);
  while (process_->canReadLine()) handleLine(process_->readLine().trimmed());
}

void ProcessJobRunner::readStderr() {
  process_->setReadChannel(QProcess::StandardError);
  while (process_->canReadLine()) {
    const QString line = QString::fromUtf8(process_->readLine()).trimmed();
    if (line.isEmpty()) continue;
    lastStderr_ = line;
    if (const auto message = cliMessage(line); !message.isEmpty()) errorLine_ = message;
    Q_EMIT logLine(line);
  }
}

void ProcessJobRunner::handleLine(const QByteArray& line) {
  if (line.isEmpty()) return;
  QJsonParseError error;
  const QJsonDocument document = QJsonDocument::fromJson(line, &error);
  if (error.error != QJsonParseError::NoError || !document.isObject()) {
    Q_EMIT logLine(QString::fromUtf8(line));
    return;
  }
  handleEvent(document.object());
}

void ProcessJobRunner::handleEvent(const QJsonObject& event) {
  const QString kind = event.value(QStringLiteral("event")).toString();
  auto absolute = [this](const QJsonValue& path) {
    return path.toString().isEmpty() ? QString() : QDir::cleanPath(QDir(workingDir_).absoluteFilePath(path.toString()));
  };
  if (kind == QLatin1String("run_file")) {
    const QString path = absolute(event.value(QStringLiteral("path")));
    Q_EMIT logLine(tr("run file: %1").arg(path));
    Q_EMIT runFileStarted(path);
  } else if (kind == QLatin1String("progress")) {
    const QJsonValue eta = event.value(QStringLiteral("eta_s"));
    Q_EMIT progress(event.value(QStringLiteral("step")).toInteger(), event.value(QStringLiteral("total")).toInteger(),
                    event.value(QStringLiteral("phase")).toString(), eta.isDouble() ? eta.toDouble() : -1.0);
  } else if (kind == QLatin1String("log")) {
    Q_EMIT logLine(event.value(QStringLiteral("line")).toString());
  } else if (kind == QLatin1String("processes")) {
    Q_EMIT logLine(tr("started %1 processes, rendezvous %2, %3 thread(s) each; ranks > 0 log to %4/rank-K.log")
                       .arg(event.value(QStringLiteral("count")).toInt())
                       .arg(event.value(QStringLiteral("rendezvous")).toString())
                       .arg(event.value(QStringLiteral("threads")).toInt())
                       .arg(event.value(QStringLiteral("logs")).toString()));
  } else if (kind == QLatin1String("memory")) {
    Q_EMIT logLine(tr("peak memory of rank %1: %2 MB")
                       .arg(event.value(QStringLiteral("rank")).toInt())
                       .arg(event.value(QStringLiteral("peak_mb")).toDouble(), 0, 'f', 0));
  } else if (kind == QLatin1String("end")) {
    summaryMessage_ = event.value(QStringLiteral("message")).toString();
    resultRunFile_ = absolute(event.value(QStringLiteral("run_file")));
    exportPath_ = absolute(event.value(QStringLiteral("outputs")).toObject().value(QStringLiteral("export")));
    Q_EMIT logLine(tr("%1 after %2 s: %3")
                       .arg(event.value(QStringLiteral("status")).toString())
                       .arg(event.value(QStringLiteral("seconds")).toDouble(), 0, 'f', 1)
                       .arg(summaryMessage_));
  }
}

void ProcessJobRunner::onExited(int exitCode, bool crashed) {
  killTimer_->stop();
  pauseTimer_->stop();
  readStdout();
  readStderr();
  // A last line without its newline.
  handleLine(process_->readAllStandardOutput().trimmed());
  const QString tail = QString::fromUtf8(process_->readAllStandardError()).trimmed();
  if (!tail.isEmpty()) {
    lastStderr_ = tail;
    if (const auto message = cliMessage(tail); !message.isEmpty()) errorLine_ = message;
  }

  QString status, message;
  if (!crashed && exitCode == 0) {
    status = QStringLiteral("completed");
    message = summaryMessage_;
  } else if (cancelled_ && (crashed || exitCode == kExitCancelled)) {
    status = QStringLiteral("cancelled");
    message = !summaryMessage_.isEmpty() ? summaryMessage_
              : killed_ ? tr("killed: still running %1 s after the second cancel").arg(killAfterMs_ / 1000.0)
              : crashed ? tr("%1 ended on the signal before it had started its processes").arg(binary_)
                        : errorLine_;
  } else {
    status = exitCode == kExitCancelled && !crashed ? QStringLiteral("cancelled") : QStringLiteral("failed");
    message = !errorLine_.isEmpty() ? errorLine_ : !lastStderr_.isEmpty() ? lastStderr_ : summaryMessage_;
    if (message.isEmpty())
      message = crashed ? tr("%1 ended on a signal").arg(binary_) : tr("%1 exited with status %2").arg(binary_).arg(exitCode);
  }
  QString runFile = resultRunFile_;
  if (runFile.isEmpty() && QFileInfo::exists(runDir_ + QStringLiteral("/run.h5"))) runFile = runDir_ + QStringLiteral("/run.h5");
  Q_EMIT finished(status, message, runFile, exportPath_);
  if (paused_) {
    paused_ = false;
    Q_EMIT pausedChanged(false);
  }
  Q_EMIT runningChanged(false);
}

}  // namespace hh::gui
