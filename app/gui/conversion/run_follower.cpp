#include "app/gui/conversion/run_follower.h"

#include <QFileInfo>
#include <QTimer>

#include <sys/stat.h>

#include <filesystem>

#include <nlohmann/json.hpp>

namespace hh::gui {
namespace {

constexpr int kOpenAttempts = 20;  // a file still being created gets this many polls to become readable

int64_t plannedStepsOf(const std::string& configJson) {
  try {
    const auto j = nlohmann::json::parse(configJson);
    if (j.is_object() && j.contains("steps") && j.at("steps").is_number_integer()) return j.at("steps").get<int64_t>();
  } catch (const std::exception&) {
  }
  return 0;
}

}  // namespace

RunFollower::RunFollower(QObject* parent) : QObject(parent) {
  qRegisterMetaType<hh::gui::RunUpdate>();
  qRegisterMetaType<hh::gui::SnapshotAtStep>();
  timer_ = new QTimer(this);
  timer_->setInterval(kPollMs);
  connect(timer_, &QTimer::timeout, this, [this] { poll(false); });
}

RunFollower::~RunFollower() = default;

void RunFollower::follow(const QString& path) {
  stop();
  path_ = path;
  failedOnce_ = finished_ = false;
  startOver();
  opened_.reset();
  attempts_ = 0;
  lastSize_ = -1;
  lastMtimeNs_ = 0;
  sinceChange_.start();
  timer_->setInterval(kPollMs);
  poll(true);
  if (!finished_) timer_->start();
}

void RunFollower::startOver() {
  announced_ = false;  // the next update resets the view and carries the layout again
  scalarRows_.clear();
  tableRows_.clear();
  snapshotCount_ = curveCount_ = logCount_ = 0;
}

std::optional<RunFollower::FileIdentity> RunFollower::identityOnDisk() const {
  struct stat st {};
  if (::stat(path_.toLocal8Bit().constData(), &st) != 0) return std::nullopt;
  FileIdentity id;
  id.device = uint64_t(st.st_dev);
  id.inode = uint64_t(st.st_ino);
  return id;
}

void RunFollower::stop() {
  timer_->stop();
  reader_.reset();
}

bool RunFollower::openIfPossible() {
  if (!QFileInfo::exists(path_)) return false;
  try {
    const std::optional<FileIdentity> onDisk = identityOnDisk();
    reader_ = std::make_unique<runs::RunReader>(runs::RunReader::open(path_.toStdString()));
    attempts_ = 0;  // the failure budget is for consecutive failures
    FileIdentity id = onDisk.value_or(FileIdentity{});
    id.runId = reader_->header().runId;
    id.startTimeUnix = reader_->header().startTimeUnix;
    if (opened_ && !(*opened_ == id)) startOver();  // another run's file now: its rows from the start
    opened_ = id;
    return true;
  } catch (const std::exception& e) {
    if (++attempts_ >= kOpenAttempts && !failedOnce_) {
      failedOnce_ = true;
      timer_->stop();
      Q_EMIT failed(QString::fromStdString(e.what()));
    }
    return false;
  }
}

bool RunFollower::fileLooksChanged() {
  std::error_code error;
  const std::filesystem::path file(path_.toStdString());
  const auto size = std::filesystem::file_size(file, error);
  if (error) return true;  // not there (yet): let the read path retry and report
  const auto mtime = std::filesystem::last_write_time(file, error);
  if (error) return true;
  const int64_t ns = std::chrono::duration_cast<std::chrono::nanoseconds>(mtime.time_since_epoch()).count();
  const bool changed = int64_t(size) != lastSize_ || ns != lastMtimeNs_;
  lastSize_ = int64_t(size);
  lastMtimeNs_ = ns;
  return changed;
}

void RunFollower::poll(bool force) {
  if (path_.isEmpty() || finished_) return;
  // The cheap look first: a file that the writer has not touched has nothing new to read.
  const bool changed = fileLooksChanged();
  if (changed) {
    sinceChange_.restart();
    if (timer_->interval() != kPollMs) timer_->setInterval(kPollMs);
  } else if (sinceChange_.elapsed() >= kIdleBackoffMs && timer_->interval() != kIdlePollMs) {
    timer_->setInterval(kIdlePollMs);
  }
  if (!force && !changed && reader_ && sinceRead_.isValid() && sinceRead_.elapsed() < kFullPollMs) return;
  sinceRead_.start();
  readUpdate();
}

void RunFollower::readUpdate() {
  ++fileReads_;
  try {
    if (reader_ && opened_) {  // a file renamed over the path: the open reader still reads the old one
      const std::optional<FileIdentity> onDisk = identityOnDisk();
      if (onDisk && (onDisk->device != opened_->device || onDisk->inode != opened_->inode)) reader_.reset();
    }
    if (!reader_) {
      if (!openIfPossible()) return;
    } else {
      reader_->refresh();
    }
    RunUpdate u = statusUpdate();
    bool changed = !announced_;
    changed = readNewRows(u) || changed;
    changed = readNewMapsAndLog(u) || changed;
    const bool terminal = reader_->status() != runs::RunStatus::Running || reader_->interrupted();
    if (terminal) {
      finished_ = true;  // nothing more will come: one last update, then stop polling
      timer_->stop();
      changed = true;
    }
    announced_ = true;
    if (changed) Q_EMIT updated(u);
  } catch (const std::exception& e) {
    // A reader that lost the file (deleted, replaced): reopen on the next poll.
    reader_.reset();
    if (!failedOnce_ && ++attempts_ >= kOpenAttempts) {
      failedOnce_ = true;
      timer_->stop();
      Q_EMIT failed(QString::fromStdString(e.what()));
    }
  }
}

RunUpdate RunFollower::statusUpdate() const {
  const auto& header = reader_->header();
  RunUpdate u;
  u.path = path_;
  u.kind = QString::fromStdString(header.kind);
  u.status = reader_->interrupted() ? QStringLiteral("interrupted") : QString::fromLatin1(runs::statusName(reader_->status()));
  u.statusMessage = QString::fromStdString(reader_->statusMessage());
  u.plannedSteps = plannedStepsOf(header.configJson);
  u.reset = !announced_;
  if (!announced_) {  // the layout, once
    u.snapshotPairs = header.layout.snapshots.pairs;
    for (const auto& t : header.layout.snapshots.tokens) u.probeTokens << QString::fromStdString(t);
    u.curvePairs = header.layout.curves.pairs;
    for (const auto& label : header.layout.curves.labels) u.curveLabels << QString::fromStdString(label);
  }
  return u;
}

bool RunFollower::readNewRows(RunUpdate& u) {
  bool changed = false;
  const auto& layout = reader_->header().layout;
  for (const auto& spec : layout.scalars) {
    auto& seen = scalarRows_[spec.name];
    const int64_t rows = reader_->scalarRows(spec.name);
    if (rows <= seen) continue;
    auto series = reader_->scalars(spec.name, seen);
    if (!series.steps.empty()) u.lastStep = std::max(u.lastStep, series.steps.back());
    u.newScalars.emplace(spec.name, std::move(series));
    seen = rows;
    changed = true;
  }
  for (const auto& spec : layout.tables) {
    auto& seen = tableRows_[spec.name];
    const int64_t rows = reader_->tableRows(spec.name);
    if (rows <= seen) continue;
    u.latestTables.emplace(spec.name, reader_->table(spec.name, rows - 1));
    seen = rows;
    changed = true;
  }
  return changed;
}

bool RunFollower::readNewMapsAndLog(RunUpdate& u) {
  bool changed = false;
  const int64_t snapshots = reader_->snapshotCount();
  if (snapshots > snapshotCount_) {
    const auto steps = reader_->snapshotSteps();
    u.newSnapshotSteps.assign(steps.begin() + std::min<int64_t>(snapshotCount_, int64_t(steps.size())), steps.end());
    u.latestSnapshot = reader_->snapshot(-1);
    snapshotCount_ = snapshots;
    changed = true;
  }
  const int64_t curveSets = reader_->curveCount();
  if (curveSets > curveCount_) {
    u.latestCurves = reader_->curves(-1);
    curveCount_ = curveSets;
    changed = true;
  }
  const int64_t logs = reader_->logCount();
  if (logs > logCount_) {
    for (const auto& line : reader_->logLines(logCount_)) u.newLogLines << QString::fromStdString(line.text);
    logCount_ = logs;
    changed = true;
  }
  return changed;
}

void RunFollower::loadSnapshot(qint64 index) {
  try {
    if (!reader_ && !openIfPossible()) throw std::runtime_error("the run file is not readable yet");
    SnapshotAtStep out;
    out.path = path_;
    out.index = index;
    out.snapshot = reader_->snapshot(index);
    for (const auto& spec : reader_->header().layout.tables) {
      const auto all = reader_->table(spec.name);
      // The last row at or before the snapshot's step (steps ascend within a file).
      int64_t row = -1;
      for (size_t i = 0; i < all.size(); ++i)
        if (all.steps[i] <= out.snapshot.step) row = int64_t(i);
      if (row < 0) continue;
      runs::TableSeries one;
      one.layers = all.layers;
      one.heads = all.heads;
      one.steps = {all.steps[size_t(row)]};
      one.times = {all.times[size_t(row)]};
      const size_t cells = size_t(all.layers) * size_t(all.heads);
      one.values.assign(all.values.begin() + long(size_t(row) * cells), all.values.begin() + long(size_t(row + 1) * cells));
      out.tables.emplace(spec.name, std::move(one));
    }
    const auto curveSteps = reader_->curveSteps();
    for (int64_t i = int64_t(curveSteps.size()) - 1; i >= 0; --i)
      if (curveSteps[size_t(i)] <= out.snapshot.step) {
        out.curves = reader_->curves(i);
        break;
      }
    Q_EMIT snapshotLoaded(out);
  } catch (const std::exception& e) {
    Q_EMIT failed(tr("snapshot %1: %2").arg(index).arg(QString::fromStdString(e.what())));
  }
}

}  // namespace hh::gui
