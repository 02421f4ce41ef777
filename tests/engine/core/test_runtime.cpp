// engine.core.runtime: the thread count a machine gets by default (hh::hardwareThreadCount):
// every hardware thread from three on; on two or fewer one, unless OpenMP's idle workers wait
// passively (OMP_WAIT_POLICY=passive in any case), when both cores are used; never below one.
#include "engine/core/runtime.h"
#include "tests/support/hh_test.h"

namespace test_runtime {

class TestRuntime : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void everyCoreFromThreeOn() {
    QCOMPARE(hh::hardwareThreadCount(3, nullptr), 3);
    QCOMPARE(hh::hardwareThreadCount(16, nullptr), 16);
    QCOMPARE(hh::hardwareThreadCount(16, "PASSIVE"), 16);
    QCOMPARE(hh::hardwareThreadCount(16, "active"), 16);
  }

  void twoCoresTakeTwoThreadsOnlyWithPassiveWaits() {
    QCOMPARE(hh::hardwareThreadCount(2, nullptr), 1);
    QCOMPARE(hh::hardwareThreadCount(2, "ACTIVE"), 1);
    QCOMPARE(hh::hardwareThreadCount(2, ""), 1);
    QCOMPARE(hh::hardwareThreadCount(2, "PASSIVE"), 2);
    QCOMPARE(hh::hardwareThreadCount(2, "passive"), 2);
    QCOMPARE(hh::hardwareThreadCount(2, "Passive"), 2);
  }

  void neverBelowOne() {
    QCOMPARE(hh::hardwareThreadCount(0, nullptr), 1);  // hardware_concurrency() may say 0
    QCOMPARE(hh::hardwareThreadCount(0, "PASSIVE"), 1);
    QCOMPARE(hh::hardwareThreadCount(1, "PASSIVE"), 1);
  }
};

HH_TEST_SUITE(TestRuntime, "engine.core.runtime", &TestRuntime::everyCoreFromThreeOn,
              &TestRuntime::twoCoresTakeTwoThreadsOnlyWithPassiveWaits, &TestRuntime::neverBelowOne)

}  // namespace test_runtime

#if HH_HAVE_QTEST
#include "test_runtime.moc"
#endif
