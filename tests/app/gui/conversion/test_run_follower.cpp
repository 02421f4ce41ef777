// app.gui.run_follower: the follower reads the HDF5 file only when it changed.
//   - a running file (its writer open) that nobody touches is not re-read on the next polls (the
//     file's size and mtime are unchanged); after an append and a flush the next poll reads it
//     and reports exactly the new rows;
//   - a forced poll reads regardless;
//   - after RunFollower::kFullPollMs an unchanged file is read again (a dead writer is noticed);
//   - another run's file renamed over the followed one starts the follow over: a reset update
//     with the new file's rows from its first (none skipped, none added to the old curves);
//   - a resumed run is followed as one: a killed run.h5 that a continuation (run-resumed-<S>.h5)
//     appears beside is left for the chain of the two, run.h5's rows and snapshots up to S first,
//     and the step slider's indices reach both files; opening the continuation follows the same;
//   - a run that has ended and is left alone is not read again; started afresh in its folder
//     (continuation deleted, run.h5 written anew), it is followed from its first row.
#include <QSignalSpy>
#include <QTest>

#include <filesystem>

#include "app/gui/conversion/run_follower.h"
#include "engine/runs/run_writer.h"
#include "tests/support/temp_dir.h"
#include "tests/support/hh_test.h"

namespace test_run_follower {

namespace r = hh::runs;

class TestRunFollower : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void readsOnlyWhenTheFileChanged() {
    hh::test::TempDir dir("run_follower");
    const auto path = dir.file("run.h5");
    r::RunHeader header;
    header.runId = "follow";
    header.kind = "train";
    header.layout.scalars = {"loss"};
    auto w = r::RunWriter::create(path, header);
    for (int s = 1; s <= 5; ++s) w.appendScalar(s, "loss", 1.0 / s);
    w.flush();

    hh::gui::RunFollower follower;
    QSignalSpy updates(&follower, &hh::gui::RunFollower::updated);
    follower.follow(QString::fromStdString(path));
    QCOMPARE(follower.fileReads(), int64_t(1));
    QCOMPARE(updates.count(), 1);
    QCOMPARE(updates.at(0).at(0).value<hh::gui::RunUpdate>().newScalars.at("loss").steps.size(), size_t(5));

    for (int i = 0; i < 5; ++i) follower.poll();
    QCOMPARE(follower.fileReads(), int64_t(1));  // unchanged: only stat'ed
    QCOMPARE(updates.count(), 1);

    QTest::qSleep(20);  // a later mtime even on coarse clocks
    for (int s = 6; s <= 8; ++s) w.appendScalar(s, "loss", 1.0 / s);
    w.flush();
    follower.poll();
    QCOMPARE(follower.fileReads(), int64_t(2));
    QCOMPARE(updates.count(), 2);
    const auto u = updates.at(1).at(0).value<hh::gui::RunUpdate>();
    QCOMPARE(u.newScalars.at("loss").steps, (std::vector<int64_t>{6, 7, 8}));
    QCOMPARE(u.status, QString("running"));

    follower.poll(/*force=*/true);
    QCOMPARE(follower.fileReads(), int64_t(3));
    QCOMPARE(updates.count(), 2);  // read, nothing new: no update

    QTest::qSleep(hh::gui::RunFollower::kFullPollMs + 100);
    follower.poll();
    QCOMPARE(follower.fileReads(), int64_t(4));  // the periodic full read
    follower.stop();
  }

  void aReplacedFileStartsOver() {
    hh::test::TempDir dir("run_follower_replaced");
    const auto path = dir.file("run.h5");
    r::RunHeader header;
    header.kind = "train";
    header.layout.scalars = {"loss"};
    header.runId = "first";
    auto first = r::RunWriter::create(path, header);
    for (int s = 1; s <= 5; ++s) first.appendScalar(s, "loss", 1.0 / s);
    first.flush();
    hh::gui::RunFollower follower;
    QSignalSpy updates(&follower, &hh::gui::RunFollower::updated);
    follower.follow(QString::fromStdString(path));
    QCOMPARE(updates.count(), 1);

    // A new run written beside it and renamed over it (its writer still open: running).
    header.runId = "second";
    auto second = r::RunWriter::create(dir.file("next.h5"), header);
    for (int s = 1; s <= 7; ++s) second.appendScalar(s, "loss", 10.0 + s);
    second.flush();
    std::filesystem::rename(dir.file("next.h5"), path);
    follower.poll(/*force=*/true);
    QVERIFY(updates.count() >= 2);
    const auto u = updates.last().at(0).value<hh::gui::RunUpdate>();
    QVERIFY(u.reset);
    QCOMPARE(u.newScalars.at("loss").steps, (std::vector<int64_t>{1, 2, 3, 4, 5, 6, 7}));
    QCOMPARE(u.newScalars.at("loss").values.front(), 11.0);
    follower.stop();
  }

