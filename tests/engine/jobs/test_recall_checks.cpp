// engine.jobs.recall_checks: the checks behind "Hedgehog does not learn associative recall here"
// (docs/experiments.md), on a checkpoint the train job itself trained (Hedgehog, additive, the
// small recall setting, 300 steps):
//   - the train job's Hedgehog equals the fp64 brute force (engine/attention/reference.h fed
//     with the feature map recomputed in fp64 from the checkpoint's W, b and the captured q, k,
//     v) in every layer and head, on the path training takes (gradients on: the chunked LibTorch
//     form) within 1e-5 relative and on the inference path (the fused CPU kernel) too;
//   - gradients reach the feature-map MLPs: the loss's gradient with respect to W and b of every
//     layer is non-zero and equals a central finite difference (h = 1e-6) of the fp64 loss within
//     1e-7 + 1e-5 relative; training moved W away from its identity initialisation. (This failed
//     by up to 50x at first, on every parameter below the last norm: the fp64 model normalised in
//     fp32 and took fp32 rotary tables, so its loss carried fp32 noise. The gradients were right;
//     the fp64 model was not fp64. Fixed in rmsNorm and ropeTables.)
//   - the scale of q W^T + b before the exponential: no entry at the +-30 clamp (where the
//     gradient stops), the largest reported;
//   - the normaliser: the smallest phi(q) . z over every position is reported and is far above
//     the epsilon (1e-6) that guards it, so epsilon does not bias the outputs.
#include <torch/torch.h>

#include <cmath>

#include "engine/attention/reference.h"
#include "engine/data/synthetic_tasks.h"
#include "engine/jobs/job_support.h"
#include "engine/jobs/train_job.h"
#include "engine/models/model_io.h"
#include "tests/engine/jobs/jobs_test_support.h"
#include "tests/engine/models/model_test_support.h"
#include "tests/support/hh_test.h"
#include "tests/support/temp_dir.h"

namespace test_recall_checks {

namespace {

namespace j = hh::jobs;
namespace m = hh::models;

j::TrainConfig hedgehogRecall(const hh::test::TempDir& dir) {
  auto c = hh::test::recallConfig(dir, "hedgehog");
  c.task.testSamples = 64;
  c.task.supervision = "every_recall";
  c.lr = 1e-3;
  c.steps = 300;
  c.evalEvery = 300;
  c.evalBatches = 1;
  return c;
}

// Hedgehog's phi in fp64 from the checkpoint's W [H,D,D], b [H,D]: [exp(u), exp(-u)], u = clamp(x W^T + b).
torch::Tensor hedgehogFeatures64(const torch::Tensor& x, const hh::attn::FeatureMap& map) {
  auto u = torch::matmul(x.to(torch::kDouble), map->weight().to(torch::kDouble).transpose(-2, -1).unsqueeze(0)) +
           map->bias().to(torch::kDouble).unsqueeze(0).unsqueeze(2);
  u = u.clamp(-hh::attn::kHedgehogClamp, hh::attn::kHedgehogClamp);
  return torch::cat({u.exp(), (-u).exp()}, -1);
}

struct Trained {
  m::ModelPtr model;
  std::string folder;
  hh::data::TaskSplit test;
};

Trained trainOnce() {
  static hh::test::TempDir dir("recall_checks");
  static Trained trained;
  if (trained.model) return trained;
  const auto c = hedgehogRecall(dir);
  j::JobObserver quiet;
  const auto r = j::runTrain(c, quiet);
  if (r.status != j::JobStatus::Completed) throw std::runtime_error("training failed: " + r.message);
  qInfo("trained 300 steps in %.1f s: test accuracy %.3f", r.seconds, r.testAccuracy);
  trained.folder = r.modelDir;
  trained.model = m::loadModel(r.modelDir);
  trained.test = hh::data::buildSyntheticTask(c.task).test;
  return trained;
}

// The model's loss on the first rows of the test split (targets scored as in training).
torch::Tensor recallLoss(m::TransformerModel& model, const hh::data::TaskSplit& split, int64_t rows,
                         hh::attn::AttentionForm form = hh::attn::AttentionForm::Chunked) {
  const auto ids = split.ids.narrow(0, 0, rows), targets = split.targets.narrow(0, 0, rows);
  m::ForwardOptions options;
  options.form = form;
  const auto logits = model.forward(ids, options).logits;  // [B, T, V]
  return torch::nn::functional::cross_entropy(logits.reshape({-1, logits.size(-1)}), targets.reshape({-1}),
                                               torch::nn::functional::CrossEntropyFuncOptions().ignore_index(-100));
}

}  // namespace

class TestRecallChecks : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void initTestCase() { setenv("HH_NUM_THREADS", "1", 0); }

