#include "app/gui/run_follower.h"

#include <QFileInfo>
#include <QTimer>

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
  timer_ = new QTimer(this);
  timer_->setInterval(kPollMs);
  connect(timer_, &QTimer::timeout, this, &RunFollower::poll);
}

RunFollower::~RunFollower() = default;

void RunFollower::follow(const QString& path) {
  stop();
  path_ = path;
  announced_ = failedOnce_ = finished_ = false;
  scalarRows_.clear();
  tableRows_.clear();
  snapshotCount_ = logCount_ = 0;
  attempts_ = 0;
  poll();
  if (!finished_) timer_->start();
}

void RunFollower::stop() {
  timer_->stop();
  reader_.reset();
}

bool RunFollower::openIfPossible() {
  if (!QFileInfo::exists(path_)) return false;
  try {
    reader_ = std::make_unique<runs::RunReader>(runs::RunReader::open(path_.toStdString()));
    attempts_ = 0;  // the failure budget is for consecutive failures
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

void RunFollower::poll() {
  if (path_.isEmpty() || finished_) return;
  try {
    if (!reader_) {
      if (!openIfPossible()) return;
    } else {
      reader_->refresh();
    }
    const auto& header = reader_->header();
    RunUpdate u;
    u.path = path_;
    u.kind = QString::fromStdString(header.kind);
    const auto status = reader_->status();
    u.status = reader_->interrupted() ? QStringLiteral("interrupted") : QString::fromLatin1(runs::statusName(status));
    u.statusMessage = QString::fromStdString(reader_->statusMessage());
    u.plannedSteps = plannedStepsOf(header.configJson);
    bool changed = !announced_;
    u.reset = !announced_;
    if (!announced_) {
      u.snapshotPairs = header.layout.snapshots.pairs;
      for (const auto& t : header.layout.snapshots.tokens) u.probeTokens << QString::fromStdString(t);
    }
    for (const auto& spec : header.layout.scalars) {
      auto& seen = scalarRows_[spec.name];
      const int64_t rows = reader_->scalarRows(spec.name);
      if (rows > seen) {
        auto series = reader_->scalars(spec.name, seen);
        if (!series.steps.empty()) u.lastStep = std::max(u.lastStep, series.steps.back());
        u.newScalars.emplace(spec.name, std::move(series));
        seen = rows;
        changed = true;
      }
    }
    for (const auto& spec : header.layout.tables) {
      auto& seen = tableRows_[spec.name];
      const int64_t rows = reader_->tableRows(spec.name);
      if (rows > seen) {
        u.latestTables.emplace(spec.name, reader_->table(spec.name, rows - 1));
        seen = rows;
        changed = true;
      }
    }
    const int64_t snapshots = reader_->snapshotCount();
    if (snapshots > snapshotCount_) {
      u.latestSnapshot = reader_->snapshot(-1);
      snapshotCount_ = snapshots;
      changed = true;
    }
    const int64_t logs = reader_->logCount();
    if (logs > logCount_) {
      for (const auto& line : reader_->logLines(logCount_)) u.newLogLines << QString::fromStdString(line.text);
      logCount_ = logs;
      changed = true;
    }
    const bool terminal = status != runs::RunStatus::Running || reader_->interrupted();
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

}  // namespace hh::gui