  void aResumedRunIsFollowedAsOne() {
    hh::test::TempDir dir("run_follower_chain");
    const auto first = dir.file("run.h5");
    {  // killed at step 8 after a checkpoint at 6: its writer gone, the status still "running"
      auto w = r::RunWriter::create(first, chainHeader("first"));
      for (int s = 1; s <= 8; ++s) w.appendScalar(s, "loss", 100.0 + s);
      w.appendSnapshot(4, std::vector<float>(4, 0.4f), std::vector<float>(4, 0.0f));
      w.appendSnapshot(8, std::vector<float>(4, 0.8f), std::vector<float>(4, 0.0f));
      w.log("first file", 5);
      w.log("redone", 8);
      w.flush();
    }
    hh::gui::RunFollower follower;
    QSignalSpy updates(&follower, &hh::gui::RunFollower::updated);
    QSignalSpy loaded(&follower, &hh::gui::RunFollower::snapshotLoaded);
    follower.follow(QString::fromStdString(first));
    QCOMPARE(updates.count(), 1);
    QCOMPARE(updates.at(0).at(0).value<hh::gui::RunUpdate>().status, QString("interrupted"));
    follower.poll();
    QCOMPARE(updates.count(), 1);  // ended and left alone: not read again
    const int64_t reads = follower.fileReads();

    {  // the job resumed from the checkpoint: steps 7-12 and one snapshot in its continuation
      auto w = r::RunWriter::create(dir.file("run-resumed-6.h5"), chainHeader("second"));
      for (int s = 7; s <= 12; ++s) w.appendScalar(s, "loss", 200.0 + s);
      w.appendSnapshot(12, std::vector<float>(4, 1.2f), std::vector<float>(4, 0.0f));
      w.setStatus(r::RunStatus::Completed, "done");
      w.flush();
    }
    follower.poll();
    QCOMPARE(updates.count(), 2);
    QVERIFY(follower.fileReads() > reads);
    const auto u = updates.at(1).at(0).value<hh::gui::RunUpdate>();
    QVERIFY(u.reset);
    QCOMPARE(u.chain.size(), 2);
    QVERIFY(u.path.endsWith("run-resumed-6.h5"));
    QCOMPARE(u.status, QString("completed"));
    const auto& loss = u.newScalars.at("loss");
    QCOMPARE(loss.steps, (std::vector<int64_t>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}));
    QCOMPARE(loss.values[5], 106.0);  // run.h5's up to step 6
    QCOMPARE(loss.values[6], 207.0);  // the continuation's from 7 (run.h5's 7 and 8 were redone)
    QCOMPARE(u.newSnapshotSteps, (std::vector<int64_t>{4, 12}));  // run.h5's 8 is past 6
    QVERIFY(u.latestSnapshot && u.latestSnapshot->step == 12);
    QVERIFY(u.newLogLines.contains("first file"));
    QVERIFY(!u.newLogLines.contains("redone"));  // logged at a step the continuation did again
    QVERIFY(u.newLogLines.last().contains("resumed after step 6"));

    follower.loadSnapshot(0);  // the slider's first position: run.h5's snapshot
    follower.loadSnapshot(1);  // its second: the continuation's
    QCOMPARE(loaded.count(), 2);
    QCOMPARE(loaded.at(0).at(0).value<hh::gui::SnapshotAtStep>().snapshot.step, int64_t(4));
    QCOMPARE(loaded.at(0).at(0).value<hh::gui::SnapshotAtStep>().snapshot.softmax.front(), 0.4f);
    QCOMPARE(loaded.at(1).at(0).value<hh::gui::SnapshotAtStep>().snapshot.step, int64_t(12));

    // Opening the continuation shows the same run.
    hh::gui::RunFollower other;
    QSignalSpy otherUpdates(&other, &hh::gui::RunFollower::updated);
    other.follow(QString::fromStdString(dir.file("run-resumed-6.h5")));
    QCOMPARE(otherUpdates.count(), 1);
    QCOMPARE(otherUpdates.at(0).at(0).value<hh::gui::RunUpdate>().newScalars.at("loss").steps.size(), size_t(12));
    // The run started afresh in the same folder: its continuation goes, run.h5 is written anew.
    std::filesystem::remove(dir.file("run-resumed-6.h5"));
    {
      r::RunWriterOptions options;
      options.overwrite = true;
      auto w = r::RunWriter::create(first, chainHeader("third"), options);
      for (int s = 1; s <= 3; ++s) w.appendScalar(s, "loss", 300.0 + s);
      w.flush();
    }
    follower.poll();
    QCOMPARE(updates.count(), 3);
    const auto afresh = updates.at(2).at(0).value<hh::gui::RunUpdate>();
    QVERIFY(afresh.reset);
    QCOMPARE(afresh.chain.size(), 1);
    QCOMPARE(afresh.newScalars.at("loss").values, (std::vector<double>{301.0, 302.0, 303.0}));

    follower.stop();
    other.stop();
  }

 private:
  static r::RunHeader chainHeader(const std::string& runId) {
    r::RunHeader header;
    header.runId = runId;
    header.kind = "distill";
    header.layout.scalars = {"loss"};
    header.layout.layers = 1;
    header.layout.heads = 1;
    header.layout.snapshots.pairs = {{0, 0}};
    header.layout.snapshots.tokens = {"a", "b"};
    return header;
  }
};

HH_TEST_SUITE(TestRunFollower, "app.gui.run_follower", &TestRunFollower::readsOnlyWhenTheFileChanged,
              &TestRunFollower::aReplacedFileStartsOver, &TestRunFollower::aResumedRunIsFollowedAsOne)

}  // namespace test_run_follower

#if HH_HAVE_QTEST
#include "test_run_follower.moc"
#endif