  void trainedHedgehogEqualsTheFp64Reference() {
    const auto t = trainOnce();
    m::CaptureRequest request;
    request.queriesKeys = true;
    request.softmaxWeights = false;
    request.linearWeights = false;
    request.outputs = true;
    m::ForwardOptions options;
    options.capture = &request;
    const auto ids = t.test.ids.narrow(0, 0, 8);
    for (const bool training : {true, false}) {  // gradients on: the chunked autograd form; off: the fused kernel
      torch::AutoGradMode mode(training);
      const auto out = t.model->forward(ids, options);
      for (const auto& c : out.captures) {
        const auto linear = t.model->linearAttention(c.layer);
        const auto fq = hedgehogFeatures64(c.queries, linear->featureMap());
        const auto fk = hedgehogFeatures64(c.keys, linear->featureMap());
        const auto want = hh::attn::referenceLinearAttention(fq, fk, c.values, {}, linear->config().rule);
        const double error = hh::test::relativeError(c.linearOutput.detach(), want);
        qInfo("layer %ld (%s path): relative error to fp64 %.2e", long(c.layer), training ? "training" : "inference", error);
        QVERIFY2(error < 1e-5, std::to_string(error).c_str());
        // Scale before the exponential and the normaliser.
        const auto u = torch::matmul(c.queries.to(torch::kDouble),
                                     linear->featureMap()->weight().to(torch::kDouble).transpose(-2, -1).unsqueeze(0));
        const double largest = u.abs().max().item<double>();
        const auto den = (fq * fk.cumsum(2)).sum(-1);  // phi(q_t) . z_t, z_t = sum_{s <= t} phi(k_s)  [B,H,T]
        const double smallest = den.min().item<double>();
        qInfo("  largest |q W^T| %.2f (clamp %.0f); smallest normaliser %.3g (epsilon %.0e)", largest,
              hh::attn::kHedgehogClamp, smallest, linear->config().rule.eps);
        QVERIFY(largest < hh::attn::kHedgehogClamp);
        QVERIFY(smallest > 1e3 * linear->config().rule.eps);
      }
    }
  }

  void gradientsReachTheFeatureMaps() {
    const auto t = trainOnce();
    auto model = m::loadModel(t.folder);
    model->to(torch::kDouble);
    model->zero_grad();
    recallLoss(*model, t.test, 4).backward();
    for (int64_t l = 0; l < model->layerCount(); ++l) {
      auto map = model->linearAttention(l)->featureMap();
      const auto w = map->weight(), b = map->bias();
      QVERIFY(w.grad().defined() && b.grad().defined());
      const double gw = w.grad().norm().item<double>(), gb = b.grad().norm().item<double>();
      const double moved = (w - torch::eye(w.size(-1), w.options()).unsqueeze(0)).abs().max().item<double>();
      qInfo("layer %ld: |dL/dW| %.3g, |dL/db| %.3g; W moved %.3f from the identity in training", long(l), gw, gb, moved);
      QVERIFY(std::isfinite(gw) && gw > 0 && std::isfinite(gb) && gb > 0);
      QVERIFY(moved > 1e-3);
      // Central finite differences of the fp64 loss at three entries of W and one of b.
      const int64_t d = w.size(-1);
      const std::vector<std::pair<torch::Tensor, std::vector<int64_t>>> entries{
          {w, {0, 0, 0}}, {w, {1, 3, d - 1}}, {w, {0, d / 2, 5}}, {b, {1, 7}}};
      for (const auto& [param, at] : entries) {
        torch::Tensor slot = param;
        for (const int64_t i : at) slot = slot[i];
        torch::Tensor grad = param.is_same(w) ? w.grad() : b.grad();
        for (const int64_t i : at) grad = grad[i];
        const double g = grad.item<double>(), h = 1e-6;
        double plus = 0, minus = 0;
        {  // the parameter's values, changed outside autograd
          auto data = slot.detach();
          data.add_(h);
          plus = recallLoss(*model, t.test, 4).item<double>();
          data.sub_(2 * h);
          minus = recallLoss(*model, t.test, 4).item<double>();
          data.add_(h);
        }
        const double fd = (plus - minus) / (2 * h);
        QVERIFY2(std::abs(fd - g) <= 1e-7 + 1e-5 * std::abs(g), (std::to_string(fd) + " vs " + std::to_string(g)).c_str());
      }
    }
  }
};

HH_TEST_SUITE(TestRecallChecks, "engine.jobs.recall_checks", &TestRecallChecks::initTestCase,
              &TestRecallChecks::trainedHedgehogEqualsTheFp64Reference, &TestRecallChecks::gradientsReachTheFeatureMaps)

}  // namespace test_recall_checks

#if HH_HAVE_QTEST
#include "test_recall_checks.moc"
#endif
