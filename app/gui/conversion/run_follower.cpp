#include "app/gui/conversion/run_follower.h"

#include <QFileInfo>
#include <QTimer>

#include <sys/stat.h>

#include <filesystem>
#include <limits>

#include <nlohmann/json.hpp>

#include "engine/runs/run_chain.h"

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

// Appends `rows` up to step `until` to `out`; returns the last step appended (0 if none).
int64_t appendUntil(runs::ScalarSeries& out, const runs::ScalarSeries& rows, int64_t until) {
  int64_t last = 0;
  for (size_t r = 0; r < rows.steps.size() && rows.steps[r] <= until; ++r) {
    out.steps.push_back(rows.steps[r]);
    out.times.push_back(rows.times[r]);
    out.values.push_back(rows.values[r]);
    last = rows.steps[r];
  }
  return last;
}

// The last row of `table` at or before `step`, as a one-row series; nullopt when there is none.
std::optional<runs::TableSeries> tableRowAt(const runs::TableSeries& table, int64_t step) {
  int64_t row = -1;  // steps ascend within a file
  for (size_t i = 0; i < table.size(); ++i)
    if (table.steps[i] <= step) row = int64_t(i);
  if (row < 0) return std::nullopt;
  runs::TableSeries one;
  one.layers = table.layers;
  one.heads = table.heads;
  one.steps = {table.steps[size_t(row)]};
  one.times = {table.times[size_t(row)]};
  const size_t cells = size_t(table.layers) * size_t(table.heads);
  one.values.assign(table.values.begin() + long(size_t(row) * cells),
                    table.values.begin() + long(size_t(row + 1) * cells));
  return one;
}

// Index of the last curve set at or before `step`; -1 when there is none.
int64_t curveAt(const runs::RunReader& reader, int64_t step) {
  const auto steps = reader.curveSteps();
  for (int64_t i = int64_t(steps.size()) - 1; i >= 0; --i)
    if (steps[size_t(i)] <= step) return i;
  return -1;
}

bool sameSnapshotLayout(const runs::RunLayout& a, const runs::RunLayout& b) {
  return a.snapshots.pairs.size() == b.snapshots.pairs.size() && a.snapshots.tokens == b.snapshots.tokens;
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
  requested_ = path;
  restart();
}

void RunFollower::restart() {
  reader_.reset();
  chain_ = runs::chainOf(requested_.toStdString());
  path_ = QString::fromStdString(chain_.back());
  earlier_.clear();
  for (size_t i = 0; i + 1 < chain_.size(); ++i) earlier_.push_back({chain_[i], runs::resumedAfter(chain_[i + 1])});
  failedOnce_ = finished_ = false;
  startOver();
  opened_.reset();
  attempts_ = 0;
  lastSize_ = -1;
  lastMtimeNs_ = 0;
  sinceChange_.start();
  timer_->setInterval(kPollMs);
  poll(true);
  if (!failedOnce_) timer_->start();
}

