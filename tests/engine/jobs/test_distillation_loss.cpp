// engine.jobs.distillation_loss: a plan that mixes a layer with trainable feature maps (Hedgehog)
// and one with nothing to train (Performer's fixed random projection) distils: the layer-by-layer
// backward pass reports both layers' terms and backpropagates the trainable one only, and the
// distill job runs such a plan to completion on the tiny GPT-2 fixture.

#include <torch/types.h>

#include <string>
#include <vector>

#include "engine/jobs/distill_job.h"
#include "engine/jobs/distillation_loss.h"
#include "engine/models/model_io.h"
#include "tests/engine/jobs/jobs_test_support.h"
#include "tests/support/hh_test.h"
#include "tests/support/temp_dir.h"
#include "tests/support/test_device.h"

namespace test_distillation_loss {

namespace {

namespace j = hh::jobs;
const std::string kModel = std::string(HH_FIXTURES_DIR) + "/tiny-random-gpt2";

}  // namespace

class TestDistillationLoss : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void initTestCase() {
    HH_SKIP_UNLESS_TEST_DEVICE();  // HH_TEST_DEVICE: the job below runs there
    setenv("HH_NUM_THREADS", "1", 0);
  }

  void untrainableLayerIsReportedNotBackpropagated() {
    auto model = hh::models::loadModel(kModel);
    model->setAttentionPlan(
        hh::models::AttentionPlan::fromSpecs({"softmax", "hedgehog", "softmax", "softmax", "performer"}));
    model->freezeAllBut(true);
    hh::models::CaptureRequest capture;
    capture.softmaxWeights = capture.linearWeights = capture.keepGraph = true;
    capture.layers = {1, 4};
    hh::models::ForwardOptions options;
    options.teacher = true;
    options.computeLogits = false;
    options.stopAfterLayer = 4;
    torch::manual_seed(0);
    const auto ids = torch::randint(0, 1000, {2, 16}, torch::kLong);  // [B, T]

    const double both = j::distillLayerByLayer(*model, ids, capture, options, "kl", 0.0, j::LayerPass::Backward);
    double hedgehogOnly = 0.0;
    {
      at::NoGradGuard noGrad;
      capture.layers = {1};
      hedgehogOnly = j::distillLayerByLayer(*model, ids, capture, options, "kl", 0.0, j::LayerPass::LossOnly);
    }
    qInfo("loss of layers 1 and 4: %.6g; layer 1 alone: %.6g", both, hedgehogOnly);
    QVERIFY(both > hedgehogOnly);  // the performer's term is in the report
    int withGradient = 0;
    for (const auto& [name, t] : model->adapterTensors()) {
      if (!t.requires_grad()) continue;
      QVERIFY2(name.rfind("hedgehog.layers.1.", 0) == 0, name.c_str());
      QVERIFY2(t.grad().defined() && t.grad().abs().sum().item<double>() > 0, name.c_str());
      ++withGradient;
    }
    QVERIFY(withGradient > 0);
  }

  void mixedPlanDistils() {
    hh::test::TempDir dir("distill_mixed_plan");
    j::DistillConfig c;
    c.device = hh::test::testDevice();
    c.dtype = hh::test::testDtype();
    c.modelDir = kModel;
    c.runDir = dir.file("run");
    c.plan = {"softmax", "hedgehog", "softmax", "softmax", "performer"};
    c.steps = 2;
    c.batchSize = 2;
    c.evalEvery = 2;
    c.evalBatches = 1;
    c.patience = 0;
    c.data.corpus = hh::test::writeWordCorpus(dir);
    c.data.sequenceLength = 32;
    c.data.validationFraction = 0.25;
    j::JobObserver observer;
    const auto r = j::runDistill(c, observer);
    QVERIFY2(r.status == j::JobStatus::Completed, r.message.c_str());
    QCOMPARE(r.steps, int64_t(2));
  }
};

// clang-format off
HH_TEST_SUITE(TestDistillationLoss, "engine.jobs.distillation_loss", &TestDistillationLoss::initTestCase, &TestDistillationLoss::untrainableLayerIsReportedNotBackpropagated, &TestDistillationLoss::mixedPlanDistils)
// clang-format on

}  // namespace test_distillation_loss

#if HH_HAVE_QTEST
#include "test_distillation_loss.moc"
#endif
