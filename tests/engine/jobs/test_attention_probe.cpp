// engine.jobs.attention_probe: candidate linear attentions measured in one forward of the teacher
// equal, to the bit, what each measures when the model itself carries it (its own plan, one forward
// each): the evaluation's table measures every untrained feature map that way. On stories260K
// (grouped KV heads, RoPE) and tiny-random-gpt2 with padded rows (the key mask), with maps of
// every shape the engine has: plain, seeded random features, a gated rule (which reads the
// layer's hidden input) and a sliding window. A padded row measures as its text alone: the
// padding's query rows are left out of the means like its keys (1e-5 relative).

#include <torch/types.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "engine/config/attention_plan.h"
#include "engine/config/attention_types.h"
#include "engine/jobs/attention_probe.h"
#include "engine/jobs/job_support.h"
#include "engine/models/model_io.h"
#include "tests/support/hh_test.h"
#include "tests/support/test_device.h"

namespace test_attention_probe {

namespace {

namespace j = hh::jobs;
namespace m = hh::models;

const std::vector<int64_t> kLayers{0, 2};
const std::vector<std::string> kMaps{"hedgehog", "performer", "taylor", "exp_t=2", "t2r/gated", "hedgehog_window(8)"};

// Map `index` of kMaps on kLayers. The global generator is seeded first: a gated rule's
// projections are drawn from it, and both sides of the comparison must hold the same module.
m::AttentionPlan planFor(const m::TransformerModel& model, size_t index) {
  torch::manual_seed(static_cast<uint64_t>(100 + index));
  const auto& spec = kMaps[index];
  auto linear = *hh::attn::parseLayerAttention(spec);
  linear.featureMap.seed = 7;
  return m::AttentionPlan::hybrid(model.layerCount(), kLayers, linear);
}

// What a table row holds: [kl, entropy_linear, monotonicity] values, and the softmax entropy.
std::vector<std::vector<double>> linearTables(const j::HeadMeasures& h) {
  return {h.kl.values, h.entropyLinear.values, h.monotonicity.values};
}

// Candidates [map][layer] made by the model's own plans, the plans removed again.
std::vector<std::vector<hh::attn::LinearAttention>> candidatesOf(m::TransformerModel& model) {
  std::vector<std::vector<hh::attn::LinearAttention>> out;
  for (size_t i = 0; i < kMaps.size(); ++i) {
    model.setAttentionPlan(planFor(model, i));
    auto& modules = out.emplace_back();
    for (int64_t l = 0; l < model.layerCount(); ++l) modules.push_back(model.linearAttention(l));
  }
  model.setAttentionPlan(m::AttentionPlan{});
  return out;
}

bool closeValues(const std::vector<double>& a, const std::vector<double>& b, double tolerance) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (!(std::abs(a[i] - b[i]) <= tolerance * std::max(1.0, std::abs(b[i])) || (std::isnan(a[i]) && std::isnan(b[i]))))
      return false;
  return true;
}

bool sameValues(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (!(a[i] == b[i] || (std::isnan(a[i]) && std::isnan(b[i])))) return false;
  return true;
}

}  // namespace

class TestAttentionProbe : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void candidatesEqualTheirOwnPlansOnStories260K();
  void candidatesEqualTheirOwnPlansOnPaddedRows();
  void candidatesOfTheWrongDepthAreRefused();
  void paddingMeasuresAsTheTextAlone();

 private:
  void checkCandidates(const std::string& model, bool padded);
};

void TestAttentionProbe::candidatesEqualTheirOwnPlansOnStories260K() {
  HH_SKIP_UNLESS_TEST_DEVICE();
  checkCandidates("stories260K", false);
}

void TestAttentionProbe::candidatesEqualTheirOwnPlansOnPaddedRows() {
  HH_SKIP_UNLESS_TEST_DEVICE();
  checkCandidates("tiny-random-gpt2", true);
}

