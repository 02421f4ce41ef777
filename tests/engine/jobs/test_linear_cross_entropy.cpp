// The LM head fused with the next-token loss and the teacher KL (engine/jobs/linear_cross_entropy.h)
// against cross_entropy and teacherKlLoss on the whole logits: the loss and both gradients in fp64 and fp32 for chunk
// sizes that do and do not divide the rows, bf16 hidden states with an fp32 head, no gradient where none is asked for;
// and modelNextTokenLoss on real checkpoints (GPT-2 with its tied head, the llama stories260K) against the logits path,
// a classifier falling back to it.
#include <torch/nn/functional/loss.h>
#include <torch/types.h>

#include "engine/jobs/linear_cross_entropy.h"
#include "engine/jobs/training_support.h"
#include "engine/models/model_io.h"
#include "tests/support/hh_test.h"

namespace test_linear_cross_entropy {

namespace {
namespace j = hh::jobs;

double relErr(const torch::Tensor& got, const torch::Tensor& ref) {
  const auto r = ref.to(torch::kDouble);
  return ((got.to(torch::kDouble) - r).abs().max() / r.abs().max().clamp_min(1e-300)).item<double>();
}

struct Grads {
  torch::Tensor loss, hidden, weight;
};

// loss and gradients of hidden [N, C], weight [V, C] (leaves), the fused way or the plain one.
Grads lossAndGrads(const torch::Tensor& hidden, const torch::Tensor& weight, const torch::Tensor& targets,
                   int64_t chunk, bool fused) {
  auto h = hidden.detach().clone().requires_grad_(true), w = weight.detach().clone().requires_grad_(true);
  const auto loss = fused ? j::linearCrossEntropy(h, w, targets, chunk)
                          : torch::nn::functional::cross_entropy(
                                torch::matmul(h, w.to(h.scalar_type()).t()).to(torch::kFloat), targets);
  (loss * 2.5).backward();  // an upstream gradient other than 1
  return {loss.detach(), h.grad(), w.grad()};
}

}  // namespace

class TestLinearCrossEntropy : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void matchesCrossEntropyOnLogits() {
    torch::manual_seed(5);
    const int64_t N = 37, C = 24, V = 101;
    for (const auto dtype : {torch::kDouble, torch::kFloat}) {
      const auto hidden = torch::randn({N, C}, dtype), weight = torch::randn({V, C}, dtype) * 0.3;
      const auto targets = torch::randint(0, V, {N}, torch::kLong);
      const auto ref = lossAndGrads(hidden, weight, targets, 0, false);
      for (const int64_t chunk : {1, 5, 37, 0}) {
        const auto got = lossAndGrads(hidden, weight, targets, chunk, true);
        const double tol = dtype == torch::kDouble ? 1e-6 : 1e-5;  // fp32 softmax and sums either way
        const double el = relErr(got.loss, ref.loss), eh = relErr(got.hidden, ref.hidden),
                     ew = relErr(got.weight, ref.weight);
        QVERIFY2(el < tol && eh < tol && ew < tol, ("chunk " + std::to_string(chunk) + ": loss " + std::to_string(el) +
                                                    ", hidden " + std::to_string(eh) + ", weight " + std::to_string(ew))
                                                       .c_str());
      }
    }
  }

  void teacherKlMatchesKlOnLogits() {
    torch::manual_seed(8);
    const int64_t N = 29, C = 16, Ct = 12, V = 57;
    for (const auto dtype : {torch::kDouble, torch::kFloat}) {
      const auto hidden = torch::randn({N, C}, dtype), weight = torch::randn({V, C}, dtype) * 0.3;
      const auto teacherHidden = torch::randn({N, Ct}, dtype), teacherWeight = torch::randn({V, Ct}, dtype) * 0.5;
      const auto teacherLogits = torch::matmul(teacherHidden, teacherWeight.t());
      auto h = hidden.clone().requires_grad_(true), w = weight.clone().requires_grad_(true);
      const auto ref = j::teacherKlLoss(torch::matmul(h, w.t()), teacherLogits);
      (ref * 1.5).backward();
      for (const int64_t chunk : {1, 4, 0}) {
        auto h2 = hidden.clone().requires_grad_(true), w2 = weight.clone().requires_grad_(true);
        const auto got = j::linearTeacherKl(h2, w2, teacherHidden, teacherWeight, chunk);
        (got * 1.5).backward();
        const double tol = dtype == torch::kDouble ? 1e-6 : 1e-5;
        const double el = relErr(got, ref), eh = relErr(h2.grad(), h.grad()), ew = relErr(w2.grad(), w.grad());
        QVERIFY2(el < tol && eh < tol && ew < tol, ("chunk " + std::to_string(chunk) + ": loss " + std::to_string(el) +
                                                    ", hidden " + std::to_string(eh) + ", weight " + std::to_string(ew))
                                                       .c_str());
      }
    }
  }

