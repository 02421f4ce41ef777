// engine.core.device: device names (engine/core/device.h) and the jobs' "device" key.
//   - cpu is always there; auto is the GPU only in a CUDA build that sees one, else the CPU;
//   - a name that is not a device, and cuda:N in any form the parser must refuse, is one error
//     naming the spec and the accepted forms;
//   - in a build without CUDA, cuda and cuda:N are refused with a message that says how to get
//     a CUDA build (nothing falls back to the CPU silently); with CUDA, an index past the last
//     GPU is refused naming the GPUs there are;
//   - a distill job on HH_TEST_DEVICE (cpu by default) writes that device into its run file and
//     result; a job asked for a device it cannot have fails before anything starts, naming it.
#include <filesystem>

#include "engine/core/device.h"
#include "engine/jobs/distill_job.h"
#include "engine/runs/run_reader.h"
#include "tests/engine/jobs/jobs_test_support.h"
#include "tests/support/hh_test.h"
#include "tests/support/temp_dir.h"
#include "tests/support/test_device.h"

namespace test_device {

namespace j = hh::jobs;

class TestDevice : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void namesResolve() {
    QCOMPARE(hh::resolveDevice("cpu"), std::string("cpu"));
    QCOMPARE(hh::resolveDevice("auto"), std::string(hh::cudaDeviceCount() > 0 ? "cuda:0" : "cpu"));
    QCOMPARE(hh::deviceLabel("cpu"), std::string("cpu"));
    for (const char* bad : {"gpu", "CPU", "cuda:", "cuda:-1", "cuda:x", "cuda:00000", "cuda0", ""})
      HH_VERIFY_THROWS_WITH(hh::resolveDevice(bad), "expected auto, cpu, cuda or cuda:N");
  }

  void cudaIsRefusedWhereItCannotBeHad() {
    if (!hh::cudaBuild()) {
      QCOMPARE(hh::cudaDeviceCount(), 0);
      for (const char* spec : {"cuda", "cuda:0", "cuda:1"})
        HH_VERIFY_THROWS_WITH(hh::resolveDevice(spec), "this build has no CUDA (configure with -DHH_CUDA=ON");
      return;
    }
    const int count = hh::cudaDeviceCount();
    if (count == 0) {
      HH_VERIFY_THROWS_WITH(hh::resolveDevice("cuda"), "no CUDA GPU is visible");
      return;
    }
    QCOMPARE(hh::resolveDevice("cuda"), std::string("cuda:0"));
    QVERIFY(hh::deviceLabel("cuda:0").rfind("cuda:0 (", 0) == 0);  // with the GPU's name
    HH_VERIFY_THROWS_WITH(hh::resolveDevice("cuda:" + std::to_string(count)), "visible (cuda:0");
  }

  void jobsRecordTheirDevice() {
    HH_SKIP_UNLESS_TEST_DEVICE();
    setenv("HH_NUM_THREADS", "1", 0);
    hh::test::TempDir dir("device_job");
    j::DistillConfig c;
    c.modelDir = std::string(HH_FIXTURES_DIR) + "/tiny-random-gpt2";
    c.runDir = dir.file("run");
    c.steps = 2;
    c.batchSize = 2;
    c.evalEvery = 2;
    c.evalBatches = 1;
    c.data.corpus = hh::test::writeWordCorpus(dir);
    c.data.sequenceLength = 16;
    c.device = hh::test::testDevice();
    j::JobObserver quiet;
    const auto r = j::runDistill(c, quiet);
    QVERIFY2(r.status == j::JobStatus::Completed, r.message.c_str());
    const std::string device = hh::resolveDevice(c.device);
    QCOMPARE(r.device, hh::deviceLabel(device));
    QCOMPARE(hh::runs::RunReader::open(r.runFile).header().device, r.device);

    c.device = "cuda:7";
    c.runDir = dir.file("refused");
    try {
      j::runDistill(c, quiet);
      if (hh::cudaDeviceCount() > 7) return;  // a machine with eight GPUs has it
      QFAIL("a device that cannot be had was accepted");
    } catch (const std::invalid_argument& e) {
      QVERIFY2(std::string(e.what()).find("device \"cuda:7\"") != std::string::npos, e.what());
    }
    QVERIFY(!std::filesystem::exists(dir.file("refused") + "/run.h5"));  // nothing started
  }
};

HH_TEST_SUITE(TestDevice, "engine.core.device", &TestDevice::namesResolve, &TestDevice::cudaIsRefusedWhereItCannotBeHad,
              &TestDevice::jobsRecordTheirDevice)

}  // namespace test_device

#if HH_HAVE_QTEST
#include "test_device.moc"
#endif