void TestAttentionProbe::checkCandidates(const std::string& model, bool padded) {
  const auto load = j::loadOptions(hh::test::testDevice(), hh::test::testDtype());
  auto teacher = m::loadModel(std::string(HH_FIXTURES_DIR) + "/" + model, load);
  torch::manual_seed(3);
  const int64_t B = 2, T = 40;
  const auto ids = torch::randint(3, 200, {B, T}, torch::TensorOptions(torch::kLong).device(load.device));
  torch::Tensor mask;
  if (padded) {
    mask = torch::ones({B, T}, torch::TensorOptions(torch::kLong).device(load.device));
    mask[1].narrow(0, T - 11, 11).fill_(0);  // the second row ends 11 tokens early
  }

  j::ProbeRequest request;
  request.candidates = candidatesOf(*teacher);
  const auto together = j::probeAttention(*teacher, ids, mask, request);
  QCOMPARE(together.candidateHeads.size(), kMaps.size());

  for (size_t i = 0; i < kMaps.size(); ++i) {
    teacher->setAttentionPlan(planFor(*teacher, i));
    const auto alone = j::probeAttention(*teacher, ids, mask, j::ProbeRequest{}).heads;
    const auto want = linearTables(alone), got = linearTables(together.candidateHeads[i]);
    for (size_t t = 0; t < want.size(); ++t)
      QVERIFY2(sameValues(got[t], want[t]), (kMaps[i] + ": table " + std::to_string(t) + " differs").c_str());
    QVERIFY2(sameValues(together.heads.entropySoftmax.values, alone.entropySoftmax.values), kMaps[i].c_str());
    // Layers the map does not go into stay NaN; its layers are measured.
    const int H = alone.kl.heads;
    QVERIFY(std::isnan(got[0][static_cast<size_t>(1 * H)]) && std::isfinite(got[0][0]) && std::isfinite(got[2][0]));
  }
  teacher->setAttentionPlan(m::AttentionPlan{});
  // The teacher itself is all softmax: its own linear columns are NaN.
  QVERIFY(std::isnan(together.heads.kl.values[0]) && std::isfinite(together.heads.entropySoftmax.values[0]));
}

void TestAttentionProbe::candidatesOfTheWrongDepthAreRefused() {
  auto teacher = m::loadModel(std::string(HH_FIXTURES_DIR) + "/tiny-random-gpt2", j::loadOptions("cpu"));
  j::ProbeRequest request;
  request.candidates = {std::vector<hh::attn::LinearAttention>(1, nullptr)};
  const auto ids = torch::randint(3, 200, {1, 8}, torch::kLong);
  HH_VERIFY_THROWS(std::exception, j::probeAttention(*teacher, ids, {}, request));
}

void TestAttentionProbe::paddingMeasuresAsTheTextAlone() {
  auto teacher = m::loadModel(std::string(HH_FIXTURES_DIR) + "/tiny-random-gpt2", j::loadOptions("cpu"));
  teacher->setAttentionPlan(planFor(*teacher, 0));
  torch::manual_seed(5);
  const int64_t T = 40, text = 29;
  const auto ids = torch::randint(3, 200, {1, T}, torch::kLong);
  auto mask = torch::zeros({1, T}, torch::kLong);
  mask.narrow(1, 0, text).fill_(1);
  const auto padded = j::probeAttention(*teacher, ids, mask, j::ProbeRequest{}).heads;
  const auto alone = j::probeAttention(*teacher, ids.narrow(1, 0, text), {}, j::ProbeRequest{}).heads;
  const auto want = linearTables(alone), got = linearTables(padded);
  for (size_t t = 0; t < want.size(); ++t)
    QVERIFY2(closeValues(got[t], want[t], 1e-5), ("table " + std::to_string(t) + " counts the padding's rows").c_str());
  QVERIFY(closeValues(padded.entropySoftmax.values, alone.entropySoftmax.values, 1e-5));
  QVERIFY(std::isfinite(got[0][0]));
}

HH_TEST_SUITE(TestAttentionProbe, "engine.jobs.attention_probe",
              &TestAttentionProbe::candidatesEqualTheirOwnPlansOnStories260K,
              &TestAttentionProbe::candidatesEqualTheirOwnPlansOnPaddedRows,
              &TestAttentionProbe::candidatesOfTheWrongDepthAreRefused,
              &TestAttentionProbe::paddingMeasuresAsTheTextAlone)

}  // namespace test_attention_probe

#if HH_HAVE_QTEST
#include "test_attention_probe.moc"
#endif