bool RunFollower::successorAppeared() {
  if (runs::chainOf(requested_.toStdString()) != chain_) return true;  // resumed, or restarted afresh
  const std::optional<FileIdentity> onDisk = identityOnDisk();
  if (!onDisk || !opened_) return false;  // deleted: keep what is shown
  if (onDisk->device != opened_->device || onDisk->inode != opened_->inode) return true;
  if (!fileLooksChanged()) return false;
  try {  // written in place: another run's only if its header says so
    const auto reader = runs::RunReader::open(path_.toStdString());
    return reader.header().runId != opened_->runId || reader.header().startTimeUnix != opened_->startTimeUnix;
  } catch (const std::exception&) {
    return false;  // being created: looked at again on the next poll
  }
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
  if (path_.isEmpty()) return;
  if (finished_) {
    if (successorAppeared()) restart();
    return;
  }
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
    if (!announced_) readEarlierParts(u);
    changed = readNewRows(u) || changed;
    changed = readNewMapsAndLog(u) || changed;
    if (!announced_ && !u.latestSnapshot && !earlierSnapshots_.empty()) {
      const auto& last = earlierSnapshots_.back();
      u.latestSnapshot = runs::RunReader::open(earlier_[last.part].path).snapshot(last.index);
    }
    const bool terminal = reader_->status() != runs::RunStatus::Running || reader_->interrupted();
    if (terminal) {
      finished_ = true;  // nothing more will come: one last update, then only a look for a successor
      timer_->setInterval(kEndedPollMs);
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
  u.status = QString::fromStdString(runs::shownStatus(*reader_));
  u.statusMessage = QString::fromStdString(reader_->statusMessage());
  u.plannedSteps = plannedStepsOf(header.configJson);
  u.reset = !announced_;
  if (!announced_) {  // the layout and the chain, once
    for (const auto& file : chain_) u.chain << QString::fromStdString(file);
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
    const int64_t last =
        appendUntil(u.newScalars[spec.name], reader_->scalars(spec.name, seen), std::numeric_limits<int64_t>::max());
    u.lastStep = std::max(u.lastStep, last);
    seen = rows;
    changed = true;
  }
  for (const auto& spec : layout.tables) {
    auto& seen = tableRows_[spec.name];
    const int64_t rows = reader_->tableRows(spec.name);
    if (rows <= seen) continue;
    u.latestTables[spec.name] = reader_->table(spec.name, rows - 1);
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
    u.newSnapshotSteps.insert(u.newSnapshotSteps.end(),
                              steps.begin() + std::min<int64_t>(snapshotCount_, int64_t(steps.size())), steps.end());
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

void RunFollower::readEarlierParts(RunUpdate& u) {
  earlierSnapshots_.clear();
  for (size_t p = 0; p < earlier_.size(); ++p) {
    const EarlierPart& part = earlier_[p];
    const QString next = QFileInfo(QString::fromStdString(chain_[p + 1])).fileName();
    try {
      const auto reader = runs::RunReader::open(part.path);
      for (const auto& spec : reader.header().layout.scalars)
        u.lastStep = std::max(u.lastStep, appendUntil(u.newScalars[spec.name], reader.scalars(spec.name), part.until));
      for (const auto& spec : reader.header().layout.tables)
        if (auto row = tableRowAt(reader.table(spec.name), part.until)) u.latestTables[spec.name] = std::move(*row);
      if (sameSnapshotLayout(reader.header().layout, reader_->header().layout)) {
        const auto steps = reader.snapshotSteps();
        for (size_t i = 0; i < steps.size() && steps[i] <= part.until; ++i) {
          earlierSnapshots_.push_back({p, int64_t(i)});
          u.newSnapshotSteps.push_back(steps[i]);
        }
      }
      if (const int64_t curves = curveAt(reader, part.until); curves >= 0) u.latestCurves = reader.curves(curves);
      for (const auto& line : reader.logLines())
        if (line.step <= part.until) u.newLogLines << QString::fromStdString(line.text);
      u.newLogLines << tr("-- resumed after step %1 in %2 --").arg(part.until).arg(next);
    } catch (const std::exception& e) {
      u.newLogLines << tr("-- %1 could not be read (%2); the run goes on in %3 --")
                           .arg(QString::fromStdString(part.path), QString::fromStdString(e.what()), next);
    }
  }
  for (auto it = u.newScalars.begin(); it != u.newScalars.end();)  // a series every row of which was redone
    it = it->second.steps.empty() ? u.newScalars.erase(it) : std::next(it);
}

SnapshotAtStep RunFollower::snapshotAt(const runs::RunReader& reader, int64_t local, int64_t index) const {
  SnapshotAtStep out;
  out.path = path_;
  out.index = index;
  out.snapshot = reader.snapshot(local);
  for (const auto& spec : reader.header().layout.tables)
    if (auto row = tableRowAt(reader.table(spec.name), out.snapshot.step))
      out.tables.emplace(spec.name, std::move(*row));
  if (const int64_t curves = curveAt(reader, out.snapshot.step); curves >= 0) out.curves = reader.curves(curves);
  return out;
}

void RunFollower::loadSnapshot(qint64 index) {
  try {
    if (!reader_ && !openIfPossible()) throw std::runtime_error("the run file is not readable yet");
    const int64_t earlier = int64_t(earlierSnapshots_.size());
    if (index >= 0 && index < earlier) {  // one of an earlier file of the chain
      const EarlierSnapshot& at = earlierSnapshots_[size_t(index)];
      Q_EMIT snapshotLoaded(snapshotAt(runs::RunReader::open(earlier_[at.part].path), at.index, index));
    } else {
      Q_EMIT snapshotLoaded(snapshotAt(*reader_, index - earlier, index));
    }
  } catch (const std::exception& e) {
    Q_EMIT failed(tr("snapshot %1: %2").arg(index).arg(QString::fromStdString(e.what())));
  }
}

}  // namespace hh::gui
