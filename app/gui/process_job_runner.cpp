// Multi-process conversions through the CLI (see process_job_runner.h).
#include "app/gui/process_job_runner.h"

#include <QCoreApplication>
#include <QDir>
#include <QFileInfo>
#include <QProcess>
#include <QRegularExpression>
#include <QSaveFile>
#include <QTimer>

#ifdef __linux__
#include <sys/prctl.h>

#include <csignal>
#endif

namespace hh::gui {
namespace {

const QString kErrorPrefix = QStringLiteral("hedgehog: error: ");
constexpr int kExitCancelled = 130;  // the CLI's status for a cancelled job

// Whether `path` is `folder` or inside it (both absolute and clean).
bool inside(const QString& path, const QString& folder) {
  return path == folder || path.startsWith(folder.endsWith(QLatin1Char('/')) ? folder : folder + QLatin1Char('/'));
}

QString absoluteIn(const QString& workingDir, const std::string& path) {
  return QDir::cleanPath(QDir(workingDir).absoluteFilePath(QString::fromStdString(path)));
}

// "0m40s" or "1h02m" (app/cli/cli_observer.cpp formatSeconds) in seconds.
double durationSeconds(int first, QChar unit, int second) {
  return unit == QLatin1Char('h') ? first * 3600.0 + second * 60.0 : first * 60.0 + second;
}

}  // namespace

ProcessJobRunner::ProcessJobRunner(QObject* parent) : JobSignals(parent), binary_(defaultBinary()) {
  killTimer_ = new QTimer(this);
  killTimer_->setSingleShot(true);
  killTimer_->setInterval(kKillAfterMs);
  connect(killTimer_, &QTimer::timeout, this, [this] {
    if (!running()) return;
    killed_ = true;
    process_->kill();
  });
}

ProcessJobRunner::~ProcessJobRunner() {
  if (!running()) return;
  blockSignals(true);  // like JobRunner's destructor: the job ends, nobody is told
  cancel();
  if (!process_->waitForFinished(kKillAfterMs)) {
    process_->kill();
    process_->waitForFinished(-1);
  }
}

QString ProcessJobRunner::defaultBinary() {
  return QCoreApplication::applicationDirPath() + QStringLiteral("/hedgehog");
}

bool ProcessJobRunner::running() const {
  return process_ && process_->state() != QProcess::NotRunning;
}

QString ProcessJobRunner::startConvert(const jobs::ConvertConfig& config, int processes) {
  if (running()) return tr("a job is already running");
  if (processes < 1) return tr("processes must be at least 1 (got %1)").arg(processes);
  const QFileInfo cli(binary_);
  if (!cli.isFile() || !cli.isExecutable())
    return tr("%1: the command-line tool is missing or not executable; a conversion on several processes "
              "runs `hedgehog convert --nproc N`, which must lie next to hedgehog-workbench")
        .arg(binary_);

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
  QSaveFile file(project);
  const QByteArray text = QByteArray::fromStdString(jobs::toJson(c).dump(2) + "\n");
  if (!file.open(QIODevice::WriteOnly) || file.write(text) != text.size() || !file.commit())
    return tr("%1: cannot write the project file: %2").arg(project, file.errorString());

  QStringList arguments{QStringLiteral("convert"), QStringLiteral("--config"), project, QStringLiteral("--nproc"),
                        QString::number(processes)};
  if (!outputFlag.isEmpty()) arguments << QStringLiteral("--output") << outputFlag;

  if (process_) process_->deleteLater();
  process_ = new QProcess(this);
  process_->setWorkingDirectory(workingDir_);
  process_->setProgram(binary_);
  process_->setArguments(arguments);
  auto environment = QProcessEnvironment::systemEnvironment();
  environment.insert(QStringLiteral("HH_PROGRESS_SECONDS"), QStringLiteral("0.25"));  // a live bar, not a log file's pace
  process_->setProcessEnvironment(environment);
#ifdef __linux__
  // The launcher passes a SIGTERM on to every rank: a workbench that dies does not leave them.
  process_->setChildProcessModifier([] { ::prctl(PR_SET_PDEATHSIG, SIGTERM); });
#endif
  connect(process_, &QProcess::readyReadStandardOutput, this, &ProcessJobRunner::readStdout);
  connect(process_, &QProcess::readyReadStandardError, this, &ProcessJobRunner::readStderr);
  QProcess* started = process_;
  connect(process_, &QProcess::finished, this, [this, started](int code, QProcess::ExitStatus status) {
    if (started == process_) onExited(code, status == QProcess::CrashExit);
  });
  processes_ = processes;
  projectFile_ = project;
  cancelled_ = killed_ = false;
  summarySeen_ = false;
  summaryMessage_.clear();
  errorLine_.clear();
  lastStderr_.clear();
  resultRunFile_.clear();
  exportPath_.clear();
  process_->start();
  if (!process_->waitForStarted(10000)) {
    const QString why = process_->errorString();
    process_->deleteLater();
    process_ = nullptr;
    return tr("%1: could not start: %2").arg(binary_, why);
  }
  Q_EMIT runningChanged(true);
  return {};
}

void ProcessJobRunner::cancel() {
  if (!running()) return;
  cancelled_ = true;
  process_->terminate();
  if (!killTimer_->isActive()) killTimer_->start();
}

bool ProcessJobRunner::wait(int ms) {
  if (!running()) return true;
  return process_->waitForFinished(ms) || !running();
}

void ProcessJobRunner::readStdout() {
  process_->setReadChannel(QProcess::StandardOutput);
  while (process_->canReadLine()) handleLine(QString::fromUtf8(process_->readLine()).trimmed());
}

void ProcessJobRunner::readStderr() {
  process_->setReadChannel(QProcess::StandardError);
  while (process_->canReadLine()) {
    const QString line = QString::fromUtf8(process_->readLine()).trimmed();
    if (line.isEmpty()) continue;
    lastStderr_ = line;
    if (line.startsWith(kErrorPrefix)) errorLine_ = line.mid(kErrorPrefix.size());
    Q_EMIT logLine(line);
  }
}

void ProcessJobRunner::handleLine(const QString& line) {
  static const QRegularExpression progressLine(
      QStringLiteral(R"(^\[\d+[hm]\d+[ms]\] step (\d+)/(\d+) (.*) eta (\d+)([hm])(\d+)[ms](?: |$))"));
  static const QRegularExpression summaryLine(QStringLiteral(R"(^(completed|cancelled|failed) after [0-9.]+ s: (.*)$)"));
  static const QString runFilePrefix = QStringLiteral("run file: "), exportPrefix = QStringLiteral("exported model: ");
  if (line.isEmpty()) return;
  Q_EMIT logLine(line);
  if (line.startsWith(runFilePrefix)) {
    const QString path = QDir::cleanPath(QDir(workingDir_).absoluteFilePath(line.mid(runFilePrefix.size())));
    if (summarySeen_) {
      resultRunFile_ = path;  // the job's own (convert) run file, named after the summary
    } else {
      Q_EMIT runFileStarted(path);
    }
  } else if (line.startsWith(exportPrefix)) {
    exportPath_ = QDir::cleanPath(QDir(workingDir_).absoluteFilePath(line.mid(exportPrefix.size())));
  } else if (const auto m = progressLine.match(line); m.hasMatch()) {
    const qint64 step = m.captured(1).toLongLong(), total = m.captured(2).toLongLong();
    double eta = durationSeconds(m.captured(4).toInt(), m.captured(5).at(0), m.captured(6).toInt());
    if (eta == 0 && step < total) eta = -1;  // the CLI prints 0 before it can estimate
    Q_EMIT progress(step, total, m.captured(3), eta);
  } else if (const auto s = summaryLine.match(line); s.hasMatch()) {
    summarySeen_ = true;
    summaryMessage_ = s.captured(2);
  }
}

void ProcessJobRunner::onExited(int exitCode, bool crashed) {
  killTimer_->stop();
  readStdout();
  readStderr();
  // A last line without its newline.
  handleLine(QString::fromUtf8(process_->readAllStandardOutput()).trimmed());
  const QString tail = QString::fromUtf8(process_->readAllStandardError()).trimmed();
  if (!tail.isEmpty()) {
    lastStderr_ = tail;
    if (tail.startsWith(kErrorPrefix)) errorLine_ = tail.mid(kErrorPrefix.size());
  }

  QString status, message;
  if (!crashed && exitCode == 0) {
    status = QStringLiteral("completed");
    message = summaryMessage_;
  } else if (cancelled_ && (crashed || exitCode == kExitCancelled)) {
    status = QStringLiteral("cancelled");
    message = !summaryMessage_.isEmpty() ? summaryMessage_
              : killed_ ? tr("killed: the processes did not stop within %1 s").arg(kKillAfterMs / 1000)
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
  Q_EMIT runningChanged(false);
}

}  // namespace hh::gui
