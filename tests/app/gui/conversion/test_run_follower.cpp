// app.gui.run_follower: the follower reads the HDF5 file only when it changed.
//   - a running file (its writer open) that nobody touches is not re-read on the next polls (the
//     file's size and mtime are unchanged); after an append and a flush the next poll reads it
//     and reports exactly the new rows;
//   - a forced poll reads regardless;
//   - after RunFollower::kFullPollMs an unchanged file is read again (a dead writer is noticed);
//   - another run's file renamed over the followed one starts the follow over: a reset update
//     with the new file's rows from its first (none skipped, none added to the old curves).
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
};

HH_TEST_SUITE(TestRunFollower, "app.gui.run_follower", &TestRunFollower::readsOnlyWhenTheFileChanged,
              &TestRunFollower::aReplacedFileStartsOver)

}  // namespace test_run_follower

#if HH_HAVE_QTEST
#include "test_run_follower.moc"
#endif
