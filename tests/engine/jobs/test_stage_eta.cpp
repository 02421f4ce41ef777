// engine.jobs.stage_eta: the time left in a stage comes from that stage's rate alone. Two stages
// through one estimate, as a conversion reports them: 10 steps at 1 s, then 1000 steps at 0.1 s
// (the stories conversion's finetune once said 43m40s left at step 20 of 1000, from the whole
// run's elapsed time, for what took 1m52s). The new stage is told by restart(), by the step
// count going back, or by a new total; unknown (< 0) at a stage's first report; 0 at its end.
// The rate is the stage's recent one (its last quarter of steps), so a stage whose steps become
// dearer (the evaluation's tables after its perplexity batches) is estimated at the new cost.
#include <chrono>

#include "engine/jobs/stage_eta.h"
#include "tests/support/hh_test.h"

namespace test_stage_eta {

namespace {

using hh::jobs::StageEta;
using Clock = StageEta::Clock;

Clock::time_point at(double seconds) {
  return Clock::time_point{} + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

// Runs the first stage (steps 0..10 of 10 at 1 s a step, from t = 100 s) and returns the time
// its last report came at.
double runFirstStage(StageEta& eta) {
  double t = 100;
  for (int64_t step = 0; step <= 10; ++step, t += 1.0) eta.secondsLeft(step, 10, at(t));
  return t - 1.0;
}

}  // namespace

class TestStageEta : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void firstReportIsUnknownThenTheRateTimesTheStepsLeft() {
    StageEta eta;
    QVERIFY(eta.secondsLeft(0, 100, at(5)) < 0);
    QCOMPARE(eta.secondsLeft(10, 100, at(25)), 180.0);  // 2 s a step, 90 steps left
    QCOMPARE(eta.secondsLeft(100, 100, at(205)), 0.0);
  }

  // The evaluation's shape: 16 cheap steps (0.1 s), then steps of 1 s. Three slow steps in, the
  // rate is over the stage's last quarter (4 steps: one cheap, three slow), near the new rate;
  // the average since the start (4.6 s / 19 steps, 12.3 s left) was a quarter of the 51 s left.
  void theRateFollowsTheStagesRecentSteps() {
    StageEta eta;
    double t = 0;
    for (int64_t step = 0; step <= 16; ++step, t += 0.1) eta.secondsLeft(step, 70, at(t));
    t -= 0.1;  // step 16 came at 1.6 s
    double left = 0;
    for (int64_t step = 17; step <= 19; ++step) left = eta.secondsLeft(step, 70, at(t += 1.0));
    QCOMPARE(left, (4.6 - 1.5) / 4 * 51);  // from step 15 (1.5 s) to step 19 (4.6 s)
    // A repeated report of one step (an evaluation at step 0, then the first step) times from the
    // later one.
    StageEta again;
    QVERIFY(again.secondsLeft(0, 10, at(0)) < 0);
    QVERIFY(again.secondsLeft(0, 10, at(5)) < 0);
    QCOMPARE(again.secondsLeft(1, 10, at(6)), 9.0);
  }

  void aStageThatStartsBelowStepOneStillTimesItsFirstStep() {
    StageEta eta;
    QVERIFY(eta.secondsLeft(3, 10, at(0)) < 0);  // resumed at step 3
    QCOMPARE(eta.secondsLeft(5, 10, at(4)), 10.0);
  }

  // A pause of 50 s between steps 10 and 11 is not time spent on steps: the rate stays 2 s a step.
  void aPauseIsLeftOut() {
    StageEta eta;
    eta.secondsLeft(0, 100, at(5));
    QCOMPARE(eta.secondsLeft(10, 100, at(25)), 180.0);
    eta.leaveOut(std::chrono::seconds(50));
    QCOMPARE(eta.secondsLeft(11, 100, at(77)), 178.0);  // 22 s for 11 steps once the 50 s are out
  }

  void restartStartsANewStage() {
    StageEta eta;
    const double end = runFirstStage(eta);
    eta.restart();
    QVERIFY(eta.secondsLeft(1, 1000, at(end + 1)) < 0);
    QCOMPARE(eta.secondsLeft(21, 1000, at(end + 3)), 0.1 * 979);
  }

  void aStepCountThatGoesBackStartsANewStage() {
    StageEta eta;
    runFirstStage(eta);
    eta.secondsLeft(10, 10, at(200));  // a second stage of the same length, counting again
    QVERIFY(eta.secondsLeft(0, 10, at(300)) < 0);
    QCOMPARE(eta.secondsLeft(4, 10, at(302)), 3.0);  // 0.5 s a step, 6 left
  }

  void aNewTotalStartsANewStage() {
    StageEta eta;
    const double end = runFirstStage(eta);
    QVERIFY(eta.secondsLeft(20, 1000, at(end + 1)) < 0);  // no restart(), no step back
    QCOMPARE(eta.secondsLeft(30, 1000, at(end + 2)), 0.1 * 970);
  }
};

HH_TEST_SUITE(TestStageEta, "engine.jobs.stage_eta", &TestStageEta::firstReportIsUnknownThenTheRateTimesTheStepsLeft,
              &TestStageEta::theRateFollowsTheStagesRecentSteps,
              &TestStageEta::aStageThatStartsBelowStepOneStillTimesItsFirstStep, &TestStageEta::aPauseIsLeftOut,
              &TestStageEta::restartStartsANewStage, &TestStageEta::aStepCountThatGoesBackStartsANewStage,
              &TestStageEta::aNewTotalStartsANewStage)

}  // namespace test_stage_eta

#if HH_HAVE_QTEST
#include "test_stage_eta.moc"
#endif