  void bf16HiddenWithFp32Head() {
    // As a bf16 run computes it: the head cast to bf16 for the product, its gradient back in fp32.
    torch::manual_seed(6);
    const auto hidden = torch::randn({64, 32}).to(torch::kBFloat16), weight = torch::randn({200, 32}) * 0.2;
    const auto targets = torch::randint(0, 200, {64}, torch::kLong);
    const auto ref = lossAndGrads(hidden, weight, targets, 0, false);
    const auto got = lossAndGrads(hidden, weight, targets, 16, true);
    HH_COMPARE_DTYPE(got.hidden.scalar_type(), torch::kBFloat16);
    HH_COMPARE_DTYPE(got.weight.scalar_type(), torch::kFloat);
    QVERIFY(relErr(got.loss, ref.loss) < 1e-5);
    QVERIFY(relErr(got.hidden, ref.hidden) < 2e-2);
    QVERIFY(relErr(got.weight, ref.weight) < 2e-2);
  }

  void noGradientsWhereNoneAsked() {
    const auto hidden = torch::randn({10, 8}), weight = torch::randn({30, 8}).requires_grad_(true);
    const auto targets = torch::randint(0, 30, {10}, torch::kLong);
    {
      at::NoGradGuard noGrad;
      const auto loss = j::linearCrossEntropy(hidden, weight, targets);
      QVERIFY(!loss.requires_grad());
    }
    const auto loss = j::linearCrossEntropy(hidden, weight, targets, 3);  // the head alone trains
    loss.backward();
    QVERIFY(weight.grad().defined() && weight.grad().abs().sum().item<double>() > 0);
    bool threw = false;
    try {
      j::linearCrossEntropy(hidden, torch::randn({30, 9}), targets);
    } catch (const c10::Error&) {
      threw = true;
    }
    QVERIFY(threw);
  }

  void modelLossEqualsLogitsLoss() {
    for (const char* name : {"tiny-random-gpt2", "stories260K"}) {
      auto model = hh::models::loadModel(std::string(HH_FIXTURES_DIR) + "/" + name);
      QVERIFY(model->outputEmbedding().defined());
      torch::manual_seed(7);
      const auto ids = torch::randint(0, model->config().vocabSize, {3, 20}, torch::kLong);
      const auto ref = j::nextTokenLoss(model->forward(ids).logits, ids);
      ref.backward();
      std::vector<torch::Tensor> refGrads;
      for (auto& p : model->parameters()) refGrads.push_back(p.grad().clone()), p.mutable_grad().zero_();
      const auto got = j::modelNextTokenLoss(*model, ids);
      got.backward();
      qInfo("%s: loss %.7f fused, %.7f from logits", name, got.item<double>(), ref.item<double>());
      QVERIFY(std::abs(got.item<double>() - ref.item<double>()) < 1e-5 * std::abs(ref.item<double>()));
      size_t i = 0;
      for (auto& p : model->parameters()) {
        const double scale = refGrads[i].abs().max().item<double>();
        QVERIFY((p.grad() - refGrads[i]).abs().max().item<double>() <= 1e-4 * std::max(scale, 1e-12));
        ++i;
      }
    }
  }

  void modelTeacherKlEqualsLogitsKl() {
    const std::string dir = std::string(HH_FIXTURES_DIR) + "/tiny-random-gpt2";
    auto teacher = hh::models::loadModel(dir), student = hh::models::loadModel(dir);
    {
      at::NoGradGuard noGrad;
      torch::manual_seed(9);
      for (auto& p : student->parameters()) p.add_(torch::randn_like(p) * 0.05);  // away from the teacher
    }
    const auto ids = torch::randint(0, student->config().vocabSize, {2, 16}, torch::kLong);
    torch::Tensor teacherLogits;
    {
      at::NoGradGuard noGrad;
      hh::models::ForwardOptions options;
      options.teacher = true;
      teacherLogits = teacher->forward(ids, options).logits;
    }
    const auto ref = j::teacherKlLoss(student->forward(ids).logits, teacherLogits);
    ref.backward();
    std::vector<torch::Tensor> refGrads;
    for (auto& p : student->parameters()) refGrads.push_back(p.grad().clone()), p.mutable_grad().zero_();
    const auto got = j::modelTeacherKlLoss(*student, *teacher, ids);
    got.backward();
    qInfo("KL %.7g fused, %.7g from logits", got.item<double>(), ref.item<double>());
    QVERIFY(ref.item<double>() > 1e-4);
    QVERIFY(std::abs(got.item<double>() - ref.item<double>()) < 1e-5 * ref.item<double>());
    size_t i = 0;
    for (auto& p : student->parameters()) {
      const double scale = refGrads[i].abs().max().item<double>();
      QVERIFY((p.grad() - refGrads[i]).abs().max().item<double>() <= 1e-4 * std::max(scale, 1e-12));
      ++i;
    }
    for (auto& p : teacher->parameters()) QVERIFY(!p.grad().defined());
  }
};

HH_TEST_SUITE(TestLinearCrossEntropy, "engine.jobs.linear_cross_entropy",
              &TestLinearCrossEntropy::matchesCrossEntropyOnLogits, &TestLinearCrossEntropy::teacherKlMatchesKlOnLogits,
              &TestLinearCrossEntropy::bf16HiddenWithFp32Head, &TestLinearCrossEntropy::noGradientsWhereNoneAsked,
              &TestLinearCrossEntropy::modelLossEqualsLogitsLoss, &TestLinearCrossEntropy::modelTeacherKlEqualsLogitsKl)

}  // namespace test_linear_cross_entropy

#if HH_HAVE_QTEST
#include "test_linear_cross_entropy.moc"
#endif
