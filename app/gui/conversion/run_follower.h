// RunFollower: reads a run file while a job (in this process or another) writes it, off the GUI
// thread. It lives on its own QThread. Every poll (kPollMs) it looks at the file's size and
// modification time (a stat, no HDF5); only when they changed (the writer flushed), or every
// kFullPollMs regardless (to notice a writer that died), does it refresh the HDF5 SWMR reader and
// emit what is new since the last read as plain data (RunUpdate): new scalar rows, the latest
// row of every per-head table, the latest attention snapshot and the steps of the new ones, the
// latest monotonicity curves, the status. After kIdleBackoffMs without a change the poll slows to kIdlePollMs, and
// returns to kPollMs at the next change. A file that is not there yet or not yet readable is retried on the next poll;
// a file that cannot be a run file is reported once through failed(). loadSnapshot(index) reads one stored snapshot and
// the per-head tables and curves as they were at its step (the dashboard's step slider) and answers with
// snapshotLoaded(). A resumed job's run is a chain of files (run.h5, then run-resumed-<S>.h5; engine/runs/run_chain.h):
// following any of them follows the whole chain. The first update carries the earlier files' rows
// up to the step each continuation resumed from, their snapshots (indexed before the live file's)
// and their log; the last file is the one read live. A run that has ended is still looked at every
// kEndedPollMs (a stat and a folder listing): a continuation written beside it (the job resumed),
// or another run's file at its path, starts the follow over on the new chain.
#pragma once
#include <QElapsedTimer>
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
  std::vector<int64_t> newSnapshotSteps;                 // steps of the snapshots added since the last update
  std::vector<runs::LayerHead> snapshotPairs;            // P, in the snapshot's order
  QStringList probeTokens;                                // T
  std::optional<runs::CurveSet> latestCurves;            // when a new set of monotonicity curves arrived
  std::vector<runs::LayerHead> curvePairs;               // [C] (first update only), in the curves' order
  QStringList curveLabels;                               // [C] or empty: "softmax" / "linear" per curve
  QStringList newLogLines;
  QStringList chain;  // the run's files in order, the followed (last) one included; first update only
};

// One stored snapshot with the tables as they were then (each table's last row at or before the
// snapshot's step; tables with no such row are left out).
struct SnapshotAtStep {
  QString path;
  int64_t index = 0;  // in [0, snapshot count)
  runs::Snapshot snapshot;
  std::map<std::string, runs::TableSeries> tables;  // one row each
  std::optional<runs::CurveSet> curves;             // the last curve set at or before the snapshot's step
};

class RunFollower : public QObject {
  Q_OBJECT

 public:
  static constexpr int kPollMs = 200;          // 5 updates a second at most (a stat each)
  static constexpr int kFullPollMs = 2000;     // HDF5 read at least this often while running
  static constexpr int kIdleBackoffMs = 10000; // unchanged this long: poll every kIdlePollMs
  static constexpr int kIdlePollMs = 1000;
  static constexpr int kEndedPollMs = 2000;  // a run that has ended: only a look for its successor

  explicit RunFollower(QObject* parent = nullptr);
  ~RunFollower() override;

 public Q_SLOTS:
  // Starts following `path` (from its first row) and the chain it belongs to, replacing any
  // file followed before.
  void follow(const QString& path);
  void stop();
  // One poll now (also what the timer calls). force: read the file even if it looks unchanged.
  void poll(bool force = false);
  // Reads snapshot `index` of the followed file (and the tables at its step); answers with
  // snapshotLoaded, or failed() when it cannot be read.
  void loadSnapshot(qint64 index);

 public:
  // Reads of the file's HDF5 content so far (tests check that unchanged files are not re-read).
  int64_t fileReads() const { return fileReads_; }

 Q_SIGNALS:
  void updated(const hh::gui::RunUpdate& update);
  void failed(const QString& message);
  void snapshotLoaded(const hh::gui::SnapshotAtStep& snapshot);

 private:
  // The earlier files of the chain: each read up to the step its continuation resumed from.
  struct EarlierPart {
    std::string path;
    int64_t until = 0;
  };
  struct EarlierSnapshot {
    size_t part = 0;
    int64_t index = 0;  // in that file
  };
  void restart();            // the chain of requested_ from its first row (follow, or a successor)
  bool successorAppeared();  // after the end: a continuation, or another run at the path
  bool openIfPossible();
  bool fileLooksChanged();  // size or mtime differ from the last look
  // Which file is open: its inode, run id and start time. Another file at the path (replaced, or
  // rewritten in place by a new run) starts the follow over, so no row of the old one is kept.
  struct FileIdentity {
    uint64_t device = 0, inode = 0;
    std::string runId;
    double startTimeUnix = 0.0;
    bool operator==(const FileIdentity& o) const {
      return device == o.device && inode == o.inode && runId == o.runId && startTimeUnix == o.startTimeUnix;
    }
  };
  std::optional<FileIdentity> identityOnDisk() const;  // device and inode of path_ now
  void startOver();                                    // forget what was announced and read
  void readUpdate();
  RunUpdate statusUpdate() const;           // status, and the layout on the first update
  bool readNewRows(RunUpdate& u);           // scalars and tables past those seen; true if any
  bool readNewMapsAndLog(RunUpdate& u);     // snapshots, curves and log lines past those seen
  void readEarlierParts(RunUpdate& u);      // the first update: what the earlier files hold
  SnapshotAtStep snapshotAt(const runs::RunReader& reader, int64_t local, int64_t index) const;

  QString requested_;  // what follow() was given
  QString path_;       // the live file: the chain's last
  std::vector<std::string> chain_;
  std::vector<EarlierPart> earlier_;
  std::vector<EarlierSnapshot> earlierSnapshots_;
  QTimer* timer_ = nullptr;
  std::unique_ptr<runs::RunReader> reader_;
  bool announced_ = false, failedOnce_ = false, finished_ = false;
  std::map<std::string, int64_t> scalarRows_, tableRows_;
  int64_t snapshotCount_ = 0, curveCount_ = 0, logCount_ = 0;
  int attempts_ = 0;
  int64_t fileReads_ = 0;
  int64_t lastSize_ = -1;
  int64_t lastMtimeNs_ = 0;
  std::optional<FileIdentity> opened_;  // of the file reader_ has (or last had) open
  QElapsedTimer sinceRead_, sinceChange_;
};

}  // namespace hh::gui

Q_DECLARE_METATYPE(hh::gui::RunUpdate)
Q_DECLARE_METATYPE(hh::gui::SnapshotAtStep)
