// RunFollower: reads a run file while a job (in this process or another) writes it, off the GUI
// thread. It lives on its own QThread; every poll (kPollMs) it refreshes the HDF5 SWMR reader and
// emits what is new since the last poll as plain data (RunUpdate): new scalar rows, the latest
// row of every per-head table, the latest attention snapshot, the status. A file that is not
// there yet or not yet readable is retried on the next poll; a file that cannot be a run file
// is reported once through failed().
#pragma once
#include <QMetaType>
#include <QObject>
#include <QString>
#include <QStringList>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/runs/run_reader.h"

class QTimer;

namespace hh::gui {

struct RunUpdate {
  QString path;
  QString kind;             // distill, finetune, train, evaluate, convert
  QString status;           // running, completed, failed, cancelled, interrupted
  QString statusMessage;
  bool reset = false;       // first update of this file: drop what was shown before
  int64_t plannedSteps = 0; // the config's "steps" (0 when it has none)
  int64_t lastStep = 0;
  std::map<std::string, runs::ScalarSeries> newScalars;  // only rows added since the last update
  std::map<std::string, runs::TableSeries> latestTables; // last row of each table that changed
  std::optional<runs::Snapshot> latestSnapshot;          // when a new one arrived
  std::vector<runs::LayerHead> snapshotPairs;            // P, in the snapshot's order
  QStringList probeTokens;                                // T
  QStringList newLogLines;
};

class RunFollower : public QObject {
  Q_OBJECT

 public:
  static constexpr int kPollMs = 200;  // 5 updates a second at most

  explicit RunFollower(QObject* parent = nullptr);
  ~RunFollower() override;

 public Q_SLOTS:
  // Starts following `path` (from its first row), replacing any file followed before.
  void follow(const QString& path);
  void stop();
  // One poll now (also what the timer calls).
  void poll();

 Q_SIGNALS:
  void updated(const hh::gui::RunUpdate& update);
  void failed(const QString& message);

 private:
  bool openIfPossible();

  QString path_;
  QTimer* timer_ = nullptr;
  std::unique_ptr<runs::RunReader> reader_;
  bool announced_ = false, failedOnce_ = false, finished_ = false;
  std::map<std::string, int64_t> scalarRows_, tableRows_;
  int64_t snapshotCount_ = 0, logCount_ = 0;
  int attempts_ = 0;
};

}  // namespace hh::gui

Q_DECLARE_METATYPE(hh::gui::RunUpdate)
