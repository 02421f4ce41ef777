// engine.attention.blas_kernels: blas::SingleThreaded keeps OpenBLAS on one thread while any
// scope is open, nested or on several threads at once, and puts back the setting in force before
// the first of them opened when the last one closes; hh::applyThreadCount while a scope is open
// (another thread's job starting) leaves OpenBLAS on one thread and sets the count the last scope
// puts back.
#include <ATen/Parallel.h>

#include <algorithm>
#include <atomic>
#include <thread>

#include "engine/attention/blas_kernels.h"
#include "engine/core/runtime.h"
#include "tests/support/hh_test.h"

// OpenBLAS's own setting; weak, so null with another BLAS (the test then skips).
extern "C" {
void openblas_set_num_threads(int) __attribute__((weak));
int openblas_get_num_threads(void) __attribute__((weak));
}

namespace test_blas_kernels {

namespace {

// OpenBLAS set to at least two threads for one test (so one thread is a change to see), and put
// back as it was afterwards.
struct AtLeastTwoThreads {
  bool openBlas = hh::attn::blas::available() && openblas_get_num_threads && openblas_set_num_threads;
  int original = openBlas ? openblas_get_num_threads() : 0;
  int before = 0;  // the setting the scopes must put back
  AtLeastTwoThreads() {
    if (!openBlas) return;
    openblas_set_num_threads(std::max(original, 2));
    before = openblas_get_num_threads();
  }
  ~AtLeastTwoThreads() {
    if (openBlas) openblas_set_num_threads(original);
  }
  const char* skipReason() const {
    return !openBlas ? "the BLAS is not OpenBLAS" : before < 2 ? "OpenBLAS built for one thread" : nullptr;
  }
};

}  // namespace

class TestBlasKernels : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void nestedScopesRestoreTheThreadCount() {
    const AtLeastTwoThreads threads;
    if (const char* why = threads.skipReason()) QSKIP(why);
    const int before = threads.before;
    {
      const hh::attn::blas::SingleThreaded outer;
      QCOMPARE(openblas_get_num_threads(), 1);
      { const hh::attn::blas::SingleThreaded inner; }
      QCOMPARE(openblas_get_num_threads(), 1);  // the outer scope is still open
    }
    QCOMPARE(openblas_get_num_threads(), before);
  }

  void scopesClosingOutOfOrderOnTwoThreadsRestoreTheThreadCount() {
    // Thread a opens a scope, then thread b; a closes first, then b (each step waits for the one
    // before it). Saving and restoring per scope would leave b's saved 1 in force at the end.
    const AtLeastTwoThreads threads;
    if (const char* why = threads.skipReason()) QSKIP(why);
    const int before = threads.before;
    std::atomic<int> step{0};
    const auto waitFor = [&step](int s) {
      while (step.load() < s) std::this_thread::yield();
    };
    int insideA = 0, insideB = 0;
    std::thread a([&] {
      {
        const hh::attn::blas::SingleThreaded scope;
        step.store(1);
        waitFor(2);
        insideA = openblas_get_num_threads();
      }
      step.store(3);
    });
    std::thread b([&] {
      waitFor(1);
      {
        const hh::attn::blas::SingleThreaded scope;
        step.store(2);
        waitFor(3);
        insideB = openblas_get_num_threads();  // a's scope has closed, b's is open
      }
    });
    a.join();
    b.join();
    const int after = openblas_get_num_threads();
    QCOMPARE(insideA, 1);
    QCOMPARE(insideB, 1);
    QCOMPARE(after, before);
  }

  void overlappingScopesOnTwoThreadsRestoreTheThreadCount() {
    // Two threads open and close scopes as fast as they can, so their scopes overlap in every
    // order; when both are done the setting is the one from before.
    const AtLeastTwoThreads threads;
    if (const char* why = threads.skipReason()) QSKIP(why);
    const int before = threads.before;
    std::atomic<int> started{0};
    const auto loop = [&started] {
      started.fetch_add(1);
      while (started.load() < 2) std::this_thread::yield();  // both threads loop at once
      for (int i = 0; i < 20000; ++i) {
        const hh::attn::blas::SingleThreaded scope;
      }
    };
    std::thread a(loop), b(loop);
    a.join();
    b.join();
    const int after = openblas_get_num_threads();
    QCOMPARE(after, before);
  }

  void applyThreadCountDuringAScopeSetsTheCountItRestores() {
    // Setting 1 before the scope opens makes the scope's saved count 1: put back as it was, it
    // would undo the call made inside the scope. That call set 2 at once, so the scope's tasks
    // (the parallelism) each ran a two-thread BLAS.
    const AtLeastTwoThreads threads;
    if (const char* why = threads.skipReason()) QSKIP(why);
    const int torchThreads = at::get_num_threads();
    openblas_set_num_threads(1);
    int inside = 0;
    {
      const hh::attn::blas::SingleThreaded scope;
      hh::applyThreadCount(2);
      inside = openblas_get_num_threads();
    }
    const int after = openblas_get_num_threads();
    hh::applyThreadCount(torchThreads);  // Torch's count as it was; AtLeastTwoThreads puts OpenBLAS's back
    QCOMPARE(inside, 1);
    QCOMPARE(after, 2);
  }
};

HH_TEST_SUITE(TestBlasKernels, "engine.attention.blas_kernels", &TestBlasKernels::nestedScopesRestoreTheThreadCount,
              &TestBlasKernels::scopesClosingOutOfOrderOnTwoThreadsRestoreTheThreadCount,
              &TestBlasKernels::overlappingScopesOnTwoThreadsRestoreTheThreadCount,
              &TestBlasKernels::applyThreadCountDuringAScopeSetsTheCountItRestores)

}  // namespace test_blas_kernels

#if HH_HAVE_QTEST
#include "test_blas_kernels.moc"
#endif
